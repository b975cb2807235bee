//! Forward through the shared gateway to an owner inbox the same driver
//! serves: the owner's reply, and each forward error kind with the owner
//! it names.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{assert_names_no_owner, assert_names_owner, revision};
use crate::ctx::Ctx;
use crate::driver::Driver;

/// Forwards `payload` to `key`'s owner with `timeout_ms`.
fn forward_args(key: &str, payload: &[u8], timeout_ms: u64) -> Value {
    json!({"key": key, "payload_b64": BASE64.encode(payload), "timeout_ms": timeout_ms})
}

/// A driver on the shared gateway whose holder acquired a key of its own.
struct Holding {
    d: Driver,
    key: String,
    holder: String,
    fence: u64,
}

impl Holding {
    async fn start(ctx: &Ctx) -> Holding {
        let (_world, d) = ctx.on_shared_world().await;
        let (key, holder) = (ctx.name("k"), ctx.name("h"));
        let ttl_ms = ctx.spec.u64("ttl_ms");
        let args = json!({"key": key, "holder": holder, "ttl_ms": ttl_ms});
        let fence = revision(&d.call_ok("acquire", args).await);
        Holding {
            d,
            key,
            holder,
            fence,
        }
    }

    /// A forward that fails with `kind`, naming this owner.
    async fn forward_fails(&self, timeout_ms: u64, kind: &str) {
        let args = forward_args(&self.key, b"x", timeout_ms);
        let err = self.d.call_fails("forward", args, kind).await;
        assert_names_owner(&err, &self.holder, self.fence);
    }
}

/// Serves `holder`'s inbox as if it held `key` since `tenure` (or
/// nothing, when `None`), answering as `mode` says.
async fn serve(d: &Driver, holder: &str, key: &str, tenure: Option<u64>, mode: &str) {
    let fixed = match tenure {
        Some(tenure) => json!({key: tenure}),
        None => json!({}),
    };
    d.ok(json!({"op": "inbox.serve", "inbox": "i", "holder": holder,
                "tenures": {"fixed": fixed}, "mode": mode}))
        .await;
}

fn inbox_events(d: &Driver) -> Vec<Value> {
    let all = d.events.all().into_iter().map(|(_, e)| e);
    all.filter(|e| e["event"] == "inbox").collect()
}

pub async fn forward_reaches_the_owner_and_returns_its_reply(ctx: &Ctx) {
    let (_world, d) = ctx.on_shared_world().await;
    let (key, holder) = (ctx.name("k"), ctx.name("h"));
    let ttl = ctx.spec.ms("ttl_ms");
    d.keeper_start("k1", &key, &holder, ttl, false).await;
    let fence = d
        .ok(json!({"op": "keeper.wait_owner", "keeper": "k1", "timeout_ms": 10_000}))
        .await;
    let tenure = d
        .keeper_state("k1")
        .await
        .1
        .expect("the owner has a tenure");
    d.ok(json!({"op": "inbox.serve", "inbox": "i", "holder": holder,
                "tenures": {"keeper": "k1"}, "mode": "echo"}))
        .await;
    let reply = d
        .call_ok("forward", forward_args(&key, b"hello", 5_000))
        .await;
    assert_eq!(reply, json!({"payload_b64": BASE64.encode(b"echo:hello")}));
    let got = inbox_events(&d);
    assert_eq!(got.len(), 1, "one request reached the handler: {got:?}");
    let fence_sent = got[0]["fence"].as_u64().expect("a fence");
    assert!(
        fence_sent >= tenure,
        "fence {fence_sent} below the tenure {tenure} ({fence})"
    );
    let expected = json!({"event": "inbox", "inbox": "i", "key": key, "fence": fence_sent,
                          "payload_b64": BASE64.encode(b"hello")});
    assert_eq!(got[0], expected);
}

pub async fn forward_to_a_free_key_is_not_held(ctx: &Ctx) {
    let (_world, d) = ctx.on_shared_world().await;
    let err = d
        .call_fails(
            "forward",
            forward_args(&ctx.name("k"), b"x", 1_000),
            "not_held",
        )
        .await;
    assert_names_no_owner(&err);
}

pub async fn forward_with_no_owner_inbox_is_owner_unavailable_naming_the_owner(ctx: &Ctx) {
    let h = Holding::start(ctx).await;
    h.forward_fails(2_000, "owner_unavailable").await;
}

pub async fn forward_to_an_owner_that_never_answers_is_owner_timeout_naming_the_owner(ctx: &Ctx) {
    let h = Holding::start(ctx).await;
    serve(&h.d, &h.holder, &h.key, Some(h.fence), "hang").await;
    h.forward_fails(ctx.spec.u64("forward_timeout_ms"), "owner_timeout")
        .await;
    let handled = inbox_events(&h.d).len();
    assert_eq!(
        handled, 1,
        "the owner got the request once, and never answered"
    );
}

pub async fn forward_to_an_owner_that_rejects_is_owner_rejected_naming_the_owner(ctx: &Ctx) {
    let h = Holding::start(ctx).await;
    // The inbox acts as owner of nothing: every attempt is rejected.
    serve(&h.d, &h.holder, &h.key, None, "echo").await;
    h.forward_fails(2_000, "owner_rejected").await;
    let handled = inbox_events(&h.d);
    assert_eq!(
        handled,
        Vec::<Value>::new(),
        "a rejected request reaches no handler"
    );
}

pub async fn forward_of_a_reply_too_large_is_reply_too_large_naming_the_owner(ctx: &Ctx) {
    let h = Holding::start(ctx).await;
    serve(&h.d, &h.holder, &h.key, Some(h.fence), "large").await;
    h.forward_fails(5_000, "reply_too_large").await;
}
