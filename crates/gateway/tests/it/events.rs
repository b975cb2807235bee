//! Change events: the server republishes every write on
//! `dagnats.lease.changed.<key>` with `Nats-Sequence` (the revision),
//! `Nats-Subject` and `Dagnats-Lease-Event`.

use std::time::Duration;

use crate::common;
use crate::common::{Gateway, Setup, wait_tombstone_gone};
use async_nats::Message;
use async_nats::jetstream::{self, consumer::PullConsumer, consumer::pull};
use futures::StreamExt;
use serde_json::Value;

fn header<'a>(msg: &'a Message, name: &str) -> Option<&'a str> {
    msg.headers.as_ref()?.get(name).map(|v| v.as_str())
}

async fn next(sub: &mut async_nats::Subscriber) -> Message {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("an event within 10 s")
        .expect("subscription open")
}

/// A subscription to key `k`'s change events, registered with the server.
async fn changes_of_k(s: &Setup) -> async_nats::Subscriber {
    let sub = s.client.subscribe("dagnats.lease.changed.k").await.unwrap();
    common::settle(&s.client).await;
    sub
}

/// The `Dagnats-Lease-Event` of the next message.
async fn next_event(sub: &mut async_nats::Subscriber) -> Option<String> {
    header(&next(sub).await, "Dagnats-Lease-Event").map(String::from)
}

/// Asserts nothing more arrives within a short grace period.
async fn assert_quiet(sub: &mut async_nats::Subscriber) {
    if let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
        panic!("unexpected event: {:?}", msg.headers);
    }
}

#[tokio::test]
async fn every_write_is_republished_once_with_its_revision_and_event() {
    let s = Setup::start().await;
    let _second_gateway = Gateway::start(&s.server.url).await;
    let mut sub = changes_of_k(&s).await;

    let a = s.acquire("k", "h", 15000).await;
    let r = s.renew("k", "h", &a["revision"], 15000).await;
    let x = s.release("k", "h", &r["revision"]).await;
    for (reply, event) in [(&a, "acquired"), (&r, "renewed"), (&x, "released")] {
        let msg = next(&mut sub).await;
        assert_eq!(msg.subject.as_str(), "dagnats.lease.changed.k");
        let revision = reply["revision"].as_u64().unwrap().to_string();
        assert_eq!(header(&msg, "Nats-Sequence"), Some(revision.as_str()));
        assert_eq!(header(&msg, "Nats-Subject"), Some("$KV.leases.k"));
        assert_eq!(header(&msg, "Dagnats-Lease-Event"), Some(event));
    }
    assert_quiet(&mut sub).await;
}

#[tokio::test]
async fn expiry_produces_the_servers_marker_event() {
    let s = Setup::start().await;
    let mut sub = changes_of_k(&s).await;
    let a = s.acquire("k", "h", 1000).await;
    assert_eq!(next_event(&mut sub).await.as_deref(), Some("acquired"));
    let marker = next(&mut sub).await;
    assert_eq!(header(&marker, "Nats-Marker-Reason"), Some("MaxAge"));
    assert_eq!(header(&marker, "Dagnats-Lease-Event"), None);
    let seq: u64 = header(&marker, "Nats-Sequence").unwrap().parse().unwrap();
    assert!(seq > a["revision"].as_u64().unwrap());
    assert!(marker.payload.is_empty());
}

#[tokio::test]
async fn released_key_never_produces_an_expiry_marker() {
    let s = Setup::start().await;
    let mut sub = changes_of_k(&s).await;
    let a = s.acquire("k", "h", 1000).await;
    s.release("k", "h", &a["revision"]).await;
    assert_eq!(next_event(&mut sub).await.as_deref(), Some("acquired"));
    assert_eq!(next_event(&mut sub).await.as_deref(), Some("released"));
    // Wait until the server has removed the tombstone (its TTL is the
    // lease's, 1 s): a marker would be written at that moment.
    wait_tombstone_gone(&s.client, "k").await;
    assert_quiet(&mut sub).await;
}

/// The durable pull consumer `name` of `KV_leases`, created if missing, as
/// docs/protocol.md, Change events, advises for durable delivery.
async fn durable(client: &async_nats::Client, name: &str) -> PullConsumer {
    let stream = jetstream::new(client.clone())
        .get_stream("KV_leases")
        .await
        .unwrap();
    let config = pull::Config {
        durable_name: Some(name.into()),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ..Default::default()
    };
    stream.get_or_create_consumer(name, config).await.unwrap()
}

/// The next stored change, acknowledged: stream sequence, subject, event.
async fn fetch_one(consumer: &PullConsumer) -> (u64, String, Option<String>) {
    let mut batch = consumer
        .fetch()
        .max_messages(1)
        .expires(Duration::from_secs(10))
        .messages()
        .await
        .unwrap();
    let msg = batch.next().await.expect("a change within 10 s").unwrap();
    msg.ack().await.unwrap();
    let sequence = msg.info().unwrap().stream_sequence;
    let event = header(&msg, "Dagnats-Lease-Event").map(String::from);
    (sequence, msg.subject.to_string(), event)
}

/// What a durable consumer should read for a write: its revision as the
/// sequence, the key's subject, the event.
fn stored(reply: &Value, key: &str, event: &str) -> (u64, String, Option<String>) {
    let revision = reply["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("{reply}"));
    (revision, format!("$KV.leases.{key}"), Some(event.into()))
}

#[tokio::test]
async fn a_durable_consumer_of_kv_leases_sees_every_change_in_order_with_the_revision_as_sequence()
{
    let s = Setup::start().await;
    let consumer = durable(&s.client, "audit").await;
    // The bucket keeps one message per key, so each change is read before
    // the next write to its key replaces it (a consumer that falls behind
    // sees the latest write of each key).
    let mut seen = Vec::new();
    let mut expected = Vec::new();
    let a = s.acquire("k", "h", 15000).await;
    expected.push(stored(&a, "k", "acquired"));
    seen.push(fetch_one(&consumer).await);
    let b = s.acquire("j", "h2", 15000).await;
    expected.push(stored(&b, "j", "acquired"));
    seen.push(fetch_one(&consumer).await);
    let r = s.renew("k", "h", &a["revision"], 15000).await;
    expected.push(stored(&r, "k", "renewed"));
    seen.push(fetch_one(&consumer).await);
    let xj = s.release("j", "h2", &b["revision"]).await;
    expected.push(stored(&xj, "j", "released"));
    seen.push(fetch_one(&consumer).await);
    let xk = s.release("k", "h", &r["revision"]).await;
    expected.push(stored(&xk, "k", "released"));
    seen.push(fetch_one(&consumer).await);
    assert_eq!(seen, expected);
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "in order: {seen:?}"
    );

    // Durable: a change made while the reader is away waits for it, and
    // what it acknowledged is not sent again.
    drop(consumer);
    let m = s.acquire("m", "h", 15000).await;
    let again = common::client(&s.server.url).await;
    let consumer = durable(&again, "audit").await;
    assert_eq!(fetch_one(&consumer).await, stored(&m, "m", "acquired"));
}
