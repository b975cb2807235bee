//! Prometheus metrics: one recorder per process, and the few helpers every
//! part records through, so both fronts count requests the same way.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds: from a cached renew to a 30 s forward.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's recorder, installed on first use; renders `/metrics`.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS)
                .expect("latency buckets are not empty")
                .install_recorder()
                .expect("the metrics recorder is installed once per process")
        })
        .clone()
}

/// Which front answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    Nats,
    Http,
}

impl Front {
    fn as_str(self) -> &'static str {
        match self {
            Front::Nats => "nats",
            Front::Http => "http",
        }
    }
}

/// Counts one answered request by front, operation and outcome (`ok` or
/// the error kind), and records its latency.
pub fn request(front: Front, op: &'static str, kind: &'static str, elapsed: Duration) {
    let front = front.as_str();
    metrics::counter!("dagnats_requests_total", "front" => front, "op" => op, "kind" => kind)
        .increment(1);
    metrics::histogram!("dagnats_request_duration_seconds", "front" => front, "op" => op)
        .record(elapsed.as_secs_f64());
}

/// Counts one attempt at an owner's inbox by what came of it.
pub fn forward_attempt(outcome: &'static str) {
    metrics::counter!("dagnats_forward_attempts_total", "outcome" => outcome).increment(1);
}

/// Whether the gateway's NATS connection is up (1) or not (0).
pub fn nats_connected(connected: bool) {
    metrics::gauge!("dagnats_nats_connected").set(if connected { 1.0 } else { 0.0 });
}

/// The stream as last read: whether it has a leader (1) or not (0), and
/// each replica's lag and whether it is current, by replica name. A
/// replica seen before and missing now (no leader lists it) is not current.
pub fn stream(view: &crate::cluster::StreamView) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    metrics::gauge!("dagnats_stream_has_leader").set(if view.has_leader() { 1.0 } else { 0.0 });
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for name in seen.iter() {
        if !view.replicas.iter().any(|r| &r.name == name) {
            metrics::gauge!("dagnats_stream_replica_current", "replica" => name.clone()).set(0.0);
        }
    }
    for replica in &view.replicas {
        let name = replica.name.clone();
        metrics::gauge!("dagnats_stream_replica_lag", "replica" => name.clone())
            .set(replica.lag as f64);
        metrics::gauge!("dagnats_stream_replica_current", "replica" => name.clone())
            .set(if replica.current { 1.0 } else { 0.0 });
        seen.insert(name);
    }
}

/// One event-stream client registered for changes; the gauge counts it
/// while it lives.
pub struct SseClient(());

impl SseClient {
    /// Counts a new client until the returned guard is dropped.
    pub fn connected() -> Self {
        metrics::gauge!("dagnats_sse_clients").increment(1.0);
        SseClient(())
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        metrics::gauge!("dagnats_sse_clients").decrement(1.0);
    }
}
