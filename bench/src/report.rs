//! The results: a markdown table for people and the README, JSON for tools.

use std::borrow::Borrow;

use serde::Serialize;

use crate::Params;
use crate::gateway_ops::Sequential;
use crate::http_ops::FanOut;
use crate::measure::{Latency, Throughput};
use crate::scale::Scale;

#[derive(Serialize)]
pub struct Floor {
    pub hop: Latency,
    pub compare_and_set: Latency,
    pub leader_read: Latency,
}

#[derive(Serialize)]
pub struct Etcd {
    pub acquire: Latency,
    pub renew: Latency,
    pub keep_alive: Throughput,
    pub compare_and_set: Throughput,
}

/// Many concurrent clients on the default server.
#[derive(Serialize)]
pub struct Throughputs {
    pub floor_compare_and_set: Throughput,
    pub renew: Throughput,
    pub owner: Throughput,
}

/// The gateway on a nats-server that fsyncs before every acknowledgement,
/// the durability etcd always has.
#[derive(Serialize)]
pub struct Durable {
    pub nats: Sequential,
    pub renew: Throughput,
}

#[derive(Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Machine { cpu, cores }
}

#[derive(Serialize)]
pub struct Results {
    pub machine: Machine,
    pub params: Params,
    pub floor: Floor,
    pub nats: Sequential,
    pub http: Sequential,
    pub fan_out: FanOut,
    pub throughput: Throughputs,
    pub durable: Durable,
    pub etcd: Option<Etcd>,
    pub scale: Vec<Scale>,
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// p50, p99 and p99.9 in milliseconds: the columns most tables show.
fn percentiles(lat: &Latency) -> [String; 3] {
    [ms(lat.p50_us), ms(lat.p99_us), ms(lat.p999_us)]
}

/// ops/s, then the CPU microseconds per operation of `procs` ("-" where a
/// process took no part).
fn rate(name: &str, t: &Throughput, procs: &[&str]) -> Vec<String> {
    let mut row = vec![name.to_string(), format!("{:.0}", t.ops_per_second)];
    row.extend(procs.iter().map(|p| {
        t.cpu_us_per_op
            .get(p)
            .map_or("-".to_string(), |us| format!("{us:.0}"))
    }));
    row
}

/// Appends a markdown table after a blank line: `header`, its `---`
/// separator, then `rows`. Every table is written here, so they all keep
/// one layout.
fn table<H: Borrow<str>>(
    out: &mut String,
    header: &[H],
    rows: impl IntoIterator<Item = Vec<String>>,
) {
    out.push('\n');
    line(out, header);
    line(out, &vec!["---"; header.len()]);
    for row in rows {
        line(out, &row);
    }
}

/// One table line: `| a | b |`.
fn line<S: Borrow<str>>(out: &mut String, cells: &[S]) {
    out.push_str("| ");
    out.push_str(&cells.join(" | "));
    out.push_str(" |\n");
}

impl Results {
    pub fn markdown(&self) -> String {
        let f = &self.floor;
        let hop = f.hop.p50_us;
        let nats = [
            (
                "acquire",
                &self.nats.acquire,
                f.leader_read.p50_us + f.compare_and_set.p50_us + hop,
                "read + CAS + hop",
            ),
            (
                "renew",
                &self.nats.renew,
                f.compare_and_set.p50_us + hop,
                "CAS + hop",
            ),
            (
                "owner",
                &self.nats.owner,
                f.leader_read.p50_us + hop,
                "read + hop",
            ),
            (
                "release",
                &self.nats.release,
                f.compare_and_set.p50_us + hop,
                "CAS + hop",
            ),
            (
                "forward",
                &self.nats.forward,
                f.leader_read.p50_us + 2 * hop,
                "read + 2 hops",
            ),
        ];
        let mut out = format!(
            "Machine: {} ({} cores). Parameters: {:?}\n",
            self.machine.cpu, self.machine.cores, self.params
        );
        table(
            &mut out,
            &[
                "NATS front",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "floor p50 ms",
                "floor",
                "p50 / floor",
            ],
            nats.map(|(name, lat, floor, what)| {
                let [p50, p99, p999] = percentiles(lat);
                let ratio = lat.p50_us as f64 / floor.max(1) as f64;
                vec![
                    name.to_string(),
                    p50,
                    p99,
                    p999,
                    ms(floor),
                    what.to_string(),
                    format!("{ratio:.2}"),
                ]
            }),
        );
        table(
            &mut out,
            &["floor (raw, same client)", "p50 ms", "p99 ms", "p99.9 ms"],
            [
                ("core NATS request/reply hop", &f.hop),
                ("JetStream CAS publish with TTL", &f.compare_and_set),
                ("leader read (MSG.GET last_by_subj)", &f.leader_read),
            ]
            .map(|(name, lat)| {
                let [p50, p99, p999] = percentiles(lat);
                vec![name.to_string(), p50, p99, p999]
            }),
        );
        table(
            &mut out,
            &[
                "HTTP front",
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
                "NATS front p50 ms",
                "HTTP / NATS",
            ],
            [
                ("acquire", &self.http.acquire, &self.nats.acquire),
                ("renew", &self.http.renew, &self.nats.renew),
                ("owner", &self.http.owner, &self.nats.owner),
                ("release", &self.http.release, &self.nats.release),
                ("forward", &self.http.forward, &self.nats.forward),
            ]
            .map(|(name, http, nats)| {
                let [p50, p99, p999] = percentiles(http);
                let ratio = http.p50_us as f64 / nats.p50_us.max(1) as f64;
                vec![
                    name.to_string(),
                    p50,
                    p99,
                    p999,
                    ms(nats.p50_us),
                    format!("{ratio:.2}"),
                ]
            }),
        );
        let procs = ["gateway", "nats-server", "etcd"];
        let t = &self.throughput;
        let mut rates = vec![
            rate(
                "raw JetStream CAS publish (floor)",
                &t.floor_compare_and_set,
                &procs,
            ),
            rate("gateway renew", &t.renew, &procs),
            rate("gateway owner", &t.owner, &procs),
            rate(
                "gateway renew, sync_interval: always",
                &self.durable.renew,
                &procs,
            ),
        ];
        if let Some(etcd) = &self.etcd {
            rates.push(rate("etcd 3.4 lease keep-alive", &etcd.keep_alive, &procs));
            rates.push(rate(
                "etcd 3.4 compare-and-set put (txn)",
                &etcd.compare_and_set,
                &procs,
            ));
        }
        let clients = self.params.concurrent_clients;
        table(
            &mut out,
            &[
                format!("throughput ({clients} concurrent clients)").as_str(),
                "ops/s",
                "gateway CPU us/op",
                "nats-server CPU us/op",
                "etcd CPU us/op",
            ],
            rates,
        );
        if let Some(etcd) = &self.etcd {
            let durable = &self.durable.nats;
            table(
                &mut out,
                &[
                    "vs etcd 3.4 (p50 / p99 ms)",
                    "dagnats-leases",
                    "dagnats-leases, sync_interval: always",
                    "etcd",
                ],
                [
                    (
                        "acquire",
                        &self.nats.acquire,
                        &durable.acquire,
                        &etcd.acquire,
                    ),
                    ("renew", &self.nats.renew, &durable.renew, &etcd.renew),
                ]
                .map(|(name, ours, synced, etcd)| {
                    let both = |l: &Latency| format!("{} / {}", ms(l.p50_us), ms(l.p99_us));
                    vec![name.to_string(), both(ours), both(synced), both(etcd)]
                }),
            );
        }
        table(
            &mut out,
            &[
                "scale: holders (TTL, s)",
                "renewals",
                "renew p99 ms",
                "missed deadlines",
                "wrongly lost",
                "errors",
                "gateway CPU %",
                "gateway RSS MB",
            ],
            self.scale.iter().map(|s| {
                vec![
                    format!("{} ({} ms, {} s)", s.holders, s.ttl_ms, s.seconds),
                    s.renewals.to_string(),
                    ms(s.renew.p99_us),
                    s.missed_deadlines.to_string(),
                    s.wrongly_lost.to_string(),
                    s.errors.to_string(),
                    format!("{:.0}", s.gateway_cpu_percent),
                    format!("{:.1}", s.gateway_rss_mb),
                ]
            }),
        );
        let f = &self.fan_out;
        table(
            &mut out,
            &[
                "SSE fan-out",
                "leases held",
                "changes",
                "deliveries",
                "deliveries/s",
                "lag p50 ms",
                "lag p99 ms",
                "gateway RSS MB",
            ],
            [vec![
                format!("{} clients", f.clients),
                self.params.sse_leases.to_string(),
                f.changes.to_string(),
                f.delivered.to_string(),
                format!("{:.0}", f.delivered_per_second),
                ms(f.lag.p50_us),
                ms(f.lag.p99_us),
                format!("{:.1}", f.gateway_rss_mb),
            ]],
        );
        out
    }
}
