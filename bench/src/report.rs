//! The results: a markdown table for people and the README, JSON for tools.

use std::borrow::Borrow;

use serde::Serialize;

use crate::Params;
use crate::gateway_ops::Sequential;
use crate::http_ops::FanOut;
use crate::measure::Latency;
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
    pub renew_per_second: f64,
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
    pub renew_per_second: f64,
    pub owner_per_second: f64,
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
        let mut throughput = vec![
            vec![
                "gateway renew".to_string(),
                format!("{:.0}", self.renew_per_second),
            ],
            vec![
                "gateway owner".to_string(),
                format!("{:.0}", self.owner_per_second),
            ],
        ];
        if let Some(etcd) = &self.etcd {
            throughput.push(vec![
                "etcd 3.4 lease keep-alive".to_string(),
                format!("{:.0}", etcd.renew_per_second),
            ]);
        }
        let clients = self.params.concurrent_clients;
        table(
            &mut out,
            &[
                format!("throughput ({clients} concurrent clients)").as_str(),
                "ops/s",
            ],
            throughput,
        );
        if let Some(etcd) = &self.etcd {
            table(
                &mut out,
                &[
                    "vs etcd 3.4",
                    "dagnats-leases p50 ms",
                    "etcd p50 ms",
                    "dagnats-leases p99 ms",
                    "etcd p99 ms",
                ],
                [
                    ("acquire", &self.nats.acquire, &etcd.acquire),
                    ("renew", &self.nats.renew, &etcd.renew),
                ]
                .map(|(name, ours, etcd)| {
                    vec![
                        name.to_string(),
                        ms(ours.p50_us),
                        ms(etcd.p50_us),
                        ms(ours.p99_us),
                        ms(etcd.p99_us),
                    ]
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
                "changes",
                "deliveries",
                "deliveries/s",
                "lag p50 ms",
                "lag p99 ms",
                "gateway RSS MB",
            ],
            [vec![
                format!("{} clients", f.clients),
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
