//! The results: a markdown table for people and the README, JSON for tools.

use std::fmt::Write;

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
pub struct Ops {
    pub acquire: Latency,
    pub renew: Latency,
    pub owner: Latency,
    pub release: Latency,
    pub forward: Latency,
}

impl From<Sequential> for Ops {
    fn from(s: Sequential) -> Self {
        Ops {
            acquire: s.acquire,
            renew: s.renew,
            owner: s.owner,
            release: s.release,
            forward: s.forward,
        }
    }
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
    pub nats: Ops,
    pub http: Ops,
    pub fan_out: FanOut,
    pub renew_per_second: f64,
    pub owner_per_second: f64,
    pub etcd: Option<Etcd>,
    pub scale: Vec<Scale>,
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

impl Results {
    pub fn markdown(&self) -> String {
        let f = &self.floor;
        let hop = f.hop.p50_us;
        let rows = [
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
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Machine: {} ({} cores). Parameters: {:?}\n",
            self.machine.cpu, self.machine.cores, self.params
        );
        let _ = writeln!(
            out,
            "| NATS front | p50 ms | p99 ms | p99.9 ms | floor p50 ms | floor | p50 / floor |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
        for (name, lat, floor, what) in rows {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {what} | {:.2} |",
                ms(lat.p50_us),
                ms(lat.p99_us),
                ms(lat.p999_us),
                ms(floor),
                lat.p50_us as f64 / floor.max(1) as f64
            );
        }
        let _ = writeln!(
            out,
            "\n| floor (raw, same client) | p50 ms | p99 ms | p99.9 ms |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for (name, lat) in [
            ("core NATS request/reply hop", &f.hop),
            ("JetStream CAS publish with TTL", &f.compare_and_set),
            ("leader read (MSG.GET last_by_subj)", &f.leader_read),
        ] {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} |",
                ms(lat.p50_us),
                ms(lat.p99_us),
                ms(lat.p999_us)
            );
        }
        let _ = writeln!(
            out,
            "\n| throughput ({} concurrent clients) | ops/s |",
            self.params.concurrent_clients
        );
        let _ = writeln!(out, "| --- | --- |");
        let _ = writeln!(out, "| gateway renew | {:.0} |", self.renew_per_second);
        let _ = writeln!(out, "| gateway owner | {:.0} |", self.owner_per_second);
        if let Some(etcd) = &self.etcd {
            let _ = writeln!(
                out,
                "| etcd 3.4 lease keep-alive | {:.0} |",
                etcd.renew_per_second
            );
            let _ = writeln!(
                out,
                "\n| vs etcd 3.4 | dagnats-leases p50 ms | etcd p50 ms | dagnats-leases p99 ms | etcd p99 ms |"
            );
            let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
            let _ = writeln!(
                out,
                "| acquire | {} | {} | {} | {} |",
                ms(self.nats.acquire.p50_us),
                ms(etcd.acquire.p50_us),
                ms(self.nats.acquire.p99_us),
                ms(etcd.acquire.p99_us)
            );
            let _ = writeln!(
                out,
                "| renew | {} | {} | {} | {} |",
                ms(self.nats.renew.p50_us),
                ms(etcd.renew.p50_us),
                ms(self.nats.renew.p99_us),
                ms(etcd.renew.p99_us)
            );
        }
        let _ = writeln!(
            out,
            "\n| scale: holders (TTL, s) | renewals | renew p99 ms | missed deadlines | wrongly lost | errors | gateway CPU % | gateway RSS MB |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
        for s in &self.scale {
            let _ = writeln!(
                out,
                "| {} ({} ms, {} s) | {} | {} | {} | {} | {} | {:.0} | {:.1} |",
                s.holders,
                s.ttl_ms,
                s.seconds,
                s.renewals,
                ms(s.renew.p99_us),
                s.missed_deadlines,
                s.wrongly_lost,
                s.errors,
                s.gateway_cpu_percent,
                s.gateway_rss_mb
            );
        }
        let f = &self.fan_out;
        let _ = writeln!(
            out,
            "\n| SSE fan-out | changes | deliveries | deliveries/s | lag p50 ms | lag p99 ms | gateway RSS MB |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
        let _ = writeln!(
            out,
            "| {} clients | {} | {} | {:.0} | {} | {} | {:.1} |",
            f.clients,
            f.changes,
            f.delivered,
            f.delivered_per_second,
            ms(f.lag.p50_us),
            ms(f.lag.p99_us),
            f.gateway_rss_mb
        );
        out
    }
}
