//! The owner inbox's rules (docs/protocol.md, Forwarding to the owner),
//! sent to it directly by the runner as dagnats would: each rejection is
//! an empty body with `Dagnats-Lease-Reject: stale` and never reaches the
//! handler; an accepted request reaches it with its key, fence and payload.

use std::time::Duration;

use async_nats::Message;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use dagnats_leases_client::headers::is_stale_reject;
use dagnats_leases_client::wire::names::{HEADER_FENCE, INBOX_PREFIX};
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::driver::Driver;
use crate::world::Bare;

/// How long the runner waits for an inbox to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// An inbox serving `holder` as the owner of `key` since `tenure`, and
/// nothing else.
struct Served {
    bare: Bare,
    d: Driver,
    holder: String,
    key: String,
    tenure: u64,
}

impl Served {
    async fn start(ctx: &Ctx) -> Served {
        let bare = ctx.bare().await;
        let d = ctx.driver(&bare.server.url).await;
        let (holder, key) = (ctx.name("h"), ctx.name("k"));
        let tenure = ctx.spec.u64("tenure");
        d.ok(json!({"op": "inbox.serve", "inbox": "i", "holder": holder,
                    "tenures": {"fixed": {&key: tenure}}, "mode": "echo"}))
            .await;
        Served {
            bare,
            d,
            holder,
            key,
            tenure,
        }
    }

    /// A forwarded request for `key`, with `fence` as its fence header
    /// (none when `None`), as dagnats sends it.
    async fn send(&self, key: &str, fence: Option<&str>, payload: &str) -> Message {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(fence) = fence {
            headers.insert(HEADER_FENCE, fence);
        }
        let subject = format!("{INBOX_PREFIX}.{}.{key}", self.holder);
        let request =
            self.bare
                .client
                .request_with_headers(subject, headers, payload.to_string().into());
        tokio::time::timeout(ANSWER_WITHIN, request)
            .await
            .unwrap_or_else(|_| {
                panic!("the inbox did not answer {key} at fence {fence:?} within {ANSWER_WITHIN:?}")
            })
            .unwrap_or_else(|err| {
                panic!("the inbox did not answer {key} at fence {fence:?}: {err}")
            })
    }

    /// The request is rejected: an empty body and the reject header.
    async fn rejected(&self, key: &str, fence: Option<&str>) {
        let reply = self.send(key, fence, "rejected?").await;
        let why = format!(
            "{key} at fence {fence:?}: {:?} {:?}",
            reply.headers, reply.payload
        );
        assert!(
            reply.payload.is_empty(),
            "a rejection has an empty body: {why}"
        );
        assert!(
            is_stale_reject(reply.headers.as_ref()),
            "Dagnats-Lease-Reject: stale: {why}"
        );
    }

    /// The request is accepted: the handler got it (its event) and its
    /// reply came back.
    async fn accepted(&self, fence: u64, payload: &str) {
        let reply = self
            .send(&self.key, Some(&fence.to_string()), payload)
            .await;
        assert_eq!(
            reply.payload,
            format!("echo:{payload}").into_bytes(),
            "fence {fence}"
        );
        let expected = json!({"event": "inbox", "inbox": "i", "key": self.key, "fence": fence,
                              "payload_b64": BASE64.encode(payload)});
        let found = self
            .d
            .events
            .first_from(0, ANSWER_WITHIN, |e| *e == expected)
            .await;
        assert!(found.is_some(), "no inbox event {expected}");
    }

    /// Only what was accepted reached the handler: one last accepted
    /// request, and its event is the only one.
    async fn nothing_else_handled(&self) {
        self.accepted(self.tenure, "last").await;
        let handled: Vec<Value> = self.d.events.all().into_iter().map(|(_, e)| e).collect();
        assert_eq!(
            handled.len(),
            1,
            "rejected requests reached the handler: {handled:#?}"
        );
    }
}

pub async fn the_inbox_rejects_a_key_it_does_not_own(ctx: &Ctx) {
    let s = Served::start(ctx).await;
    let fence = (s.tenure + 1).to_string();
    s.rejected(&ctx.name("other"), Some(&fence)).await;
    s.nothing_else_handled().await;
}

pub async fn the_inbox_rejects_a_missing_or_malformed_fence(ctx: &Ctx) {
    let s = Served::start(ctx).await;
    s.rejected(&s.key, None).await;
    for fence in ctx.spec.strings("malformed") {
        s.rejected(&s.key, Some(&fence)).await;
    }
    s.nothing_else_handled().await;
}

pub async fn the_inbox_rejects_a_fence_below_its_tenure(ctx: &Ctx) {
    let s = Served::start(ctx).await;
    for fence in ctx.spec.u64s("below") {
        assert!(
            fence < s.tenure,
            "scenarios.toml: {fence} is not below {}",
            s.tenure
        );
        s.rejected(&s.key, Some(&fence.to_string())).await;
    }
    s.nothing_else_handled().await;
}

pub async fn the_inbox_accepts_a_fence_at_or_above_its_tenure(ctx: &Ctx) {
    let s = Served::start(ctx).await;
    let fences = ctx.spec.u64s("accepted");
    for (n, fence) in fences.iter().enumerate() {
        assert!(
            *fence >= s.tenure,
            "scenarios.toml: {fence} is below {}",
            s.tenure
        );
        s.accepted(*fence, &format!("p{n}")).await;
    }
    assert_eq!(
        s.d.events.len(),
        fences.len(),
        "one handler call per request"
    );
}
