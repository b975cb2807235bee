//! Latency percentiles and throughput.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::procs::usage;

/// Percentiles of one operation, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub samples: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
}

/// Recorded durations.
pub struct Recorder(Histogram<u64>);

impl Default for Recorder {
    fn default() -> Self {
        Recorder(Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"))
    }
}

impl Recorder {
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, 60_000_000);
        self.0.record(us).expect("in bounds");
    }

    pub fn latency(&self) -> Latency {
        Latency {
            samples: self.0.len(),
            p50_us: self.0.value_at_quantile(0.5),
            p99_us: self.0.value_at_quantile(0.99),
            p999_us: self.0.value_at_quantile(0.999),
        }
    }
}

/// Latencies of `ops`, each called `n` times one after another (`op(i)`,
/// `i` counting its calls), after `n / 10` untimed warm-up calls of each
/// (`op(u64::MAX - i)`). The calls run in `rounds` rounds, every op in
/// turn each round, each op's samples pooled: the machine drifts over
/// minutes, and a drift then falls on every system alike instead of on
/// whichever op ran in the slow stretch, so a ratio of two p50s compares
/// like with like.
pub async fn latencies(ops: &[Op], n: u64, rounds: u64) -> Vec<Latency> {
    for op in ops {
        for i in 0..n / 10 {
            op(u64::MAX - i).await;
        }
    }
    let mut recorders: Vec<Recorder> = ops.iter().map(|_| Recorder::default()).collect();
    for (from, to) in round_bounds(n, rounds) {
        for (op, rec) in ops.iter().zip(&mut recorders) {
            for i in from..to {
                let start = Instant::now();
                op(i).await;
                rec.record(start.elapsed());
            }
        }
    }
    recorders.iter().map(Recorder::latency).collect()
}

/// `0..n` cut into `rounds` consecutive ranges of (nearly) equal length.
fn round_bounds(n: u64, rounds: u64) -> impl Iterator<Item = (u64, u64)> {
    let rounds = rounds.max(1);
    (0..rounds).map(move |r| (n * r / rounds, n * (r + 1) / rounds))
}

/// One operation of a throughput phase, for client `c`: set up once (its
/// keys held, written or granted), so the phase can run round after round.
pub type Op = Arc<dyn Fn(u64) -> BoxFuture<'static, ()> + Send + Sync>;

/// `op` as an [`Op`].
pub fn op<F, Fut>(f: F) -> Op
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(move |c| f(c).boxed())
}

/// Operations per second with `clients` tasks calling `op(client)` in a
/// loop for `duration`.
pub async fn throughput(op: Op, clients: u64, duration: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (op, done) = (op.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    op(c).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("throughput task");
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// A throughput figure, with the CPU time each server process spent per
/// operation: where the time goes, process by process.
#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    pub ops_per_second: f64,
    /// CPU microseconds per operation, by process name.
    pub cpu_us_per_op: BTreeMap<&'static str, f64>,
    /// Each round's operations per second, in the order run, where the
    /// figure is the median of several rounds ([`Throughput::median`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<f64>,
}

impl Throughput {
    /// The round of `runs` with the median rate, its CPU with it, and
    /// every round's rate beside it.
    pub fn median(mut runs: Vec<Throughput>) -> Throughput {
        let rounds: Vec<f64> = runs.iter().map(|t| t.ops_per_second).collect();
        runs.sort_by(|a, b| a.ops_per_second.total_cmp(&b.ops_per_second));
        let middle = runs.len() / 2;
        let mut median = runs.swap_remove(middle);
        if rounds.len() > 1 {
            median.rounds = rounds;
        }
        median
    }
}

/// Runs `run` (a [`throughput`] of `duration`) and charges the CPU time
/// `servers` used meanwhile to its operations.
pub async fn metered(
    servers: &[(&'static str, u32)],
    duration: Duration,
    run: impl Future<Output = f64>,
) -> Throughput {
    let (ops_per_second, spent) = cpu_spent(servers, run).await;
    let ops = (ops_per_second * duration.as_secs_f64()).max(1.0);
    Throughput {
        ops_per_second,
        cpu_us_per_op: per(spent, ops),
        rounds: Vec::new(),
    }
}

/// What `run` came to, and the CPU time each of `processes` spent while
/// it ran.
pub async fn cpu_spent<T>(
    processes: &[(&'static str, u32)],
    run: impl Future<Output = T>,
) -> (T, Vec<(&'static str, Duration)>) {
    let before: Vec<_> = processes.iter().map(|(_, pid)| usage(*pid)).collect();
    let done = run.await;
    let spent = processes
        .iter()
        .zip(before)
        .map(|((name, pid), before)| (*name, usage(*pid).cpu.saturating_sub(before.cpu)))
        .collect();
    (done, spent)
}

/// CPU microseconds per one of `ops`, by process name.
fn per(spent: Vec<(&'static str, Duration)>, ops: f64) -> BTreeMap<&'static str, f64> {
    spent
        .into_iter()
        .map(|(name, cpu)| (name, cpu.as_secs_f64() * 1e6 / ops))
        .collect()
}

/// What reading every key at once came to, on either system.
#[derive(Debug, Clone, Serialize)]
pub struct RangeRead {
    /// Keys (or leases) each call returned.
    pub keys: u64,
    /// Duration of one whole call.
    pub call: Latency,
    /// `keys` over the median call.
    pub keys_per_second: f64,
    /// CPU microseconds per call, by process name, where measured.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_us_per_call: BTreeMap<&'static str, f64>,
}

impl RangeRead {
    /// Times `calls` calls of `read`, each answering how many keys it got;
    /// every call must return `keys`.
    pub async fn measure<F, Fut>(keys: u64, calls: u64, mut read: F) -> RangeRead
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = u64>,
    {
        let mut rec = Recorder::default();
        for _ in 0..calls {
            let start = Instant::now();
            let got = read().await;
            rec.record(start.elapsed());
            assert_eq!(got, keys, "one call returns every key");
        }
        RangeRead::of(keys, rec.latency())
    }

    /// `keys` in each call, which took `call`.
    pub fn of(keys: u64, call: Latency) -> RangeRead {
        RangeRead {
            keys,
            call,
            keys_per_second: keys as f64 / (call.p50_us.max(1) as f64 / 1e6),
            cpu_us_per_call: BTreeMap::new(),
        }
    }

    /// [`RangeRead::measure`], with the CPU time each of `processes` spent
    /// per call.
    pub async fn metered<F, Fut>(
        processes: &[(&'static str, u32)],
        keys: u64,
        calls: u64,
        read: F,
    ) -> RangeRead
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = u64>,
    {
        let (range, spent) = cpu_spent(processes, RangeRead::measure(keys, calls, read)).await;
        RangeRead {
            cpu_us_per_call: per(spent, calls.max(1) as f64),
            ..range
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ops_per_second: f64, cpu_us: f64) -> Throughput {
        Throughput {
            ops_per_second,
            cpu_us_per_op: BTreeMap::from([("gateway", cpu_us)]),
            rounds: Vec::new(),
        }
    }

    #[test]
    fn the_median_round_is_the_figure_with_its_own_cpu_and_every_round_beside_it() {
        let median = Throughput::median(vec![
            run(9_000.0, 20.0),
            run(7_000.0, 30.0),
            run(8_000.0, 25.0),
        ]);
        assert_eq!(median.ops_per_second, 8_000.0);
        assert_eq!(median.cpu_us_per_op["gateway"], 25.0);
        assert_eq!(median.rounds, vec![9_000.0, 7_000.0, 8_000.0]);
    }

    #[test]
    fn one_round_is_its_own_figure_with_no_rounds_listed() {
        let median = Throughput::median(vec![run(9_000.0, 20.0)]);
        assert_eq!(median.ops_per_second, 9_000.0);
        assert!(median.rounds.is_empty());
    }

    #[test]
    fn rounds_cut_every_call_once_in_order() {
        let bounds: Vec<_> = round_bounds(2_000, 3).collect();
        assert_eq!(bounds, vec![(0, 666), (666, 1_333), (1_333, 2_000)]);
        assert_eq!(round_bounds(50, 1).collect::<Vec<_>>(), vec![(0, 50)]);
    }

    #[tokio::test]
    async fn latencies_interleave_the_ops_round_by_round_after_each_ones_warm_up() {
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recording = |name: &'static str| {
            let calls = calls.clone();
            op(move |i| {
                calls.lock().unwrap().push((name, i));
                async {}
            })
        };
        let figures = latencies(&[recording("a"), recording("b")], 20, 2).await;
        let calls = calls.lock().unwrap().clone();
        let warm_up = |name| [(name, u64::MAX), (name, u64::MAX - 1)];
        let round = |name, from: u64| (from..from + 10).map(move |i| (name, i));
        let expected: Vec<_> = warm_up("a")
            .into_iter()
            .chain(warm_up("b"))
            .chain(round("a", 0))
            .chain(round("b", 0))
            .chain(round("a", 10))
            .chain(round("b", 10))
            .collect();
        assert_eq!(calls, expected);
        assert_eq!(
            figures.iter().map(|l| l.samples).collect::<Vec<_>>(),
            [20, 20]
        );
    }
}
