//! The same operations over the HTTP front, a list of every held lease,
//! and Server-Sent Events fan-out to many subscribers. With more than one
//! gateway, calls alternate between them (and so do subscribers), as a load
//! balancer in front of them would spread them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::gateway_ops::Sequential;
use crate::measure::{Latency, Op, RangeRead, Recorder, op};
use crate::procs::usage;

const TTL_MS: u64 = 60_000;

async fn post(http: &reqwest::Client, url: String, body: Value) -> Value {
    let reply = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("HTTP request");
    succeeded(reply).await
}

/// The JSON body of a successful reply; a failed one stops the benchmark
/// with its status and the gateway's error body, which says why.
async fn succeeded(reply: reqwest::Response) -> Value {
    let status = reply.status();
    let url = reply.url().clone();
    if !status.is_success() {
        let body = reply.text().await.unwrap_or_default();
        panic!("{url}: {status}: {body}");
    }
    reply.json().await.expect("JSON reply")
}

/// The gateway call `i` goes to: each in turn.
pub fn at(bases: &[String], i: u64) -> &str {
    &bases[(i % bases.len() as u64) as usize]
}

/// The calls of each operation over HTTP, with their keys acquired (the
/// forward's owner is the one [`crate::gateway_ops::sequential_ops`] sets
/// up); `n` calls of each (and `n / 10` to warm up) are timed later.
pub async fn sequential_ops(http: &reqwest::Client, bases: &[String], n: u64) -> Sequential<Op> {
    let calls = Calls {
        http: http.clone(),
        bases: bases.into(),
    };
    let acquire = calls.each(|calls, i| async move {
        let body = json!({"holder": "bench", "ttl_ms": TTL_MS});
        let base = at(&calls.bases, i);
        post(
            &calls.http,
            format!("{base}/v1/leases/hacq-{i}/acquire"),
            body,
        )
        .await;
    });
    let held = post(
        http,
        format!("{}/v1/leases/hrenew/acquire", at(bases, 0)),
        json!({"holder": "bench", "ttl_ms": TTL_MS}),
    )
    .await;
    let fence = Arc::new(AtomicU64::new(held["revision"].as_u64().unwrap()));
    let renew = calls.each(move |calls, i| {
        let fence = fence.clone();
        async move {
            let revision = fence.load(Ordering::Relaxed);
            let body = json!({"holder": "bench", "revision": revision, "ttl_ms": TTL_MS});
            let base = at(&calls.bases, i);
            let r = post(&calls.http, format!("{base}/v1/leases/hrenew/renew"), body).await;
            fence.store(r["revision"].as_u64().unwrap(), Ordering::Relaxed);
        }
    });
    let owner = calls.each(|calls, i| async move {
        let base = at(&calls.bases, i);
        calls
            .http
            .get(format!("{base}/v1/leases/hrenew"))
            .send()
            .await
            .expect("owner")
            .bytes()
            .await
            .unwrap();
    });
    let total = n + n / 10;
    let mut fences = Vec::new();
    for i in 0..total {
        let r = post(
            http,
            format!("{}/v1/leases/hrel-{i}/acquire", at(bases, i)),
            json!({"holder": "bench", "ttl_ms": TTL_MS}),
        )
        .await;
        fences.push(r["revision"].as_u64().unwrap());
    }
    let (fences, next) = (Arc::new(fences), Arc::new(AtomicUsize::new(0)));
    let release = calls.each(move |calls, _| {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let body = json!({"holder": "bench", "revision": fences[i]});
        async move {
            let base = at(&calls.bases, i as u64);
            post(
                &calls.http,
                format!("{base}/v1/leases/hrel-{i}/release"),
                body,
            )
            .await;
        }
    });
    let forward = calls.each(|calls, i| async move {
        let body = json!({"payload": "cGluZw==", "timeout_ms": 5000});
        let base = at(&calls.bases, i);
        post(&calls.http, format!("{base}/v1/leases/fwd/forward"), body).await;
    });
    Sequential {
        acquire,
        renew,
        owner,
        release,
        forward,
    }
}

/// What each sequential call over HTTP goes out with: the client, and the
/// gateways it alternates between.
#[derive(Clone)]
struct Calls {
    http: reqwest::Client,
    bases: Arc<[String]>,
}

impl Calls {
    /// `call(calls, i)` as an [`Op`], with its own copy of the calls'
    /// client and gateways.
    fn each<F, Fut>(&self, call: F) -> Op
    where
        F: Fn(Calls, u64) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let calls = self.clone();
        op(move |i| call(calls.clone(), i))
    }
}

/// `GET /v1/leases?prefix=...` `calls` times, each call answering every
/// held lease under `prefix`, which must be `leases` of them; with the CPU
/// `processes` spend per call.
pub async fn list(
    http: &reqwest::Client,
    (bases, processes): (&[String], &[(&'static str, u32)]),
    prefix: &str,
    leases: u64,
    calls: u64,
) -> RangeRead {
    let next = std::cell::Cell::new(0u64);
    RangeRead::metered(processes, leases, calls, || {
        let i = next.get();
        next.set(i + 1);
        list_once(http, at(bases, i), prefix)
    })
    .await
}

/// How many leases one `GET /v1/leases?prefix=...` of `base` answered.
pub async fn list_once(http: &reqwest::Client, base: &str, prefix: &str) -> u64 {
    let url = format!("{base}/v1/leases?prefix={prefix}");
    let reply = http.get(url).send().await.expect("list");
    let body = succeeded(reply).await;
    body["leases"].as_array().map_or(0, Vec::len) as u64
}

/// What SSE fan-out came to.
#[derive(Debug, Clone, Serialize)]
pub struct FanOut {
    pub clients: u64,
    pub changes: u64,
    pub delivered: u64,
    pub delivered_per_second: f64,
    /// From the start of the write to each client's receipt.
    pub lag: Latency,
    /// The largest resident memory of a gateway.
    pub gateway_rss_mb: f64,
}

/// The largest resident memory among `pids`, in MB.
fn largest_rss_mb(pids: &[u32]) -> f64 {
    let bytes = pids.iter().map(|p| usage(*p).rss_bytes).max().unwrap_or(0);
    bytes as f64 / 1_048_576.0
}

/// The event-stream clients `base`'s gateway counts.
async fn sse_clients(http: &reqwest::Client, base: &str) -> u64 {
    let Ok(reply) = http.get(format!("{base}/metrics")).send().await else {
        return 0;
    };
    let text = reply.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("dagnats_sse_clients "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// `clients` event-stream subscribers, spread over the gateways; `changes`
/// renewals at a steady pace; every delivery's lag is recorded.
pub async fn fan_out(
    http: &reqwest::Client,
    bases: &[String],
    gateway_pids: &[u32],
    clients: u64,
    changes: u64,
) -> FanOut {
    let mut readers = Vec::new();
    for c in 0..clients {
        let resp = http
            .get(format!("{}/v1/events?key=fan", at(bases, c)))
            .send()
            .await
            .expect("event stream");
        // Each client notes when each revision reached it; lags are worked
        // out once every write's start is known.
        readers.push(tokio::spawn(async move {
            let mut body = resp.bytes_stream();
            let mut buf = String::new();
            let mut received: Vec<(u64, Instant)> = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                buf.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buf.find("\n\n") {
                    let event: String = buf.drain(..end + 2).collect();
                    let id = event
                        .lines()
                        .find_map(|l| l.strip_prefix("id:"))
                        .map(str::trim);
                    if let Some(id) = id.and_then(|id| id.parse().ok()) {
                        received.push((id, Instant::now()));
                    }
                }
                if received.len() as u64 > changes {
                    break;
                }
            }
            received
        }));
    }
    // Every client is connected once the gateways count it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let mut counted = 0;
        for base in bases {
            counted += sse_clients(http, base).await;
        }
        if counted >= clients {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss_mb = largest_rss_mb(gateway_pids);
    let held = post(
        http,
        format!("{}/v1/leases/fan/acquire", at(bases, 0)),
        json!({"holder": "bench", "ttl_ms": TTL_MS}),
    )
    .await;
    let mut fence = held["revision"].as_u64().unwrap();
    let mut sent = HashMap::new();
    let started = Instant::now();
    for change in 0..changes {
        let start = Instant::now();
        let body = json!({"holder": "bench", "revision": fence, "ttl_ms": TTL_MS});
        let base = at(bases, change);
        let r = post(http, format!("{base}/v1/leases/fan/renew"), body).await;
        fence = r["revision"].as_u64().unwrap();
        sent.insert(fence, start);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut lags = Recorder::default();
    let mut delivered = 0;
    for reader in readers {
        let Ok(Ok(received)) = tokio::time::timeout(Duration::from_secs(10), reader).await else {
            continue;
        };
        for (id, at) in received {
            if let Some(start) = sent.get(&id) {
                lags.record(at - *start);
                delivered += 1;
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let lag = lags.latency();
    FanOut {
        clients,
        changes,
        delivered,
        delivered_per_second: delivered as f64 / elapsed,
        lag,
        gateway_rss_mb: rss_mb.max(largest_rss_mb(gateway_pids)),
    }
}
