//! The floor NATS itself sets, measured with the same client library: one
//! core request/reply hop, one JetStream compare-and-set publish with a TTL,
//! and one read of a key through the stream leader, each on a stream with
//! the bucket's settings ([`FloorStream`]).

use async_nats::{Client, HeaderMap};
use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::measure::{Latency, Op, op};

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

/// Where the floor's echo responder answers.
pub const ECHO_SUBJECT: &str = "bench.echo";

/// Starts an echo responder and returns its subject.
pub async fn echo_responder(nats: &Client) -> String {
    echo(nats, ECHO_SUBJECT.to_string()).await;
    ECHO_SUBJECT.to_string()
}

/// The floor's sequential latencies, each a gateway figure's denominator.
#[derive(Serialize)]
pub struct Floor {
    /// The stream the floor wrote to and read from.
    pub stream: String,
    pub hop: Latency,
    pub compare_and_set: Latency,
    pub leader_read: Latency,
}

/// The floor's calls, one after another: a hop to `echo`, and a
/// compare-and-set and a leader read on `on`, in the order
/// [`from_latencies`] takes their figures.
pub async fn sequential_ops(nats: &Client, echo: &str, on: &FloorStream) -> [Op; 3] {
    [
        hops(nats, echo),
        compare_and_set(nats, on).await,
        leader_read(nats, on),
    ]
}

/// The floor on `on`, from the latencies of [`sequential_ops`], each taken
/// from `next` in turn.
pub fn from_latencies(on: &FloorStream, mut next: impl FnMut() -> Latency) -> Floor {
    Floor {
        stream: on.stream.clone(),
        hop: next(),
        compare_and_set: next(),
        leader_read: next(),
    }
}

/// Core NATS requests to an echo responder, one after another.
fn hops(nats: &Client, echo: &str) -> Op {
    let (nats, echo) = (nats.clone(), echo.to_string());
    op(move |_| {
        let (nats, echo) = (nats.clone(), echo.clone());
        async move {
            nats.request(echo, "ping".into()).await.expect("echo");
        }
    })
}

/// The stream the raw floors write to and read from.
#[derive(Debug, Clone)]
pub struct FloorStream {
    pub stream: String,
    /// Subjects are this prefix plus a key.
    prefix: String,
}

/// Subjects of the floor's own stream (when it is not the bucket itself).
const OWN_PREFIX: &str = "bench.floor.kv.";
/// Where the floor's own stream republishes each key's writes, as the
/// bucket republishes them on `dagnats.lease.changed.<key>`.
pub const OWN_CHANGED: &str = "bench.floor.changed";

impl FloorStream {
    /// The bucket's own stream (`KV_leases`): on one node the floor writes
    /// beside the leases, in the very stream a renew writes to.
    pub fn bucket() -> Self {
        FloorStream {
            stream: "KV_leases".into(),
            prefix: "$KV.leases.".into(),
        }
    }

    /// A stream of its own with the bucket's settings at `replicas` (the
    /// config `crates/gateway/src/store/provision.rs` creates, republish
    /// included, under another name), once every replica is current: the
    /// floor of the production layout apart from the leases, and the
    /// single node's front floor, whose change events no gateway receives.
    pub async fn create(nats: &Client, replicas: usize) -> Self {
        let own = Self::own(replicas);
        let stream = &own.stream;
        let config = json!({
            "name": stream,
            "subjects": [format!("{OWN_PREFIX}>")],
            "max_msgs_per_subject": 1,
            "max_age": 0,
            "allow_rollup_hdrs": true,
            "allow_direct": false,
            "allow_msg_ttl": true,
            "subject_delete_marker_ttl": Duration::from_secs(5).as_nanos() as u64,
            "republish": {
                "src": format!("{OWN_PREFIX}*"),
                "dest": format!("{OWN_CHANGED}.{{{{wildcard(1)}}}}"),
            },
            "storage": "file",
            "discard": "new",
            "deny_delete": true,
            "num_replicas": replicas,
        });
        let created = js_api(nats, &format!("STREAM.CREATE.{stream}"), config).await;
        assert!(created.get("error").is_none(), "{created}");
        // One node answers the create once the stream is there; a cluster
        // once it has a leader, which then waits for its followers.
        if replicas > 1 {
            wait_current(nats, stream, replicas).await;
        }
        own
    }

    /// The stream [`FloorStream::create`] makes with `replicas`, once it
    /// exists.
    pub fn own(replicas: usize) -> Self {
        FloorStream {
            stream: format!("BENCH_FLOOR_R{replicas}"),
            prefix: OWN_PREFIX.into(),
        }
    }

    /// The stream's `STREAM.INFO` reply.
    pub async fn info(&self, nats: &Client) -> Value {
        js_api(nats, &format!("STREAM.INFO.{}", self.stream), json!({})).await
    }

    pub fn subject(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

/// Waits until `stream` has a leader and its `replicas - 1` followers are
/// current, for at most 30 s.
async fn wait_current(nats: &Client, stream: &str, replicas: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info = js_api(nats, &format!("STREAM.INFO.{stream}"), json!({})).await;
        let current = info["cluster"]["replicas"]
            .as_array()
            .map_or(0, |r| r.iter().filter(|r| r["current"] == true).count());
        if info["cluster"]["leader"].is_string() && current == replicas - 1 {
            return;
        }
        assert!(Instant::now() < deadline, "{stream} not healthy: {info}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn js_api(nats: &Client, op: &str, body: Value) -> Value {
    let payload = serde_json::to_vec(&body).expect("JSON");
    let reply = nats
        .request(format!("$JS.API.{op}"), payload.into())
        .await
        .expect("JetStream API");
    serde_json::from_slice(&reply.payload).expect("JetStream API reply")
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
    acknowledged(&reply.payload)
}

/// The sequence a JetStream publish acknowledgement names; a refusal ends
/// the run, as nothing in a benchmark should be refused.
pub fn acknowledged(ack: &[u8]) -> u64 {
    let ack: Value = serde_json::from_slice(ack).expect("ack");
    ack["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("publish refused: {ack}"))
}

/// The key the sequential compare-and-sets write and the leader reads read.
const SEQUENTIAL_KEY: &str = "bench-floor-cas";

/// JetStream compare-and-set publishes with a TTL to one key, one after
/// another, each expecting the last one's sequence.
async fn compare_and_set(nats: &Client, on: &FloorStream) -> Op {
    let subject = on.subject(SEQUENTIAL_KEY);
    let last = Arc::new(AtomicU64::new(cas(nats, &subject, 0).await));
    let nats = nats.clone();
    op(move |_| {
        let (nats, subject, last) = (nats.clone(), subject.clone(), last.clone());
        async move {
            let seq = cas(&nats, &subject, last.load(Ordering::Relaxed)).await;
            last.store(seq, Ordering::Relaxed);
        }
    })
}

fn throughput_key(c: u64) -> String {
    format!("bench-floor-tp-{c}")
}

/// Raw compare-and-set publishes by `clients` concurrent writers, one key
/// each, written once here: the JetStream work a renew cannot avoid.
pub async fn compare_and_sets(nats: &Client, on: &FloorStream, clients: u64) -> Op {
    let mut last = Vec::new();
    for c in 0..clients {
        let seq = cas(nats, &on.subject(&throughput_key(c)), 0).await;
        last.push(AtomicU64::new(seq));
    }
    let (nats, last, on) = (nats.clone(), Arc::new(last), on.clone());
    op(move |c| {
        let (nats, last, subject) = (nats.clone(), last.clone(), on.subject(&throughput_key(c)));
        async move {
            let slot = &last[c as usize];
            let seq = cas(&nats, &subject, slot.load(Ordering::Relaxed)).await;
            slot.store(seq, Ordering::Relaxed);
        }
    })
}

async fn read(nats: &Client, on: &FloorStream, body: Vec<u8>) {
    let reply = nats
        .request(format!("$JS.API.STREAM.MSG.GET.{}", on.stream), body.into())
        .await
        .expect("read");
    assert!(!reply.payload.is_empty());
}

fn last_by_subject(on: &FloorStream, key: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"last_by_subj": on.subject(key)})).expect("JSON")
}

/// Reads of [`compare_and_set`]'s key's last message through the stream
/// leader, one after another.
fn leader_read(nats: &Client, on: &FloorStream) -> Op {
    let (nats, on) = (nats.clone(), on.clone());
    let body = last_by_subject(&on, SEQUENTIAL_KEY);
    op(move |_| {
        let (nats, on, body) = (nats.clone(), on.clone(), body.clone());
        async move { read(&nats, &on, body).await }
    })
}

/// Leader reads by concurrent readers, each of the key its
/// [`compare_and_sets`] writer wrote.
pub fn leader_reads(nats: &Client, on: &FloorStream) -> Op {
    let (nats, on) = (nats.clone(), on.clone());
    op(move |c| {
        let (nats, on) = (nats.clone(), on.clone());
        async move {
            let body = last_by_subject(&on, &throughput_key(c));
            read(&nats, &on, body).await;
        }
    })
}
