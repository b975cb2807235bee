//! The failures the gateway does not answer (DRIVER.md, Client-side
//! kinds), and the wire's `internal`: no gateway at all, a gateway that
//! never answers, a reply the library cannot read, a corrupt record.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{assert_names_no_owner, every_call};
use crate::ctx::Ctx;
use crate::taps::{LEASE_SUBJECTS, Tap};

pub async fn no_gateway_is_unavailable(ctx: &Ctx) {
    let bare = ctx.bare().await;
    let d = ctx.driver(&bare.server.url).await;
    for (method, args) in every_call(&ctx.name("k"), &ctx.name("a"), &ctx.name("b")) {
        let err = d.call_fails(method, args, "unavailable").await;
        assert_names_no_owner(&err);
    }
}

pub async fn no_reply_within_the_client_timeout_is_timeout(ctx: &Ctx) {
    let bare = ctx.bare().await;
    // Listens on every lease subject and never answers.
    let silent = Tap::start(&bare.client, LEASE_SUBJECTS).await;
    let call_timeout = ctx.spec.ms("call_timeout_ms");
    let d = ctx.driver_with(&bare.server.url, Some(call_timeout)).await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let forward_timeout = ctx.spec.u64("forward_timeout_ms");
    let calls = every_call(&key, &a, &b);
    let methods = calls.len();
    for (method, mut args) in calls {
        let waits = if method == "forward" {
            args["timeout_ms"] = forward_timeout.into();
            Duration::from_millis(forward_timeout)
        } else {
            call_timeout
        };
        let asked = Instant::now();
        let err = d.call_fails(method, args, "timeout").await;
        assert_names_no_owner(&err);
        let took = asked.elapsed();
        let early = ctx.spec.ms("early_by_at_most_ms");
        assert!(
            took + early >= waits,
            "{method} gave up after {took:?}, before its {waits:?}"
        );
    }
    let sent = silent
        .seen
        .all()
        .into_iter()
        .map(|(_, msg)| msg.subject.to_string());
    let sent: std::collections::BTreeSet<String> = sent.collect();
    assert_eq!(sent.len(), methods, "each call was sent: {sent:?}");
}

pub async fn an_unreadable_reply_is_internal(ctx: &Ctx) {
    let bare = ctx.bare().await;
    // Each request gets the reply its key (a list's: its prefix) names:
    // `<prefix>-<method>-<n>` the n-th reply of that method in the file.
    let prefix = ctx.name("r");
    let methods = ["acquire", "owner", "release", "list", "forward"];
    let replies: Arc<Vec<(&str, Vec<String>)>> = Arc::new(
        methods
            .into_iter()
            .map(|method| (method, ctx.spec.strings(&format!("{method}_replies"))))
            .collect(),
    );
    let (lookup, answers) = (prefix.clone(), replies.clone());
    let _responder = Tap::answering(&bare.client, LEASE_SUBJECTS, move |msg| {
        let body: Value = serde_json::from_slice(&msg.payload).ok()?;
        let named = body["key"].as_str().or(body["prefix"].as_str())?;
        let key = named.strip_prefix(&format!("{lookup}-"))?;
        let (method, n) = key.rsplit_once('-')?;
        let (_, bodies) = answers.iter().find(|(m, _)| *m == method)?;
        Some(Bytes::from(bodies.get(n.parse::<usize>().ok()?)?.clone()))
    })
    .await;
    let d = ctx.driver(&bare.server.url).await;
    let (holder, other) = (ctx.name("a"), ctx.name("b"));
    // The first reply of each method is a valid one: the responder works.
    for (method, bodies) in replies.iter() {
        for n in 0..bodies.len() {
            let key = format!("{prefix}-{method}-{n}");
            let (_, args) = every_call(&key, &holder, &other)
                .into_iter()
                .find(|(m, _)| m == method)
                .expect("every method has a call");
            if n == 0 {
                d.call_ok(method, args).await;
            } else {
                let err = d.call_fails(method, args, "internal").await;
                assert_names_no_owner(&err);
            }
        }
    }
}

pub async fn a_corrupt_record_is_internal(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, holder) = (ctx.name("k"), ctx.name("a"));
    // Written behind the gateway's back, as another tool could.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Dagnats-Lease-Event", "acquired");
    headers.insert("Nats-TTL", "60s");
    let ack = world
        .client
        .request_with_headers(format!("$KV.leases.{key}"), headers, "not a record".into())
        .await
        .expect("JetStream acknowledges the write");
    let ack: Value = serde_json::from_slice(&ack.payload).expect("a JSON ack");
    let at = ack["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("no seq in {ack}"));
    ctx.note(format!("wrote a corrupt record on {key} at {at}"));
    let calls = [
        ("owner", json!({"key": key})),
        (
            "acquire",
            json!({"key": key, "holder": holder, "ttl_ms": 3000}),
        ),
        (
            "renew",
            json!({"key": key, "holder": holder, "revision": at, "ttl_ms": 3000}),
        ),
        (
            "release",
            json!({"key": key, "holder": holder, "revision": at}),
        ),
    ];
    for (method, args) in calls {
        let err = d.call_fails(method, args, "internal").await;
        assert_names_no_owner(&err);
    }
}
