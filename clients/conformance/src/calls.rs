//! The `call` op: one `LeaseClient` call, its arguments passed as given
//! (out-of-bounds ones included, for the library to refuse) and its typed
//! reply read back field by field under the wire's names.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use dagnats_leases_client::LeaseClient;
use dagnats_leases_client::wire::reply::{Grant, Lease, Owner};
use dagnats_leases_client::wire::timefmt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::protocol::Failure;

#[derive(Deserialize)]
struct Acquire {
    key: String,
    holder: String,
    ttl_ms: u64,
}

#[derive(Deserialize)]
struct Renew {
    key: String,
    holder: String,
    revision: u64,
    ttl_ms: u64,
}

#[derive(Deserialize)]
struct Release {
    key: String,
    holder: String,
    revision: u64,
}

#[derive(Deserialize)]
struct KeyOnly {
    key: String,
}

#[derive(Deserialize)]
struct Transfer {
    key: String,
    holder: String,
    revision: u64,
    to: String,
    ttl_ms: u64,
}

#[derive(Deserialize)]
struct List {
    prefix: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
struct Forward {
    key: String,
    payload_b64: String,
    timeout_ms: u64,
}

fn args<T: DeserializeOwned>(args: Value) -> Result<T, Failure> {
    serde_json::from_value(args).map_err(|err| Failure::driver("bad_request", err))
}

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Runs `method` with `args`.
pub async fn call(client: &LeaseClient, method: &str, a: Value) -> Result<Value, Failure> {
    Ok(match method {
        "acquire" => {
            let a: Acquire = args(a)?;
            grant(client.acquire(&a.key, &a.holder, ms(a.ttl_ms)).await?)
        }
        "renew" => {
            let a: Renew = args(a)?;
            let renewed = client.renew(&a.key, &a.holder, a.revision, ms(a.ttl_ms));
            grant(renewed.await?)
        }
        "release" => {
            let a: Release = args(a)?;
            let r = client.release(&a.key, &a.holder, a.revision).await?;
            json!({"released": r.released, "held": r.held, "key": r.key,
                   "holder": r.holder, "revision": r.revision})
        }
        "owner" => {
            let a: KeyOnly = args(a)?;
            match client.owner(&a.key).await? {
                Owner::Held(held) => lease(&held),
                Owner::Free(free) => json!({"held": free.held, "key": free.key}),
            }
        }
        "transfer" => {
            let a: Transfer = args(a)?;
            let moved = client.transfer(&a.key, &a.holder, a.revision, &a.to, ms(a.ttl_ms));
            grant(moved.await?)
        }
        "list" => {
            let a: List = args(a)?;
            let prefix = a.prefix.unwrap_or_default();
            let page = client.list(&prefix, a.after.as_deref(), a.limit).await?;
            json!({"leases": page.leases.iter().map(lease).collect::<Vec<_>>(), "next": page.next})
        }
        "forward" => {
            let a: Forward = args(a)?;
            let payload = BASE64
                .decode(&a.payload_b64)
                .map_err(|err| Failure::driver("bad_request", err))?;
            let forwarded = client.forward(&a.key, payload.into(), ms(a.timeout_ms));
            json!({"payload_b64": BASE64.encode(&forwarded.await?.payload.0)})
        }
        other => {
            return Err(Failure::driver(
                "bad_request",
                format!("no method {other:?}"),
            ));
        }
    })
}

fn lease(lease: &Lease) -> Value {
    json!({
        "held": lease.held,
        "key": lease.key,
        "holder": lease.holder,
        "revision": lease.revision,
        "acquired_at": timefmt::format(lease.acquired_at),
        "expires_at": timefmt::format(lease.expires_at),
        "ttl_ms": lease.ttl_ms,
    })
}

pub fn grant(grant: Grant) -> Value {
    let mut value = lease(&grant.lease);
    value["granted"] = grant.granted.into();
    value
}
