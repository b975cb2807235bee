//! `probe policy`: what a loaded policy costs a call. Beside each other on
//! one machine, each on a nats-server of its own with the accounts of
//! docs/operations.md ("Tenants in their own accounts"), a gateway without
//! a policy and one with the doc's policy, and optionally an earlier build
//! without one (`--baseline`); the load is alice's, in tenant account
//! `TEAM_A`, so every request crosses the service import and carries the
//! server's `Nats-Request-Info` on all of them alike. Renew latency (one
//! call after another) and renew throughput (concurrent holders) are
//! measured in interleaved rounds, each round in another order, so a
//! drift of the machine falls on every gateway alike.

use std::path::PathBuf;
use std::time::Duration;

use dagnats_leases_client::LeaseClient;
use dagnats_leases_testkit::gateway::Program;
use dagnats_leases_testkit::{Gateway, NatsServer, accounts};
use serde::Serialize;

use crate::gateway_ops::{renewing, renews_under};
use crate::measure::{Latency, Op, Recorder, Throughput, metered, throughput};
use crate::{CALL_TIMEOUT, Params};

/// The keys of the load: the doc's policy lets team A hold them.
const KEYS: &str = "team-a-bench-";

/// One gateway measured, on a server of its own. Dropped in this order:
/// the gateway stops before its server.
struct Side {
    name: &'static str,
    gateway: Gateway,
    _server: NatsServer,
    /// Renews of one key, one after another.
    renew: Op,
    /// Renews by concurrent holders, a key each.
    renews: Op,
    latency: Recorder,
    rounds: Vec<Throughput>,
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
        Side {
            name,
            renew: renewing(&leases, &format!("{KEYS}renew")).await,
            renews: renews_under(&leases, KEYS, clients).await,
            gateway,
            _server: server,
            latency: Recorder::default(),
            rounds: Vec::new(),
        }
    }
}

/// One gateway's figures.
#[derive(Serialize)]
struct Figures {
    name: &'static str,
    renew: Latency,
    renew_throughput: Throughput,
}

/// What the probe found: each gateway's figures, and the policy's over
/// the gateway without one.
#[derive(Serialize)]
pub struct Found {
    rounds: u64,
    renews_per_round: u64,
    gateways: Vec<Figures>,
    /// With a policy over without: renew p50, and renews per second.
    policy_over_open: Ratios,
    /// This build without a policy over the earlier build, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    open_over_baseline: Option<Ratios>,
}

#[derive(Serialize)]
struct Ratios {
    renew_p50: f64,
    renews_per_second: f64,
}

fn ratios(a: &Figures, b: &Figures) -> Ratios {
    Ratios {
        renew_p50: a.renew.p50_us as f64 / b.renew.p50_us as f64,
        renews_per_second: a.renew_throughput.ops_per_second / b.renew_throughput.ops_per_second,
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
    for side in &sides {
        for i in 0..n / 10 {
            (side.renew)(i).await;
        }
    }
    for round in 0..rounds {
        let count = sides.len();
        for turn in 0..count {
            let side = &mut sides[(turn + round as usize) % count];
            for i in 0..n / rounds {
                let started = std::time::Instant::now();
                (side.renew)(i).await;
                side.latency.record(started.elapsed());
            }
            let processes = [(side.name, side.gateway.pid())];
            let rate = throughput(side.renews.clone(), clients, secs);
            side.rounds.push(metered(&processes, secs, rate).await);
        }
    }
    let gateways: Vec<Figures> = sides
        .into_iter()
        .map(|side| Figures {
            name: side.name,
            renew: side.latency.latency(),
            renew_throughput: Throughput::median(side.rounds),
        })
        .collect();
    Found {
        rounds,
        renews_per_round: n / rounds,
        policy_over_open: ratios(&gateways[1], &gateways[0]),
        open_over_baseline: gateways.get(2).map(|earlier| ratios(&gateways[0], earlier)),
        gateways,
    }
}
