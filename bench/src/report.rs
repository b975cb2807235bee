//! The results: markdown tables for people and docs/performance.md, JSON for
//! tools.
//! The production layout comes first, with its headline table of the
//! gateway beside etcd and the raw floor; then the single node.

use std::borrow::Borrow;

use serde::Serialize;

use crate::Params;
use crate::floor::Floor;
use crate::gateway_ops::Sequential;
use crate::http_ops::FanOut;
use crate::measure::{Latency, RangeRead, Throughput};
use crate::scale::Scale;

#[derive(Serialize)]
pub struct Etcd {
    pub members: usize,
    pub acquire: Latency,
    pub renew: Latency,
    /// A linearizable get of one key: etcd's owner query.
    pub get: Latency,
    pub keep_alive: Throughput,
    pub compare_and_set: Throughput,
    pub get_throughput: Throughput,
    /// One range get of a prefix holding as many keys as leases are held.
    pub range: RangeRead,
}

/// Many concurrent clients.
#[derive(Serialize)]
pub struct Throughputs {
    pub floor_compare_and_set: Throughput,
    pub floor_leader_read: Throughput,
    pub renew: Throughput,
    pub owner: Throughput,
    /// The floor under renew and owner: responders in the gateways' place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub front: Option<FrontFloor>,
}

/// Calls per second through responders that publish once per call, in the
/// gateways' place (`front.rs`): the floor under any NATS front.
#[derive(Serialize)]
pub struct FrontFloor {
    /// A compare-and-set publish with a TTL, its change event to every
    /// responder: a renew's work.
    pub write: Throughput,
    /// An owner read's confirmation: a barrier publish expecting the
    /// key's last sequence on a replicated stream, a read through the
    /// stream leader on one replica.
    pub check: Throughput,
    /// Which of the two `check` is (`front::check_by`).
    pub check_by: &'static str,
}

/// The gateway on a nats-server that fsyncs before every acknowledgement,
/// the durability etcd always has.
#[derive(Serialize)]
pub struct Durable {
    pub nats: Sequential,
    pub renew: Throughput,
}

/// Everything measured in one layout.
#[derive(Serialize)]
pub struct Figures {
    /// What ran: servers, replicas, gateways, etcd members.
    pub layout: String,
    /// The processes whose CPU was metered, in the order the tables show.
    pub processes: Vec<&'static str>,
    pub floor: Floor,
    pub nats: Sequential,
    pub http: Sequential,
    pub throughput: Throughputs,
    pub etcd: Option<Etcd>,
    pub scale: Vec<Scale>,
    /// `GET /v1/leases` of every held lease, one call each.
    pub list: RangeRead,
    pub fan_out: FanOut,
}

/// The floors and the NATS front, sequentially, on a single node whose
/// servers and gateway run on one core and the load generator on another.
#[derive(Serialize)]
pub struct Pinned {
    pub floor: Floor,
    pub nats: Sequential,
}

/// The single-node layout, and the gateway on a single node that fsyncs.
#[derive(Serialize)]
pub struct SingleNode {
    #[serde(flatten)]
    pub figures: Figures,
    /// `None` on a machine with one core.
    pub pinned: Option<Pinned>,
    pub durable: Durable,
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

/// The single-node figures keep the top-level keys they always had; the
/// production ones are under `production`.
#[derive(Serialize)]
pub struct Results {
    pub machine: Machine,
    pub params: Params,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub production: Option<Figures>,
    #[serde(flatten)]
    pub single_node: Option<SingleNode>,
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

/// p50, p99 and p99.9 in milliseconds: the columns most tables show.
fn percentiles(lat: &Latency) -> [String; 3] {
    [ms(lat.p50_us), ms(lat.p99_us), ms(lat.p999_us)]
}

/// `a / b` as a factor.
fn times(a: f64, b: f64) -> String {
    format!("{:.2}x", a / b.max(f64::MIN_POSITIVE))
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

/// The gateway's rate against the front floor's (`front.rs`), and the
/// floor's against etcd's, as the headline's ratios say them; empty
/// without a front floor.
fn against_front(
    gateway: &Throughput,
    front: Option<&Throughput>,
    etcd: Option<&Throughput>,
) -> String {
    let Some(front) = front else {
        return String::new();
    };
    let floor_vs_etcd = etcd.map_or_else(String::new, |e| {
        format!(
            ", which is {} etcd's",
            times(front.ops_per_second, e.ops_per_second)
        )
    });
    format!(
        "; {} the front floor's {:.0}/s{floor_vs_etcd}",
        times(gateway.ops_per_second, front.ops_per_second),
        front.ops_per_second
    )
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
        let mut out = format!(
            "Machine: {} ({} cores). Parameters: {:?}\n",
            self.machine.cpu, self.machine.cores, self.params
        );
        if let Some(production) = &self.production {
            out.push_str(&format!("\n## Production: {}\n", production.layout));
            production.headline(&mut out);
            production.tables(&mut out, &self.params, Vec::new());
        }
        if let Some(single) = &self.single_node {
            let figures = &single.figures;
            out.push_str(&format!("\n## Single node: {}\n", figures.layout));
            let durable = rate(
                "gateway renew, sync_interval: always",
                &single.durable.renew,
                &figures.processes,
            );
            figures.tables(&mut out, &self.params, vec![durable]);
            if let Some(pinned) = &single.pinned {
                front_against_floor(
                    &mut out,
                    "NATS front, client on CPU 0, nats-server and gateway on CPU 1",
                    &pinned.nats,
                    &pinned.floor,
                );
            }
            single.versus_etcd(&mut out);
        }
        out
    }
}

impl SingleNode {
    /// Acquire and renew beside etcd's, lazy and fsynced.
    fn versus_etcd(&self, out: &mut String) {
        let (Some(etcd), ours) = (&self.figures.etcd, &self.figures.nats) else {
            return;
        };
        let durable = &self.durable.nats;
        table(
            out,
            &[
                "vs etcd 3.4 (p50 / p99 ms)",
                "dagnats-leases",
                "dagnats-leases, sync_interval: always",
                "etcd",
            ],
            [
                ("acquire", &ours.acquire, &durable.acquire, &etcd.acquire),
                ("renew", &ours.renew, &durable.renew, &etcd.renew),
            ]
            .map(|(name, ours, synced, etcd)| {
                let both = |l: &Latency| format!("{} / {}", ms(l.p50_us), ms(l.p99_us));
                vec![name.to_string(), both(ours), both(synced), both(etcd)]
            }),
        );
    }
}

impl Figures {
    /// The gateway beside etcd and the raw floor, operation by operation,
    /// with the ratios issue 13 sets targets for.
    fn headline(&self, out: &mut String) {
        let (f, t) = (&self.floor, &self.throughput);
        let p50_rate =
            |l: &Latency, r: &Throughput| format!("{} / {:.0}", ms(l.p50_us), r.ops_per_second);
        let p50_only = |l: &Latency| format!("{} / -", ms(l.p50_us));
        let none = || "-".to_string();
        let etcd = self.etcd.as_ref();
        let mut rows = vec![
            vec![
                "acquire".to_string(),
                p50_only(&self.nats.acquire),
                etcd.map_or_else(none, |e| {
                    format!("{} (lease grant + txn)", p50_only(&e.acquire))
                }),
                format!(
                    "{} / - (read + CAS)",
                    ms(f.leader_read.p50_us + f.compare_and_set.p50_us)
                ),
                etcd.map_or_else(none, |e| {
                    format!(
                        "p50 {} etcd's (target <= 0.70x)",
                        times(self.nats.acquire.p50_us as f64, e.acquire.p50_us as f64)
                    )
                }),
            ],
            vec![
                "renew".to_string(),
                p50_rate(&self.nats.renew, &t.renew),
                etcd.map_or_else(none, |e| {
                    format!("{} (keep-alive)", p50_rate(&e.renew, &e.keep_alive))
                }),
                format!(
                    "{} (CAS publish with TTL)",
                    p50_rate(&f.compare_and_set, &t.floor_compare_and_set)
                ),
                format!(
                    "ops/s {} etcd's keep-alive (target >= 1x), {} raw CAS (target >= 0.70x){}",
                    etcd.map_or_else(none, |e| times(
                        t.renew.ops_per_second,
                        e.keep_alive.ops_per_second
                    )),
                    times(
                        t.renew.ops_per_second,
                        t.floor_compare_and_set.ops_per_second
                    ),
                    against_front(
                        &t.renew,
                        t.front.as_ref().map(|f| &f.write),
                        etcd.map(|e| &e.keep_alive)
                    )
                ),
            ],
            vec![
                "owner".to_string(),
                p50_rate(&self.nats.owner, &t.owner),
                etcd.map_or_else(none, |e| {
                    format!("{} (linearizable get)", p50_rate(&e.get, &e.get_throughput))
                }),
                format!(
                    "{} (leader MSG.GET)",
                    p50_rate(&f.leader_read, &t.floor_leader_read)
                ),
                etcd.map_or_else(none, |e| {
                    format!(
                        "p50 {} etcd's get (target <= 1x), ops/s {} (target >= 1x){}",
                        times(self.nats.owner.p50_us as f64, e.get.p50_us as f64),
                        times(t.owner.ops_per_second, e.get_throughput.ops_per_second),
                        against_front(
                            &t.owner,
                            t.front.as_ref().map(|f| &f.check),
                            Some(&e.get_throughput)
                        )
                    )
                }),
            ],
        ];
        let list = &self.list;
        rows.push(vec![
            format!("list {} leases (HTTP, one call)", list.keys),
            format!(
                "{} / {:.0} leases/s",
                ms(list.call.p50_us),
                list.keys_per_second
            ),
            etcd.map_or_else(none, |e| {
                format!(
                    "{} / {:.0} keys/s (one range get)",
                    ms(e.range.call.p50_us),
                    e.range.keys_per_second
                )
            }),
            none(),
            format!(
                "{:.0} leases/s (target >= 50,000), {} etcd's",
                list.keys_per_second,
                etcd.map_or_else(none, |e| times(
                    list.keys_per_second,
                    e.range.keys_per_second
                ))
            ),
        ]);
        if let Some(s) = self.scale.iter().max_by_key(|s| s.holders) {
            rows.push(vec![
                format!("scale: {} holders, {} ms TTL", s.holders, s.ttl_ms),
                format!(
                    "renew p99 {} ms, {} missed, {} wrongly lost",
                    ms(s.renew.p99_us),
                    s.missed_deadlines,
                    s.wrongly_lost
                ),
                none(),
                none(),
                "target: 0 missed, 0 wrongly lost, p99 < 300 ms".to_string(),
            ]);
            if let Some(l) = &s.lists {
                rows.push(vec![
                    format!("list {} leases while they renew (HTTP)", l.range.keys),
                    format!(
                        "{} / {:.0} leases/s",
                        ms(l.range.call.p50_us),
                        l.range.keys_per_second
                    ),
                    none(),
                    none(),
                    format!(
                        "{:.0} leases/s (target >= 50,000), {} of {} calls short of the held leases",
                        l.range.keys_per_second, l.short, l.range.call.samples
                    ),
                ]);
            }
        }
        let members = etcd.map_or(0, |e| e.members);
        table(
            out,
            &[
                "operation".to_string(),
                "dagnats-leases p50 ms / ops/s".to_string(),
                format!("etcd {members}-node p50 ms / ops/s"),
                "raw NATS floor (R3) p50 ms / ops/s".to_string(),
                "ratio".to_string(),
            ],
            rows,
        );
    }

    /// Every figure of the layout, table by table; `extra_rates` are more
    /// throughput rows after the gateway's own.
    fn tables(&self, out: &mut String, params: &Params, extra_rates: Vec<Vec<String>>) {
        self.latency_tables(out);
        self.throughput_table(out, params, extra_rates);
        if let Some(etcd) = &self.etcd {
            table(
                out,
                &[
                    match etcd.members {
                        1 => "etcd 3.4, 1 member".to_string(),
                        n => format!("etcd 3.4, {n} members"),
                    }
                    .as_str(),
                    "p50 ms",
                    "p99 ms",
                    "p99.9 ms",
                ],
                [
                    ("acquire (lease grant + txn)", &etcd.acquire),
                    ("renew (keep-alive)", &etcd.renew),
                    ("owner (linearizable get)", &etcd.get),
                ]
                .map(|(name, lat)| {
                    let [p50, p99, p999] = percentiles(lat);
                    vec![name.to_string(), p50, p99, p999]
                }),
            );
        }
        let mut reads = vec![("gateway GET /v1/leases", &self.list)];
        if let Some(etcd) = &self.etcd {
            reads.push(("etcd range get of the prefix", &etcd.range));
        }
        table(
            out,
            &[
                "read every key, one call",
                "keys",
                "p50 ms",
                "p99 ms",
                "keys/s (at p50)",
                "CPU ms per call",
            ],
            reads.into_iter().map(|(name, r)| {
                let cpu: Vec<String> = r
                    .cpu_us_per_call
                    .iter()
                    .map(|(process, us)| format!("{process} {:.1}", us / 1e3))
                    .collect();
                vec![
                    name.to_string(),
                    r.keys.to_string(),
                    ms(r.call.p50_us),
                    ms(r.call.p99_us),
                    format!("{:.0}", r.keys_per_second),
                    if cpu.is_empty() {
                        "-".to_string()
                    } else {
                        cpu.join(", ")
                    },
                ]
            }),
        );
        self.scale_tables(out, params);
    }

    /// The NATS front against its floor, the floor itself, and HTTP
    /// against NATS.
    fn latency_tables(&self, out: &mut String) {
        let f = &self.floor;
        front_against_floor(out, "NATS front", &self.nats, f);
        table(
            out,
            &[
                format!("floor (raw, same client, stream {})", f.stream).as_str(),
                "p50 ms",
                "p99 ms",
                "p99.9 ms",
            ],
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
            out,
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
    }

    /// Operations per second with the CPU of every process per operation.
    fn throughput_table(&self, out: &mut String, params: &Params, extra: Vec<Vec<String>>) {
        let procs = &self.processes;
        let t = &self.throughput;
        let mut rates = vec![
            rate(
                "raw JetStream CAS publish (floor)",
                &t.floor_compare_and_set,
                procs,
            ),
            rate("raw leader read (floor)", &t.floor_leader_read, procs),
            rate("gateway renew", &t.renew, procs),
            rate("gateway owner", &t.owner, procs),
        ];
        if let Some(front) = &t.front {
            rates.push(rate(
                "front floor: hop + CAS publish + change events",
                &front.write,
                procs,
            ));
            rates.push(rate(
                &format!("front floor: hop + {}", front.check_by),
                &front.check,
                procs,
            ));
        }
        rates.extend(extra);
        if let Some(etcd) = &self.etcd {
            rates.push(rate("etcd 3.4 lease keep-alive", &etcd.keep_alive, procs));
            rates.push(rate(
                "etcd 3.4 linearizable get",
                &etcd.get_throughput,
                procs,
            ));
            rates.push(rate(
                "etcd 3.4 compare-and-set put (txn)",
                &etcd.compare_and_set,
                procs,
            ));
        }
        let mut header = vec![
            format!(
                "throughput ({} concurrent clients, median of {} round(s) of {} s)",
                params.concurrent_clients, params.throughput_rounds, params.throughput_seconds
            ),
            "ops/s".to_string(),
        ];
        header.extend(procs.iter().map(|p| format!("{p} CPU us/op")));
        table(out, &header, rates);
    }

    /// Many holders, then SSE fan-out.
    fn scale_tables(&self, out: &mut String, params: &Params) {
        table(
            out,
            &[
                "scale: holders (TTL, s)",
                "renewals",
                "renew p99 ms",
                "missed deadlines",
                "wrongly lost",
                "errors",
                "gateways' CPU % (sum)",
                "nats-servers' CPU % (sum)",
                "load generator CPU %",
                "gateway RSS MB (largest)",
                "stream leader changes",
                "stream checks unanswered",
                "lists meanwhile: leases (fewest), p50 ms, leases/s, short",
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
                    format!("{:.0}", s.servers_cpu_percent),
                    format!("{:.0}", s.load_cpu_percent),
                    format!("{:.1}", s.gateway_rss_mb),
                    s.leader_changes.to_string(),
                    s.stream_checks_unanswered.to_string(),
                    s.lists.as_ref().map_or_else(
                        || "-".to_string(),
                        |l| {
                            format!(
                                "{}, {}, {:.0}, {} of {}",
                                l.range.keys,
                                ms(l.range.call.p50_us),
                                l.range.keys_per_second,
                                l.short,
                                l.range.call.samples
                            )
                        },
                    ),
                ]
            }),
        );
        let f = &self.fan_out;
        table(
            out,
            &[
                "SSE fan-out",
                "leases held",
                "changes",
                "deliveries",
                "deliveries/s",
                "lag p50 ms",
                "lag p99 ms",
                "gateway RSS MB (largest)",
            ],
            [vec![
                format!("{} clients", f.clients),
                params.sse_leases.to_string(),
                f.changes.to_string(),
                f.delivered.to_string(),
                format!("{:.0}", f.delivered_per_second),
                ms(f.lag.p50_us),
                ms(f.lag.p99_us),
                format!("{:.1}", f.gateway_rss_mb),
            ]],
        );
    }
}

/// Each operation over NATS against its floor: the raw NATS operations a
/// call cannot do without, plus the hop to the gateway.
fn front_against_floor(out: &mut String, title: &str, ops: &Sequential, f: &Floor) {
    let hop = f.hop.p50_us;
    let rows = [
        (
            "acquire",
            &ops.acquire,
            f.leader_read.p50_us + f.compare_and_set.p50_us + hop,
            "read + CAS + hop",
        ),
        (
            "renew",
            &ops.renew,
            f.compare_and_set.p50_us + hop,
            "CAS + hop",
        ),
        (
            "owner",
            &ops.owner,
            f.leader_read.p50_us + hop,
            "read + hop",
        ),
        (
            "release",
            &ops.release,
            f.compare_and_set.p50_us + hop,
            "CAS + hop",
        ),
        (
            "forward",
            &ops.forward,
            f.leader_read.p50_us + 2 * hop,
            "read + 2 hops",
        ),
    ];
    table(
        out,
        &[
            title,
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "floor p50 ms",
            "floor",
            "p50 / floor",
        ],
        rows.map(|(name, lat, floor, what)| {
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
}
