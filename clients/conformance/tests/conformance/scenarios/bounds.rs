//! Input out of the protocol's bounds (docs/protocol.md, Input bounds) is
//! refused with `invalid` before anything is sent: the driver runs on a
//! server with no gateway, where the runner's own subscription on the
//! lease subjects sees every request that leaves the library. A last, valid
//! call (the sentinel) proves the subscription was listening: it must be
//! the only request seen.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{assert_names_no_owner, every_call};
use crate::ctx::Ctx;
use crate::driver::Driver;
use crate::taps::{LEASE_SUBJECTS, Tap};
use crate::world::Bare;

/// A wrongly sent request waits this long for its reply: the scenario
/// fails on it quickly.
const CALL_TIMEOUT: Duration = Duration::from_millis(1000);

/// What a bounds scenario runs against.
struct Watched {
    _bare: Bare,
    seen: Tap,
    d: Driver,
    sentinel: String,
    /// Valid values for the arguments a call does not test.
    key: String,
    holder: String,
    other: String,
}

impl Watched {
    async fn start(ctx: &Ctx) -> Watched {
        let bare = ctx.bare().await;
        let sentinel = ctx.name("sentinel");
        let answer = sentinel.clone();
        let seen = Tap::answering(&bare.client, LEASE_SUBJECTS, move |msg| {
            let body: Value = serde_json::from_slice(&msg.payload).ok()?;
            let free = json!({"held": false, "key": answer});
            (msg.subject.as_str() == "api.leases.owner" && body["key"] == answer)
                .then(|| Bytes::from(free.to_string()))
        })
        .await;
        let d = ctx.driver_with(&bare.server.url, Some(CALL_TIMEOUT)).await;
        Watched {
            _bare: bare,
            seen,
            d,
            sentinel,
            key: ctx.name("k"),
            holder: ctx.name("a"),
            other: ctx.name("b"),
        }
    }

    /// `method` with `args` answers `invalid`, naming no owner.
    async fn refused(&self, method: &str, args: Value) {
        let err = self.d.call_fails(method, args, "invalid").await;
        assert_names_no_owner(&err);
    }

    /// Nothing but the sentinel's owner read reached the lease subjects.
    async fn nothing_sent(&self) {
        let answer = self.d.call_ok("owner", json!({"key": self.sentinel})).await;
        assert_eq!(answer, json!({"held": false, "key": self.sentinel}));
        let seen: Vec<String> = self
            .seen
            .seen
            .all()
            .into_iter()
            .map(|(_, msg)| format!("{} {}", msg.subject, String::from_utf8_lossy(&msg.payload)))
            .collect();
        assert_eq!(
            seen.len(),
            1,
            "requests reached the lease subjects: {seen:#?}"
        );
        assert!(seen[0].starts_with("api.leases.owner "), "{seen:?}");
    }
}

/// The file's names out of bounds, and one a byte too long.
fn bad_names(ctx: &Ctx) -> Vec<String> {
    let mut names = ctx.spec.strings("names");
    names.push("k".repeat(ctx.spec.u64("too_long_bytes") as usize));
    names
}

pub async fn a_key_out_of_bounds_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    for key in bad_names(ctx) {
        for (method, args) in every_call(&key, &w.holder, &w.other) {
            // An empty prefix is every key; any other follows the key rules.
            if method != "list" || !key.is_empty() {
                w.refused(method, args).await;
            }
        }
        w.refused("list", json!({"prefix": null, "after": key, "limit": null}))
            .await;
    }
    w.nothing_sent().await;
}

pub async fn a_holder_out_of_bounds_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    for holder in bad_names(ctx) {
        for (method, args) in every_call(&w.key, &holder, &w.other) {
            if args.get("holder").is_some() {
                w.refused(method, args).await;
            }
        }
        let to =
            json!({"key": w.key, "holder": w.other, "revision": 5, "to": holder, "ttl_ms": 3000});
        w.refused("transfer", to).await;
    }
    w.nothing_sent().await;
}

pub async fn a_ttl_out_of_bounds_or_not_whole_seconds_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    let (k, h, to) = (&w.key, &w.holder, &w.other);
    for ttl in ctx.spec.u64s("ttl_ms") {
        w.refused("acquire", json!({"key": k, "holder": h, "ttl_ms": ttl}))
            .await;
        w.refused(
            "renew",
            json!({"key": k, "holder": h, "revision": 5, "ttl_ms": ttl}),
        )
        .await;
        let transfer = json!({"key": k, "holder": h, "revision": 5, "to": to, "ttl_ms": ttl});
        w.refused("transfer", transfer).await;
    }
    w.nothing_sent().await;
}

pub async fn revision_0_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    let (k, h, to) = (&w.key, &w.holder, &w.other);
    w.refused(
        "renew",
        json!({"key": k, "holder": h, "revision": 0, "ttl_ms": 3000}),
    )
    .await;
    w.refused("release", json!({"key": k, "holder": h, "revision": 0}))
        .await;
    let transfer = json!({"key": k, "holder": h, "revision": 0, "to": to, "ttl_ms": 3000});
    w.refused("transfer", transfer).await;
    w.nothing_sent().await;
}

pub async fn a_forward_timeout_out_of_bounds_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    for timeout_ms in ctx.spec.u64s("timeout_ms") {
        let forward = json!({"key": w.key, "payload_b64": "", "timeout_ms": timeout_ms});
        w.refused("forward", forward).await;
    }
    w.nothing_sent().await;
}

pub async fn a_list_limit_out_of_bounds_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    for limit in ctx.spec.u64s("limit") {
        w.refused(
            "list",
            json!({"prefix": null, "after": null, "limit": limit}),
        )
        .await;
    }
    w.nothing_sent().await;
}

pub async fn a_transfer_to_the_holder_itself_is_invalid_and_nothing_is_sent(ctx: &Ctx) {
    let w = Watched::start(ctx).await;
    let (k, h) = (&w.key, &w.holder);
    let transfer = json!({"key": k, "holder": h, "revision": 5, "to": h, "ttl_ms": 3000});
    w.refused("transfer", transfer).await;
    w.nothing_sent().await;
}

pub async fn a_forward_too_large_for_max_payload_is_payload_too_large_and_nothing_is_sent(
    ctx: &Ctx,
) {
    let w = Watched::start(ctx).await;
    let payload = "x".repeat(ctx.spec.u64("payload_bytes") as usize);
    let payload_b64 = base64::engine::general_purpose::STANDARD.encode(payload);
    let forward = json!({"key": w.key, "payload_b64": payload_b64, "timeout_ms": 1000});
    let err =
        w.d.call_fails("forward", forward, "payload_too_large")
            .await;
    assert_names_no_owner(&err);
    w.nothing_sent().await;
}
