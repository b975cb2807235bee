//! The floor under any NATS front of the bucket: what a service costs that
//! answers each call over request/reply and makes the one JetStream call a
//! lease call cannot do without, with nothing of the gateway's own.
//!
//! Responders in a queue group, each a process of its own in a gateway's place
//! (this binary's `front` mode), answer `write` with one compare-and-set
//! publish with a TTL and the `Dagnats-Lease-Event` header (docs/protocol.md,
//! Storage: the leases bucket), as a renew writes, whose change event the
//! stream republishes to every responder, as every gateway receives every
//! change; and `check` as the gateway confirms an owner read. On a replicated
//! stream that is one publish to a barrier subject that expects the key's last
//! sequence: with reads only through the stream leader and no read fence, a
//! linearizable read costs a write (`crates/gateway/src/store/bucket.rs`). On
//! one replica it is one read of the key through the stream leader, as the
//! gateway reads an unreplicated bucket. Every call goes alone: coalescing
//! publishes into atomic batches is the gateway's own work, and may take it
//! past this floor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::{Client, HeaderMap, Message};
use bytes::Bytes;
use dagnats_leases_client::wire::names::HEADER_EVENT;
use dagnats_leases_client::wire::record::WriteEvent;
use futures::StreamExt;

use crate::floor::{self, FloorStream};
use crate::measure::{Op, op};
use crate::procs::{self, Proc};

/// Where the responders answer: `bench.front.write` and `bench.front.check`.
const WRITE: &str = "bench.front.write";
const CHECK: &str = "bench.front.check";
const QUEUE: &str = "bench-front";
/// The key the barriers are written to, beside the keys they check.
const BARRIER_KEY: &str = "_front.read";

/// A lease record's size (the gateway's renew body is about this long).
const BODY: &str = r#"{"holder":"bench-front-holder","ttl_ms":60000,"acquired_at":"2026-12-02T00:00:00.000000000Z","renewed_at":"2026-12-02T00:00:00.000000000Z"}"#;

/// Which node the responders connect to, against the floor's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FrontsOn {
    /// Any node of the cluster (async-nats picks one), as gateways given
    /// every node's URL connect.
    Any,
    /// The stream leader's node, so no route lies between a responder and
    /// the stream leader (a gateway would have to move with every leader
    /// change to stay there).
    Leader,
    /// A follower's node.
    Follower,
}

impl FrontsOn {
    /// The name of the node this placement picks for `floor`'s stream, as
    /// its `STREAM.INFO` tells (a single server names itself its leader);
    /// `None` for any node.
    pub async fn node(self, nats: &Client, floor: &FloorStream) -> Option<String> {
        if self == FrontsOn::Any {
            return None;
        }
        let info = floor.info(nats).await;
        let cluster = &info["cluster"];
        let name = match self {
            FrontsOn::Leader => &cluster["leader"],
            _ => &cluster["replicas"][0]["name"],
        };
        name.as_str().map(str::to_string)
    }
}

/// Starts `n` responders on `urls`, each a process of its own, writing to
/// the floor's own stream at `replicas` ([`FloorStream::create`]), returning
/// once all of them listen.
pub fn responders(urls: &str, n: usize, replicas: usize) -> Vec<Proc> {
    let replicas = replicas.to_string();
    (0..n)
        .map(|_| procs::responder(&["front", urls, "--replicas", &replicas]))
        .collect()
}

/// A responder's work, on one thread like the gateway, until killed;
/// `urls` separated by commas, as the gateway takes them.
pub fn serve(urls: &str, replicas: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("front runtime");
    runtime.block_on(async {
        let urls: Vec<async_nats::ServerAddr> = urls
            .split(',')
            .map(|url| url.parse().expect("a NATS URL"))
            .collect();
        let nats = async_nats::connect(urls).await.expect("connect");
        let on = FloorStream::own(replicas);
        let mut calls = nats
            .queue_subscribe("bench.front.*", QUEUE.into())
            .await
            .expect("subscribe");
        let mut events = nats
            .subscribe(format!("{}.>", floor::OWN_CHANGED))
            .await
            .expect("subscribe to changes");
        nats.flush().await.expect("flush");
        tokio::spawn(async move { while events.next().await.is_some() {} });
        println!("{}", procs::READY);
        let confirm = replicas > 1;
        while let Some(call) = calls.next().await {
            let (nats, on) = (nats.clone(), on.clone());
            tokio::spawn(async move { answer(&nats, &on, confirm, call).await });
        }
    });
}

/// What a check costs the front at `replicas`, as the tables name it.
pub fn check_by(replicas: usize) -> &'static str {
    if replicas > 1 {
        "barrier publish"
    } else {
        "leader read"
    }
}

/// One JetStream call for `call` (`<key> <expected last sequence>`), whose
/// answer (a publish's acknowledgement, a read's message) is the reply.
/// Checks are barriers when `confirm`, reads of the key otherwise.
async fn answer(nats: &Client, on: &FloorStream, confirm: bool, call: Message) {
    let Some(reply) = call.reply else { return };
    let answered = match parse(&call.payload) {
        Some((key, _)) if call.subject.as_str() == CHECK && !confirm => {
            let read = serde_json::json!({ "last_by_subj": on.subject(key) });
            let body = serde_json::to_vec(&read).expect("JSON");
            let api = format!("$JS.API.STREAM.MSG.GET.{}", on.stream);
            nats.request(api, body.into()).await
        }
        Some((key, expected)) => {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Expected-Last-Subject-Sequence", expected);
            let (subject, body) = if call.subject.as_str() == WRITE {
                headers.insert("Nats-TTL", "60s");
                // The header on every lease write: its change event
                // carries it to every responder, as to every gateway.
                headers.insert(HEADER_EVENT, WriteEvent::Renewed.as_str());
                (on.subject(key), Bytes::from_static(BODY.as_bytes()))
            } else {
                headers.insert(
                    "Nats-Expected-Last-Subject-Sequence-Subject",
                    on.subject(key),
                );
                (on.subject(BARRIER_KEY), Bytes::new())
            };
            nats.request_with_headers(subject, headers, body).await
        }
        None => {
            let refused = br#"{"error":"expected <key> <sequence>"}"#;
            let _ = nats.publish(reply, Bytes::from_static(refused)).await;
            return;
        }
    };
    let answer = match answered {
        Ok(answer) => answer.payload,
        Err(err) => Bytes::from(format!(r#"{{"error":"{err}"}}"#)),
    };
    let _ = nats.publish(reply, answer).await;
}

fn parse(payload: &[u8]) -> Option<(&str, &str)> {
    std::str::from_utf8(payload).ok()?.split_once(' ')
}

/// The load: one key per client, each written once through the responders
/// before anything is timed, and the last sequence of each.
pub struct Load {
    nats: Client,
    last: Arc<Vec<AtomicU64>>,
}

impl Load {
    /// Writes each of `clients` keys once, asking again while the
    /// responders' interest is still on its way to the node `nats` uses.
    pub async fn new(nats: &Client, clients: u64) -> Self {
        let mut last = Vec::new();
        for c in 0..clients {
            let deadline = Instant::now() + Duration::from_secs(10);
            let seq = loop {
                match call(nats, WRITE, c, 0).await {
                    Ok(seq) => break seq,
                    Err(err) if Instant::now() < deadline => {
                        eprintln!("front floor not answering yet: {err}");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(err) => panic!("the front floor never answered: {err}"),
                }
            };
            last.push(AtomicU64::new(seq));
        }
        Load {
            nats: nats.clone(),
            last: Arc::new(last),
        }
    }

    /// Writes, each client writing its key after its last write.
    pub fn writes(&self) -> Op {
        self.op(WRITE)
    }

    /// Confirmed reads: each client's barrier expects its key still at its
    /// last write.
    pub fn checks(&self) -> Op {
        self.op(CHECK)
    }

    fn op(&self, what: &'static str) -> Op {
        let (nats, last) = (self.nats.clone(), self.last.clone());
        op(move |c| {
            let (nats, last) = (nats.clone(), last.clone());
            async move {
                let slot = &last[c as usize];
                let seq = call(&nats, what, c, slot.load(Ordering::Relaxed))
                    .await
                    .expect("front floor call");
                if what == WRITE {
                    slot.store(seq, Ordering::Relaxed);
                }
            }
        })
    }
}

/// One call of client `c`, and the sequence its answer names: where its
/// publish landed, or the key's last sequence a read found.
async fn call(nats: &Client, what: &str, c: u64, expected: u64) -> Result<u64, String> {
    let reply = nats
        .request(what.to_string(), format!("front-{c} {expected}").into())
        .await
        .map_err(|err| err.to_string())?;
    let answer: serde_json::Value =
        serde_json::from_slice(&reply.payload).map_err(|err| err.to_string())?;
    answer["seq"]
        .as_u64()
        .or_else(|| answer["message"]["seq"].as_u64())
        .ok_or_else(|| format!("the front floor's call was refused: {answer}"))
}
