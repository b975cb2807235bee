//! `probe policy`: what a loaded policy costs a call. Beside each other on
//! one machine, each on a nats-server of its own with the accounts of
//! docs/operations.md ("Tenants in their own accounts"), a gateway without
//! a policy and one with the doc's policy, and optionally an earlier build
//! without one (`--baseline`); the load is alice's, in tenant account
//! `TEAM_A`, so every request crosses the service import and carries the
//! server's `Nats-Request-Info` on all of them alike. The two hot calls,
//! renew and owner, are measured one call after another (latency) and
//! from concurrent clients (throughput), in interleaved rounds, the
//! throughput rounds each in another order, so a drift of the machine
//! falls on every gateway alike.

use std::path::PathBuf;
use std::time::Duration;

use dagnats_leases_client::LeaseClient;
use dagnats_leases_testkit::gateway::Program;
use dagnats_leases_testkit::{Gateway, NatsServer, accounts};
use serde::Serialize;

use crate::gateway_ops::{owner_of, owner_reads_under, renewing, renews_under};
use crate::measure::{Latency, Op, Throughput, latencies, metered, throughput};
use crate::{CALL_TIMEOUT, Params};

/// The keys of the load: the doc's policy lets team A hold them.
const KEYS: &str = "team-a-bench-";

/// One gateway measured, on a server of its own. Dropped in this order:
/// the gateway stops before its server.
struct Side {
    name: &'static str,
    gateway: Gateway,
    _server: NatsServer,
    /// Renews of one key, and owner reads of it, one after another.
    sequential: [Op; 2],
    /// Renews by concurrent holders, a key each, and owner reads of those
    /// keys by as many readers.
    concurrent: [Op; 2],
    /// The throughput rounds of each of `concurrent`.
    rounds: [Vec<Throughput>; 2],
}

impl Side {
    /// `program` on a server with the doc's accounts, with `env`, and its
    /// load ready.
    async fn start(
        name: &'static str,
        program: &Program,
        env: &[(&str, &str)],
        clients: u64,
    ) -> Side {
        let server = accounts::server().await;
        let [(user_var, user), (password_var, password)] = accounts::gateway_env();
        let mut all = vec![(user_var, user.as_str()), (password_var, password.as_str())];
        all.extend_from_slice(env);
        let gateway = Gateway::spawn_program(program, &server.url, &[], &all);
        gateway.wait_ready(Duration::from_secs(30)).await;
        let alice = accounts::connect(&server.url, "alice").await;
        let leases = LeaseClient::new(alice).with_timeout(CALL_TIMEOUT);
        let one = format!("{KEYS}renew");
        Side {
            name,
            sequential: [renewing(&leases, &one).await, owner_of(&leases, &one)],
            concurrent: [
                renews_under(&leases, KEYS, clients).await,
                owner_reads_under(&leases, KEYS),
            ],
            gateway,
            _server: server,
            rounds: Default::default(),
        }
    }
}

/// One gateway's figures.
#[derive(Serialize)]
struct Figures {
    name: &'static str,
    renew: Latency,
    renew_throughput: Throughput,
    owner: Latency,
    owner_throughput: Throughput,
}

/// What the probe found: each gateway's figures, and the policy's over
/// the gateway without one.
#[derive(Serialize)]
pub struct Found {
    rounds: u64,
    /// Sequential calls of each operation per round.
    calls_per_round: u64,
    gateways: Vec<Figures>,
    /// With a policy over without: renew and owner p50, and calls per
    /// second.
    policy_over_open: Ratios,
    /// This build without a policy over the earlier build, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    open_over_baseline: Option<Ratios>,
}

#[derive(Serialize)]
struct Ratios {
    renew_p50: f64,
    renews_per_second: f64,
    owner_p50: f64,
    owner_reads_per_second: f64,
}

fn ratios(a: &Figures, b: &Figures) -> Ratios {
    let p50 = |a: &Latency, b: &Latency| a.p50_us as f64 / b.p50_us as f64;
    let rate = |a: &Throughput, b: &Throughput| a.ops_per_second / b.ops_per_second;
    Ratios {
        renew_p50: p50(&a.renew, &b.renew),
        renews_per_second: rate(&a.renew_throughput, &b.renew_throughput),
        owner_p50: p50(&a.owner, &b.owner),
        owner_reads_per_second: rate(&a.owner_throughput, &b.owner_throughput),
    }
}

/// The probe: `rounds` rounds over every gateway.
pub async fn run(gateway: &Program, baseline: Option<PathBuf>, params: &Params) -> Found {
    let policy_file = tempfile::NamedTempFile::new().expect("a temp file");
    std::fs::write(policy_file.path(), accounts::example("policy.toml")).expect("the policy");
    let policy = policy_file.path().display().to_string();
    let clients = params.concurrent_clients;
    let mut sides = vec![
        Side::start("without a policy", gateway, &[], clients).await,
        Side::start(
            "with the doc's policy",
            gateway,
            &[("DAGNATS_POLICY", &policy)],
            clients,
        )
        .await,
    ];
    if let Some(path) = baseline {
        let earlier = Program {
            path,
            args: vec!["serve".into()],
        };
        sides.push(Side::start("earlier build, without a policy", &earlier, &[], clients).await);
    }
    let (n, rounds) = (params.sequential_ops, params.throughput_rounds.max(2));
    let secs = Duration::from_secs(params.throughput_seconds);
    let sequential: Vec<Op> = sides.iter().flat_map(|s| s.sequential.clone()).collect();
    let mut latency = latencies(&sequential, n, rounds).await.into_iter();
    for round in 0..rounds {
        let count = sides.len();
        for turn in 0..count {
            let side = &mut sides[(turn + round as usize) % count];
            let processes = [(side.name, side.gateway.pid())];
            for (op, runs) in side.concurrent.iter().zip(&mut side.rounds) {
                let rate = throughput(op.clone(), clients, secs);
                runs.push(metered(&processes, secs, rate).await);
            }
        }
    }
    let gateways: Vec<Figures> = sides
        .into_iter()
        .map(|side| {
            let [renew, owner] = [(); 2].map(|_| latency.next().expect("a latency per op"));
            let [renew_throughput, owner_throughput] = side.rounds.map(Throughput::median);
            Figures {
                name: side.name,
                renew,
                renew_throughput,
                owner,
                owner_throughput,
            }
        })
        .collect();
    Found {
        rounds,
        calls_per_round: n / rounds,
        policy_over_open: ratios(&gateways[1], &gateways[0]),
        open_over_baseline: gateways.get(2).map(|earlier| ratios(&gateways[0], earlier)),
        gateways,
    }
}
