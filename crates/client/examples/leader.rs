//! A holder in Rust with nothing but a NATS client: acquire a
//! lease, renew it every third of the TTL, release it. It does not use the
//! dagnats-leases crates: a service needs only NATS to hold a lease.
//!
//! ```sh
//! ./scripts/dev                       # in one terminal
//! cargo run -p dagnats-leases-client --example leader   # in another (NATS_URL to change the server)
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct LeaseRequest<'a> {
    key: &'a str,
    holder: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct LeaseReply {
    #[serde(default)]
    granted: bool,
    #[serde(default)]
    holder: String,
    #[serde(default)]
    revision: u64,
    error: Option<String>,
    kind: Option<String>,
}

async fn call(
    client: &async_nats::Client,
    subject: &str,
    req: &LeaseRequest<'_>,
) -> Result<LeaseReply, String> {
    let body = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    let msg = tokio::time::timeout(
        Duration::from_secs(5),
        client.request(subject.to_string(), body.into()),
    )
    .await
    .map_err(|_| "request timed out".to_string())?
    .map_err(|e| e.to_string())?;
    let reply: LeaseReply = serde_json::from_slice(&msg.payload).map_err(|e| e.to_string())?;
    match (&reply.kind, &reply.error) {
        (Some(kind), Some(error)) => Err(format!("{kind}: {error}")),
        _ => Ok(reply),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let client = async_nats::connect(url).await?;

    let ttl = Duration::from_secs(15);
    let (key, holder) = ("notify-leader", "notify-7f3a");
    let mut req = LeaseRequest {
        key,
        holder,
        revision: None,
        ttl_ms: Some(ttl.as_millis() as u64),
    };
    let mut got = call(&client, "api.leases.acquire", &req).await?;
    if !got.granted {
        println!("held by {}", got.holder);
        return Ok(());
    }
    println!("leader at revision {}", got.revision);
    for _ in 0..3 {
        tokio::time::sleep(ttl / 3).await;
        req.revision = Some(got.revision);
        got = match call(&client, "api.leases.renew", &req).await {
            Ok(renewed) => renewed,
            Err(err) => {
                // "lost" means stop acting as owner now.
                println!("lease lost: {err}");
                return Ok(());
            }
        };
        println!("renewed, revision {}", got.revision);
    }
    req.revision = Some(got.revision);
    if let Err(err) = call(&client, "api.leases.release", &req).await {
        println!("release: {err}");
    }
    Ok(())
}
