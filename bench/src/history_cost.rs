//! What the tenure history costs (docs/protocol.md, Tenure history): the
//! same calls on two setups side by side, one nats-server and one gateway
//! each, one with the history on (its default) and one with
//! `--history-max-age 0`, measured in interleaved rounds so the machine's
//! drift falls on both alike; and whether the history kept up.
//!
//! - latency: acquire, release, renew and owner one after another, p50
//!   and p99;
//! - throughput: acquire-and-release cycles, renews and owner reads with
//!   concurrent clients, each figure the median round, with the CPU each
//!   process spent per operation (the history writer runs in the gateway);
//! - kept up: tenures the cycles made against those the history recorded,
//!   and how long after the last cycle its consumer had nothing pending.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dagnats_leases_client::LeaseClient;
use dagnats_leases_testkit::{Gateway, NatsServer};
use serde::Serialize;
use serde_json::json;

use crate::gateway_ops;
use crate::measure::{Latency, Op, Throughput, latencies, metered, op, throughput};
use crate::{CALL_TIMEOUT, Params, procs};

const TTL: Duration = Duration::from_secs(60);

/// One setup: a nats-server and a gateway with `args`.
struct Side {
    gateway: Gateway,
    leases: LeaseClient,
    server: NatsServer,
}

impl Side {
    async fn start(args: &[&str]) -> Side {
        let server = procs::nats_server(false).await;
        let gateway = procs::gateway(&server.url, args).await;
        let nats = async_nats::connect(&server.url).await.expect("connect");
        Side {
            gateway,
            leases: LeaseClient::new(nats).with_timeout(CALL_TIMEOUT),
            server,
        }
    }

    fn processes(&self) -> [(&'static str, u32); 2] {
        [
            ("gateway", self.gateway.pid()),
            ("nats-server", self.server.pid()),
        ]
    }
}

/// One side's figures.
#[derive(Debug, Serialize)]
pub struct Figures {
    pub acquire: Latency,
    pub release: Latency,
    pub renew: Latency,
    pub owner: Latency,
    /// Acquire-and-release cycles per second (two writes each).
    pub cycles: Throughput,
    pub renews: Throughput,
    pub owner_reads: Throughput,
}

/// On over off, for each figure: latencies' p50 and throughput.
#[derive(Debug, Serialize)]
pub struct Ratios {
    pub acquire_p50: f64,
    pub release_p50: f64,
    pub renew_p50: f64,
    pub owner_p50: f64,
    pub cycles_per_second: f64,
    pub renews_per_second: f64,
    pub owner_reads_per_second: f64,
}

/// Whether the history kept up with the cycles.
#[derive(Debug, Serialize)]
pub struct KeptUp {
    /// Tenures the cycle rounds of the "on" side made.
    pub tenures_made: u64,
    /// Tenures the history recorded as ended, at the end.
    pub tenures_recorded: u64,
    /// From the end of the last cycle round until the history's consumer
    /// had nothing pending, in milliseconds.
    pub caught_up_ms: u64,
    /// How long a page of the 100 newest of those tenures took to read,
    /// in milliseconds.
    pub newest_page_ms: f64,
}

/// What the history costs.
#[derive(Debug, Serialize)]
pub struct HistoryCost {
    pub rounds: u64,
    pub on: Figures,
    pub off: Figures,
    pub on_over_off: Ratios,
    pub kept_up: KeptUp,
}

/// Measures both sides with `params`' counts, in its rounds.
pub async fn measure(params: &Params) -> HistoryCost {
    eprintln!("history cost: two single nodes, history on and off ...");
    let on = Side::start(&[]).await;
    let off = Side::start(&["--history-max-age", "0"]).await;
    let (n, rounds) = (params.sequential_ops, params.latency_rounds);
    let on_ops = gateway_ops::sequential_ops(&on.leases, n).await;
    let off_ops = gateway_ops::sequential_ops(&off.leases, n).await;
    let ops = [
        on_ops.acquire.clone(),
        off_ops.acquire.clone(),
        on_ops.release.clone(),
        off_ops.release.clone(),
        on_ops.renew.clone(),
        off_ops.renew.clone(),
        on_ops.owner.clone(),
        off_ops.owner.clone(),
    ];
    let mut figures = latencies(&ops, n, rounds).await.into_iter();
    let mut pair = || [(); 2].map(|_| figures.next().expect("a latency for every op"));
    let [acq, rel, ren, own] = [(); 4].map(|_| pair());
    drop((on_ops, off_ops));

    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let made = Arc::new(AtomicU64::new(0));
    let released_before = released(&on).await;
    let on_cycles = cycles(&on.leases, Some(made.clone()));
    let off_cycles = cycles(&off.leases, None);
    let on_renews = gateway_ops::renews(&on.leases, clients).await;
    let off_renews = gateway_ops::renews(&off.leases, clients).await;
    // The phases in the order they run each round: (side, op); the owner
    // reads read the renews' keys.
    let sides = [&on, &off];
    let phases = [
        (0, &on_cycles),
        (1, &off_cycles),
        (0, &on_renews),
        (1, &off_renews),
        (0, &gateway_ops::owner_reads(&on.leases)),
        (1, &gateway_ops::owner_reads(&off.leases)),
    ];
    let mut runs: [Vec<Throughput>; 6] = Default::default();
    for round in 0..params.throughput_rounds {
        for turn in 0..phases.len() {
            // Which side goes first alternates, so neither always runs second.
            let phase = if round % 2 == 0 { turn } else { turn ^ 1 };
            let (side, op) = phases[phase];
            let run = throughput(op.clone(), clients, secs);
            runs[phase].push(metered(&sides[side].processes(), secs, run).await);
        }
    }
    let kept_up = kept_up(&on, made.load(Ordering::Relaxed), released_before).await;
    let [
        on_cycles,
        off_cycles,
        on_renews,
        off_renews,
        on_owner,
        off_owner,
    ] = runs.map(Throughput::median);
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let on_over_off = Ratios {
        acquire_p50: ratio(acq[0].p50_us, acq[1].p50_us),
        release_p50: ratio(rel[0].p50_us, rel[1].p50_us),
        renew_p50: ratio(ren[0].p50_us, ren[1].p50_us),
        owner_p50: ratio(own[0].p50_us, own[1].p50_us),
        cycles_per_second: on_cycles.ops_per_second / off_cycles.ops_per_second,
        renews_per_second: on_renews.ops_per_second / off_renews.ops_per_second,
        owner_reads_per_second: on_owner.ops_per_second / off_owner.ops_per_second,
    };
    HistoryCost {
        rounds,
        on: Figures {
            acquire: acq[0],
            release: rel[0],
            renew: ren[0],
            owner: own[0],
            cycles: on_cycles,
            renews: on_renews,
            owner_reads: on_owner,
        },
        off: Figures {
            acquire: acq[1],
            release: rel[1],
            renew: ren[1],
            owner: own[1],
            cycles: off_cycles,
            renews: off_renews,
            owner_reads: off_owner,
        },
        on_over_off,
        kept_up,
    }
}

/// Client `c` acquires `cycle-<c>` and releases it; each cycle is one
/// tenure, counted in `made`.
fn cycles(leases: &LeaseClient, made: Option<Arc<AtomicU64>>) -> Op {
    let leases = leases.clone();
    op(move |c| {
        let (leases, made) = (leases.clone(), made.clone());
        async move {
            let key = format!("cycle-{c}");
            let grant = leases.acquire(&key, "bench", TTL).await.expect("acquire");
            assert!(grant.granted, "{key} was free");
            leases
                .release(&key, "bench", grant.lease.revision)
                .await
                .expect("release");
            if let Some(made) = made {
                made.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

/// Tenures the history of `side` recorded released so far, as its
/// gateway counts them.
async fn released(side: &Side) -> u64 {
    let metrics = reqwest::get(format!("{}/metrics", side.gateway.http_url().await))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .expect("/metrics is text");
    let series = "dagnats_tenures_ended_total{end=\"released\"} ";
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series)?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// How the history of `side` kept up with the `made` tenures it had
/// recorded `before` more of when they began.
async fn kept_up(side: &Side, made: u64, before: u64) -> KeptUp {
    let nats = side.leases.nats();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    loop {
        let info = api(nats, "CONSUMER.INFO.KV_leases.dagnats_history").await;
        let pending = info["num_pending"].as_u64().unwrap_or(u64::MAX)
            + info["num_ack_pending"].as_u64().unwrap_or(u64::MAX);
        if pending == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caught_up_ms = started.elapsed().as_millis() as u64;
    let recorded = released(side).await - before;
    // A page of the newest tenures, from a history of all the rounds'.
    let body = serde_json::to_vec(&json!({"prefix": "cycle", "limit": 100})).expect("JSON");
    let asked = Instant::now();
    let page = side
        .leases
        .request("api.leases.history", body.into())
        .await
        .expect("history");
    let newest_page_ms = asked.elapsed().as_secs_f64() * 1e3;
    let page: serde_json::Value = serde_json::from_slice(&page).expect("history JSON");
    assert_eq!(
        page["tenures"].as_array().map(Vec::len),
        Some(100),
        "a page of the newest tenures: {page}"
    );
    KeptUp {
        tenures_made: made,
        tenures_recorded: recorded,
        caught_up_ms,
        newest_page_ms,
    }
}

async fn api(nats: &async_nats::Client, op: &str) -> serde_json::Value {
    let reply = nats
        .request(format!("$JS.API.{op}"), "{}".into())
        .await
        .expect("JetStream answers");
    serde_json::from_slice(&reply.payload).expect("JetStream JSON")
}

impl HistoryCost {
    /// The figures as a markdown table.
    pub fn markdown(&self) -> String {
        let latency = |name: &str, on: &Latency, off: &Latency, ratio: f64| {
            format!(
                "| {name} p50 / p99 (µs) | {} / {} | {} / {} | {ratio:.2} |\n",
                on.p50_us, on.p99_us, off.p50_us, off.p99_us
            )
        };
        let rate = |name: &str, on: &Throughput, off: &Throughput, ratio: f64| {
            let gateway = |t: &Throughput| t.cpu_us_per_op.get("gateway").copied().unwrap_or(0.0);
            format!(
                "| {name} per second (gateway CPU µs per op) | {:.0} ({:.0}) | {:.0} ({:.0}) | {ratio:.2} |\n",
                on.ops_per_second,
                gateway(on),
                off.ops_per_second,
                gateway(off)
            )
        };
        let r = &self.on_over_off;
        let mut table = String::from(
            "| figure | history on | history off | on / off |\n| --- | --- | --- | --- |\n",
        );
        table += &latency(
            "acquire",
            &self.on.acquire,
            &self.off.acquire,
            r.acquire_p50,
        );
        table += &latency(
            "release",
            &self.on.release,
            &self.off.release,
            r.release_p50,
        );
        table += &latency("renew", &self.on.renew, &self.off.renew, r.renew_p50);
        table += &latency("owner", &self.on.owner, &self.off.owner, r.owner_p50);
        table += &rate(
            "acquire+release cycles",
            &self.on.cycles,
            &self.off.cycles,
            r.cycles_per_second,
        );
        table += &rate(
            "renews",
            &self.on.renews,
            &self.off.renews,
            r.renews_per_second,
        );
        table += &rate(
            "owner reads",
            &self.on.owner_reads,
            &self.off.owner_reads,
            r.owner_reads_per_second,
        );
        let k = &self.kept_up;
        table += &format!(
            "\nThe history recorded {} of the {} tenures the cycles made; its consumer had nothing pending {} ms after the last round; a page of the 100 newest took {:.1} ms to read.\n",
            k.tenures_recorded, k.tenures_made, k.caught_up_ms, k.newest_page_ms
        );
        table
    }
}
