//! Prometheus metrics: one recorder per process, and the few helpers every
//! part records through, so both fronts count requests the same way.

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use foldhash::HashMap;
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use dagnats_leases_wire::history::TenureEnd;

/// Latency buckets in seconds: from a cached renew to a 30 s forward.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's recorder, installed on first use; renders `/metrics`.
pub(crate) fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS)
                .expect("latency buckets are not empty")
                .set_buckets_for_metric(
                    Matcher::Full("dagnats_tenure_duration_seconds".into()),
                    TENURE_BUCKETS,
                )
                .expect("tenure buckets are not empty")
                .set_buckets_for_metric(
                    Matcher::Full("dagnats_acquire_wait_seconds".into()),
                    WAIT_BUCKETS,
                )
                .expect("wait buckets are not empty")
                .install_recorder()
                .expect("the metrics recorder is installed once per process")
        })
        .clone()
}

/// Which front answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Front {
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

/// What a request asked for, as the `op` label names it: the lease
/// operations both fronts serve, and the HTTP front's own endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    Acquire,
    Renew,
    Release,
    Owner,
    Forward,
    Transfer,
    List,
    History,
    /// HTTP only: `DELETE /v1/leases/{key}`.
    Revoke,
    /// HTTP only: the change-event stream.
    Events,
    /// HTTP only: the recent changes.
    Recent,
    /// HTTP only: `GET /v1/cluster`.
    Cluster,
    /// HTTP only: health, readiness, metrics, docs and the dashboard.
    Ops,
    /// HTTP only: no route matched.
    Unrouted,
}

impl Op {
    /// The `op` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Renew => "renew",
            Op::Release => "release",
            Op::Owner => "owner",
            Op::Forward => "forward",
            Op::Revoke => "revoke",
            Op::Transfer => "transfer",
            Op::List => "list",
            Op::History => "history",
            Op::Events => "events",
            Op::Recent => "recent",
            Op::Cluster => "cluster",
            Op::Ops => "ops",
            Op::Unrouted => "unrouted",
        }
    }
}

/// Counts one answered request by front, operation and outcome (`ok` or
/// the error kind), and records its latency.
pub(crate) fn request(front: Front, op: Op, kind: &'static str, elapsed: Duration) {
    let (counter, histogram) = RequestHandles::get().of(front, op, kind);
    counter.increment(1);
    histogram.record(elapsed.as_secs_f64());
}

/// The request metrics' handles, each resolved once per label set rather
/// than looked up by the recorder on every call.
#[derive(Default)]
struct RequestHandles {
    by_labels: Mutex<HashMap<Labels, (Counter, Histogram)>>,
}

/// Front, operation and outcome (`ok` or the error kind).
type Labels = (Front, Op, &'static str);

impl RequestHandles {
    fn get() -> &'static RequestHandles {
        static HANDLES: OnceLock<RequestHandles> = OnceLock::new();
        HANDLES.get_or_init(|| {
            // A handle taken before the recorder is installed would count
            // nothing, forever.
            handle();
            RequestHandles::default()
        })
    }

    fn of(&self, front: Front, op: Op, kind: &'static str) -> (Counter, Histogram) {
        let mut by_labels = self.by_labels.lock().unwrap_or_else(|p| p.into_inner());
        by_labels
            .entry((front, op, kind))
            .or_insert_with(|| {
                let (front, op) = (front.as_str(), op.label());
                (
                    metrics::counter!("dagnats_requests_total", "front" => front, "op" => op, "kind" => kind),
                    metrics::histogram!("dagnats_request_duration_seconds", "front" => front, "op" => op),
                )
            })
            .clone()
    }
}

/// Counts one request a policy refused (`forbidden`), by principal and
/// operation.
pub(crate) fn forbidden(principal: &str, op: Op) {
    metrics::counter!("dagnats_forbidden_total", "principal" => principal.to_string(), "op" => op.label())
        .increment(1);
}

/// Counts one attempt at an owner's inbox by what came of it.
pub(crate) fn forward_attempt(outcome: &'static str) {
    metrics::counter!("dagnats_forward_attempts_total", "outcome" => outcome).increment(1);
}

/// Counts one atomic batch of publishes and its messages by what came of
/// it: `committed`, `refused` (each message then sent on its own), or
/// `unanswered`.
pub(crate) fn store_batch(outcome: &'static str, size: usize) {
    metrics::counter!("dagnats_store_batches_total", "outcome" => outcome).increment(1);
    metrics::counter!("dagnats_store_batched_publishes_total", "outcome" => outcome)
        .increment(size as u64);
}

/// Counts one owner read (owner's, or the one a forward starts with) by
/// how it was answered: `known` (what this gateway knew of the key, proved
/// current by one check) or `read`.
pub(crate) fn owner_read(path: &'static str) {
    metrics::counter!("dagnats_owner_reads_total", "path" => path).increment(1);
}

/// Counts one write never sent: it waited in the queue past the moment it
/// could still land before its lease's expiry (overload).
pub(crate) fn store_too_late() {
    metrics::counter!("dagnats_store_writes_too_late_total").increment(1);
}

/// Counts one call answered by a confirmation it shared with the calls
/// that waited with it (`what`: `read` or `check`) instead of its own.
pub(crate) fn store_confirmation_shared(what: &'static str) {
    metrics::counter!("dagnats_store_confirmations_shared_total", "what" => what).increment(1);
}

/// Counts one consumer a list made or tried to make, by what came of it:
/// `listed`, `failed` (it could not be made or read, an error another
/// consumer would not cure), or why another was made (`behind`,
/// `no_meta_leader`, `not_listening`, `no_end`).
pub(crate) fn list_consumer(outcome: &'static str) {
    metrics::counter!("dagnats_list_consumers_total", "outcome" => outcome).increment(1);
}

/// Counts one full batch sent beside the sends already in flight.
pub(crate) fn store_batch_beside() {
    metrics::counter!("dagnats_store_batches_beside_total").increment(1);
}

/// Whether the gateway's NATS connection is up (1) or not (0).
pub(crate) fn nats_connected(connected: bool) {
    metrics::gauge!("dagnats_nats_connected").set(if connected { 1.0 } else { 0.0 });
}

/// One replica of the stream as last read.
pub(crate) struct ReplicaGauge<'a> {
    pub(crate) name: &'a str,
    pub(crate) lag: u64,
    pub(crate) current: bool,
}

/// The stream as last read: whether it has a leader (1) or not (0), and
/// each replica's lag and whether it is current, by replica name. A
/// replica seen before and missing now (no leader lists it) is not current.
pub(crate) fn stream(has_leader: bool, replicas: &[ReplicaGauge<'_>]) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    metrics::gauge!("dagnats_stream_has_leader").set(if has_leader { 1.0 } else { 0.0 });
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for name in seen.iter() {
        if !replicas.iter().any(|r| r.name == name) {
            metrics::gauge!("dagnats_stream_replica_current", "replica" => name.clone()).set(0.0);
        }
    }
    for replica in replicas {
        let name = replica.name.to_string();
        metrics::gauge!("dagnats_stream_replica_lag", "replica" => name.clone())
            .set(replica.lag as f64);
        metrics::gauge!("dagnats_stream_replica_current", "replica" => name.clone())
            .set(if replica.current { 1.0 } else { 0.0 });
        seen.insert(name);
    }
}

/// One event-stream client registered for changes; the gauge counts it
/// while it lives.
pub(crate) struct SseClient(());

impl SseClient {
    /// Counts a new client until the returned guard is dropped.
    pub(crate) fn connected() -> Self {
        metrics::gauge!("dagnats_sse_clients").increment(1.0);
        SseClient(())
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        metrics::gauge!("dagnats_sse_clients").decrement(1.0);
    }
}

/// Buckets of the tenure durations, in seconds: from a one-second tenure
/// to the history's week.
const TENURE_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3_600.0, 14_400.0, 86_400.0, 604_800.0,
];

/// Buckets of a waiting acquire's wait, in seconds: from a grant on the
/// first try to a ten-minute lease waited out.
const WAIT_BUCKETS: &[f64] = &[
    0.0, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 30.0, 60.0, 300.0, 600.0,
];

/// Counts one tenure the history recorded as ended (docs/protocol.md,
/// Tenure history), by how it ended, and how long it lasted.
pub(crate) fn tenure_ended(end: TenureEnd, lasted: Duration) {
    metrics::counter!("dagnats_tenures_ended_total", "end" => end.as_str()).increment(1);
    metrics::histogram!("dagnats_tenure_duration_seconds").record(lasted.as_secs_f64());
}

/// Bound on distinct `prefix` labels; the rest count as `other`.
const PREFIXES: usize = 1_000;

/// Counts one hand-over of `key` (a tenure of another holder than the
/// key's last) under its prefix: the key up to its last `-`, so a shard
/// group's shards, or a service's leader keys, add up.
pub(crate) fn handover(key: &str) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let prefix = key.rsplit_once('-').map_or(key, |(prefix, _)| prefix);
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let label = if seen.contains(prefix) || seen.len() < PREFIXES {
        seen.insert(prefix.to_string());
        prefix.to_string()
    } else {
        "other".to_string()
    };
    metrics::counter!("dagnats_handovers_total", "prefix" => label).increment(1);
}

/// Shows whether `key` flaps now, and how many keys do.
pub(crate) fn key_flapping(key: &str, flapping: bool, keys: usize) {
    metrics::gauge!("dagnats_key_flapping", "key" => key.to_string()).set(if flapping {
        1.0
    } else {
        0.0
    });
    metrics::gauge!("dagnats_flapping_keys").set(keys as f64);
}

/// Counts one acquire answered `granted: false`.
pub(crate) fn acquire_not_granted() {
    metrics::counter!("dagnats_acquires_not_granted_total").increment(1);
}

/// Records how long a waiting acquire's holder had waited when the key
/// was granted (its `Dagnats-Lease-Waited-Ms`).
pub(crate) fn acquire_waited(waited: Duration) {
    metrics::histogram!("dagnats_acquire_wait_seconds").record(waited.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::Op;

    #[test]
    fn every_op_has_its_own_label() {
        let all = [
            Op::Acquire,
            Op::Renew,
            Op::Release,
            Op::Owner,
            Op::Forward,
            Op::Revoke,
            Op::List,
            Op::History,
            Op::Events,
            Op::Recent,
            Op::Ops,
            Op::Unrouted,
        ];
        let labels: std::collections::HashSet<_> = all.iter().map(|op| op.label()).collect();
        assert_eq!(labels.len(), all.len());
    }
}
