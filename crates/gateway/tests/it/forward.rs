//! `api.leases.forward`: delivery to the owner's inbox with the fence, and
//! the retry rule (docs/protocol.md, Forwarding to the owner), counted from
//! the owner's side.

use std::time::Duration;

use crate::common;
use crate::common::owner::{Answer, Owner};
use crate::common::takeover::{self, Takeover};
use crate::common::{Setup, stream_state};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use serde_json::{Value, json};

async fn acquire(s: &Setup, key: &str, holder: &str) -> Value {
    let reply = s.acquire(key, holder, 30000).await;
    assert_eq!(reply["granted"], true, "{reply}");
    reply
}

fn forward(key: &str, payload: &[u8], timeout_ms: u64) -> Value {
    json!({"key": key, "payload": STANDARD.encode(payload), "timeout_ms": timeout_ms})
}

fn assert_owner_error(reply: &Value, kind: &str, holder: &str, revision: &Value) {
    assert_eq!(reply["kind"], kind, "{reply}");
    assert_eq!(reply["holder"], holder, "{reply}");
    assert_eq!(&reply["revision"], revision, "{reply}");
    assert!(reply["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(reply.as_object().unwrap().len(), 4, "{reply}");
}

#[tokio::test]
async fn forward_delivers_the_payload_with_the_fence_and_returns_only_the_reply_body() {
    let s = Setup::start().await;
    let lease = acquire(&s, "shard-1", "worker-a").await;
    let owner = Owner::start(&s.client, "worker-a", Answer::Echo).await;
    let payload = [0u8, 159, 146, 150, b'h', b'i'];
    let reply = s.call("forward", forward("shard-1", &payload, 2000)).await;
    let mut expected = format!("echo:{}:", lease["revision"]).into_bytes();
    expected.extend_from_slice(&payload);
    assert_eq!(
        reply,
        json!({"key": "shard-1", "holder": "worker-a", "revision": lease["revision"],
               "payload": STANDARD.encode(&expected)})
    );
    assert_eq!(owner.received(), 1);
}

#[tokio::test]
async fn a_payload_with_stray_bits_after_its_last_byte_is_those_bytes() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "a").await;
    let _owner = Owner::start(&s.client, "a", Answer::Echo).await;
    // "CV0C4N==" sets bits past the last whole byte; "CV0C4A==" does not.
    let body = json!({"key": "k", "payload": "CV0C4N==", "timeout_ms": 2000});
    let reply = s.call("forward", body).await;
    let mut expected = format!("echo:{}:", lease["revision"]).into_bytes();
    expected.extend_from_slice(&STANDARD.decode("CV0C4A==").unwrap());
    assert_eq!(reply["payload"], STANDARD.encode(&expected), "{reply}");
}

#[tokio::test]
async fn forward_timeout_defaults_to_5000_ms() {
    let s = Setup::start().await;
    acquire(&s, "k", "a").await;
    let _owner = Owner::start(&s.client, "a", Answer::Echo).await;
    for body in [
        json!({"key": "k", "payload": ""}),
        json!({"key": "k", "payload": "", "timeout_ms": null}),
    ] {
        assert_eq!(s.call("forward", body).await["holder"], "a");
    }
}

#[tokio::test]
async fn timeout_ms_of_100_and_30000_are_accepted() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "a").await;
    let _owner = Owner::start(&s.client, "a", Answer::Echo).await;
    for timeout_ms in [100, 30000] {
        let reply = s.call("forward", forward("k", b"", timeout_ms)).await;
        assert_eq!(reply["holder"], "a", "{timeout_ms}: {reply}");
        assert_eq!(
            reply["revision"], lease["revision"],
            "{timeout_ms}: {reply}"
        );
    }
}

/// "timeout_ms bounds the whole call": a generous allowance for a loaded
/// machine on top of it. A bound, not a benchmark.
const MARGIN: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_forward_retried_after_no_responders_is_answered_within_timeout_ms() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "gone").await;
    let started = std::time::Instant::now();
    let reply = s.call("forward", forward("k", b"x", 3000)).await;
    assert_owner_error(&reply, "owner_unavailable", "gone", &lease["revision"]);
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(3000) + MARGIN,
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn retries_share_one_timeout_ms_rather_than_one_each() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "slow").await;
    // Rejects after 4 s: a second attempt fits in 6 s, a third cannot, and
    // three full attempts (12 s) would overrun timeout_ms plus the margin.
    let owner = Owner::start(
        &s.client,
        "slow",
        Answer::RejectAfter(Duration::from_secs(4)),
    )
    .await;
    let started = std::time::Instant::now();
    let reply = s.call("forward", forward("k", b"x", 6000)).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(6000) + MARGIN,
        "{elapsed:?}"
    );
    // The second attempt ran out of time: it may have been processed.
    assert_owner_error(&reply, "owner_timeout", "slow", &lease["revision"]);
    assert_eq!(owner.received(), 2);
}

#[tokio::test]
async fn forward_of_a_free_key_is_not_held() {
    let s = Setup::start().await;
    let reply = s.call("forward", forward("free", b"x", 1000)).await;
    assert_eq!(reply["kind"], "not_held");
    assert_eq!(
        reply.as_object().unwrap().len(),
        2,
        "no owner was tried: {reply}"
    );
}

#[tokio::test]
async fn no_responder_is_retried_up_to_three_attempts_then_owner_unavailable() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "gone").await;
    // Each attempt starts with a read of the lease through the leader.
    let mut reads = s
        .client
        .subscribe("$JS.API.STREAM.MSG.GET.KV_leases")
        .await
        .unwrap();
    s.client.flush().await.unwrap();
    let reply = s.call("forward", forward("k", b"x", 3000)).await;
    assert_owner_error(&reply, "owner_unavailable", "gone", &lease["revision"]);
    let mut count = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(300), reads.next()).await {
        count += 1;
    }
    assert_eq!(count, 3, "three attempts, each after a fresh read");
}

#[tokio::test]
async fn three_stale_rejects_give_owner_rejected_after_exactly_three_requests() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "stale").await;
    let owner = Owner::start(&s.client, "stale", Answer::Reject).await;
    let reply = s.call("forward", forward("k", b"x", 3000)).await;
    assert_owner_error(&reply, "owner_rejected", "stale", &lease["revision"]);
    assert_eq!(owner.received(), 3);
}

#[tokio::test]
async fn a_reject_is_recognised_whatever_the_case_of_its_name_and_value() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "lower").await;
    let owner = Owner::start(
        &s.client,
        "lower",
        Answer::RejectSpelled("dagnats-lease-reject", "STALE"),
    )
    .await;
    let reply = s.call("forward", forward("k", b"x", 3000)).await;
    assert_owner_error(&reply, "owner_rejected", "lower", &lease["revision"]);
    assert_eq!(
        owner.received(),
        3,
        "each reject is retried like the canonical one"
    );
}

#[tokio::test]
async fn a_timed_out_owner_receives_exactly_one_request() {
    let s = Setup::start().await;
    let lease = acquire(&s, "k", "slow").await;
    let owner = Owner::start(&s.client, "slow", Answer::Silent).await;
    let started = std::time::Instant::now();
    let reply = s.call("forward", forward("k", b"x", 300)).await;
    assert_owner_error(&reply, "owner_timeout", "slow", &lease["revision"]);
    assert!(started.elapsed() >= Duration::from_millis(300));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(owner.received(), 1, "a timeout is never retried");
}

#[tokio::test]
async fn a_takeover_between_attempts_is_followed() {
    let s = Setup::start().await;
    let old = acquire(&s, "k", "old").await;
    // The old owner hands over (release, the new one acquires), then rejects.
    let mut inbox = s
        .client
        .subscribe("dagnats.lease.inbox.old.>")
        .await
        .unwrap();
    let new_owner = Owner::start(&s.client, "new", Answer::Echo).await;
    let client = s.client.clone();
    let handover = tokio::spawn(async move {
        let msg = inbox.next().await.unwrap();
        let release = json!({"key": "k", "holder": "old", "revision": old["revision"]});
        common::call(&client, "release", release).await;
        let new = common::call(
            &client,
            "acquire",
            json!({"key": "k", "holder": "new", "ttl_ms": 30000}),
        )
        .await;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Dagnats-Lease-Reject", "stale");
        client
            .publish_with_headers(msg.reply.unwrap(), headers, "".into())
            .await
            .unwrap();
        new
    });
    s.client.flush().await.unwrap();
    let reply = s.call("forward", forward("k", b"ping", 5000)).await;
    let new = handover.await.unwrap();
    assert_eq!(reply["holder"], "new", "{reply}");
    assert_eq!(reply["revision"], new["revision"]);
    let body = STANDARD.decode(reply["payload"].as_str().unwrap()).unwrap();
    assert_eq!(body, format!("echo:{}:ping", new["revision"]).into_bytes());
    assert_eq!(new_owner.received(), 1);
}

/// The proxy holds the first attempt at the old holder's inbox until the key
/// has a new holder serving its inbox; then the old inbox answers no
/// responders and the re-read must lead to the new owner.
#[tokio::test]
async fn no_responder_then_the_new_owner_succeeds() {
    let t = Takeover::start().await;
    let mut body = Takeover::forward_body();
    body["key"] = json!(takeover::KEY);
    let reply = common::call(&t.client, "forward", body).await;
    t.assert_the_new_owner_answered(&reply);
}

#[tokio::test]
async fn an_owner_reply_too_large_once_base64_encoded_is_reply_too_large() {
    let (s, _config) = Setup::with_max_payload(4096).await;
    let lease = acquire(&s, "k", "big").await;
    // 3500 bytes fit the owner hop (4096) but not once base64-encoded.
    let _owner = Owner::start(&s.client, "big", Answer::Bytes(3500)).await;
    let reply = s.call("forward", forward("k", b"x", 2000)).await;
    assert_owner_error(&reply, "reply_too_large", "big", &lease["revision"]);
    // 2000 bytes fit both hops.
    let lease2 = acquire(&s, "k2", "small").await;
    let _small = Owner::start(&s.client, "small", Answer::Bytes(2000)).await;
    let reply = s.call("forward", forward("k2", b"x", 2000)).await;
    assert_eq!(reply["revision"], lease2["revision"], "{reply}");
    assert_eq!(
        STANDARD
            .decode(reply["payload"].as_str().unwrap())
            .unwrap()
            .len(),
        2000
    );
}

#[tokio::test]
async fn bad_forward_input_is_invalid_and_changes_nothing() {
    let s = Setup::start().await;
    acquire(&s, "k", "a").await;
    let owner = Owner::start(&s.client, "a", Answer::Echo).await;
    let before = stream_state(&s.client).await;
    for body in [
        json!({"key": "k", "payload": "", "timeout_ms": 99}),
        json!({"key": "k", "payload": "", "timeout_ms": 30001}),
        json!({"key": "k", "payload": "", "timeout_ms": 1000.5}),
        json!({"key": "k", "payload": "", "timeout_ms": "1000"}),
        json!({"key": "k", "payload": "%%% not base64"}),
        json!({"key": "k", "payload": 42}),
        json!({"key": "k"}),
        json!({"key": "a.b", "payload": ""}),
        json!({"key": ">", "payload": ""}),
        json!({"payload": ""}),
    ] {
        let reply = s.call("forward", body.clone()).await;
        assert_eq!(reply["kind"], "invalid", "{body}: {reply}");
        assert_eq!(reply.as_object().unwrap().len(), 2, "{reply}");
    }
    assert_eq!(owner.received(), 0);
    assert_eq!(stream_state(&s.client).await, before);
}
