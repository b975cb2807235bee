//! The floor NATS itself sets, measured with the same client library: one
//! core request/reply hop, one JetStream compare-and-set publish with a TTL
//! to the bucket, and one read of a key through the stream leader.

use async_nats::{Client, HeaderMap};
use futures::StreamExt;
use serde_json::{Value, json};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::measure::{Latency, sequential, throughput};

/// Answers every request on `subject` with its own payload, returning once
/// the subscription is registered. The floor's hop and the gateway's forward
/// owner share it, so both figures measure the same responder.
pub async fn echo(nats: &Client, subject: String) {
    let mut sub = nats.subscribe(subject).await.expect("subscribe");
    let nats2 = nats.clone();
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            if let Some(reply) = msg.reply {
                let _ = nats2.publish(reply, msg.payload).await;
            }
        }
    });
    nats.flush().await.expect("flush");
}

/// Starts an echo responder and returns its subject.
pub async fn echo_responder(nats: &Client) -> String {
    let subject = "bench.echo".to_string();
    echo(nats, subject.clone()).await;
    subject
}

/// A core NATS request/reply to an echo responder.
pub async fn hop(nats: &Client, echo: &str, n: u64) -> Latency {
    sequential(n, |_| async {
        nats.request(echo.to_string(), "ping".into())
            .await
            .expect("echo");
    })
    .await
}

async fn cas(nats: &Client, subject: &str, expected: u64) -> u64 {
    let mut headers = HeaderMap::new();
    headers.insert(
        "Nats-Expected-Last-Subject-Sequence",
        expected.to_string().as_str(),
    );
    headers.insert("Nats-TTL", "60s");
    let reply = nats
        .request_with_headers(subject.to_string(), headers, r#"{"v":1}"#.into())
        .await
        .expect("publish");
    let ack: Value = serde_json::from_slice(&reply.payload).expect("ack");
    ack["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("CAS failed: {ack}"))
}

/// A JetStream compare-and-set publish with a TTL to the bucket.
pub async fn compare_and_set(nats: &Client, n: u64) -> Latency {
    let subject = "$KV.leases.bench-floor-cas";
    let last = std::cell::Cell::new(cas(nats, subject, 0).await);
    sequential(n, |_| async {
        last.set(cas(nats, subject, last.get()).await);
    })
    .await
}

/// Raw compare-and-set publishes per second with `clients` concurrent
/// writers, one key each: the JetStream work a renew cannot avoid.
pub async fn compare_and_set_throughput(nats: &Client, clients: u64, duration: Duration) -> f64 {
    let mut last = Vec::new();
    for c in 0..clients {
        let seq = cas(nats, &format!("$KV.leases.bench-floor-tp-{c}"), 0).await;
        last.push(AtomicU64::new(seq));
    }
    let (nats, last) = (nats.clone(), Arc::new(last));
    throughput(clients, duration, move |c, _| {
        let (nats, last) = (nats.clone(), last.clone());
        async move {
            let slot = &last[c as usize];
            let subject = format!("$KV.leases.bench-floor-tp-{c}");
            let seq = cas(&nats, &subject, slot.load(Ordering::Relaxed)).await;
            slot.store(seq, Ordering::Relaxed);
        }
    })
    .await
}

/// A read of one key's last message through the stream leader.
pub async fn leader_read(nats: &Client, n: u64) -> Latency {
    let body = serde_json::to_vec(&json!({"last_by_subj": "$KV.leases.bench-floor-cas"})).unwrap();
    sequential(n, |_| async {
        let reply = nats
            .request("$JS.API.STREAM.MSG.GET.KV_leases", body.clone().into())
            .await
            .expect("read");
        assert!(!reply.payload.is_empty());
    })
    .await
}
