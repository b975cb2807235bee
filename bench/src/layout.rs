//! One layout's figures: the same measurements, in the same order, whether
//! the servers are one nats-server, one gateway and one etcd member, or the
//! production layout of three nodes, two gateways and three etcd members.
//! Only what is started differs; [`Setup`] says what that is.

use std::time::Duration;

use dagnats_leases_client::LeaseClient;

use crate::floor::{self, FloorStream};
use crate::front;
use crate::gateway_ops::Sequential;
use crate::measure::{Latency, Op, Throughput, latencies, metered, throughput};
use crate::report::{Etcd, Figures, FrontFloor, Throughputs};
use crate::{Params, etcd_ops, gateway_ops, http_ops, procs, scale};

/// The servers of one layout, running, and how to reach them.
pub struct Setup {
    /// What the progress lines call it.
    pub name: &'static str,
    /// Said in the tables and the JSON.
    pub layout: String,
    pub nats: async_nats::Client,
    pub leases: LeaseClient,
    /// Every gateway's HTTP base URL; HTTP calls alternate between them.
    pub http_bases: Vec<String>,
    /// Each gateway's name and process id.
    pub gateways: Vec<(&'static str, u32)>,
    /// The front floor's responders (`front.rs`), running, by name and
    /// process id; none where the layout does not measure it.
    pub fronts: Vec<(&'static str, u32)>,
    /// Each nats-server's name and process id.
    pub nats_servers: Vec<(&'static str, u32)>,
    /// The bucket's replicas, and so the front floor stream's.
    pub replicas: usize,
    /// Where the raw floor writes and reads.
    pub floor: FloorStream,
    /// The names of the etcd members to start, one per member, for the
    /// comparison; they run only while etcd is measured.
    pub etcd_members: &'static [&'static str],
}

impl Setup {
    /// `processes`, then the nats-servers: what a phase's CPU is charged to.
    fn and_nodes(&self, processes: &[(&'static str, u32)]) -> Vec<(&'static str, u32)> {
        processes
            .iter()
            .chain(&self.nats_servers)
            .copied()
            .collect()
    }
}

/// The prefix of the keys held while listing and fanning out.
const HELD_PREFIX: &str = "held-";

/// Measures everything, in order: sequential latency (the floor's, over
/// NATS and HTTP, etcd's, in rounds), throughput (every system's, in
/// rounds), etcd's range read, scale, list and SSE fan-out.
pub async fn measure(setup: &Setup, params: &Params) -> Figures {
    let (nats, leases, n) = (&setup.nats, &setup.leases, params.sequential_ops);
    let echo = floor::echo_responder(nats).await;
    let floor_ops = floor::sequential_ops(nats, &echo, &setup.floor).await;
    let nats_ops = gateway_ops::sequential_ops(leases, n).await;
    let http = reqwest::Client::new();
    let http_ops = http_ops::sequential_ops(&http, &setup.http_bases, n).await;
    let etcd = EtcdRun::start(setup).await;
    let mut ops: Vec<Op> = floor_ops.into_iter().collect();
    ops.extend(nats_ops.ops());
    ops.extend(http_ops.ops());
    if let Some(etcd) = &etcd {
        ops.extend(etcd.sequential.clone());
    }
    eprintln!(
        "[{}] sequential: floor, gateway over NATS and HTTP{}, {} round(s) ...",
        setup.name,
        if etcd.is_some() { ", etcd" } else { "" },
        params.latency_rounds
    );
    let mut figures = latencies(&ops, n, params.latency_rounds).await.into_iter();
    let mut next = || figures.next().expect("a latency for every op");
    let floor = floor::from_latencies(&setup.floor, &mut next);
    let nats_ops = Sequential::latencies(&mut next);
    let http_ops = Sequential::latencies(&mut next);
    let etcd_latencies = etcd.as_ref().map(|_| EtcdLatencies {
        acquire: next(),
        renew: next(),
        get: next(),
    });
    let servers = setup.and_nodes(&setup.gateways);
    let (throughput, etcd_throughput) = throughputs(setup, params, etcd.as_ref()).await;
    let etcd = match (etcd, etcd_latencies, etcd_throughput) {
        (Some(run), Some(latencies), Some(throughput)) => {
            Some(run.finish(latencies, throughput, params).await)
        }
        _ => None,
    };
    let mut processes: Vec<&'static str> = setup
        .gateways
        .iter()
        .chain(&setup.fronts)
        .chain(&setup.nats_servers)
        .map(|(name, _)| *name)
        .collect();
    if etcd.is_some() {
        processes.extend(setup.etcd_members);
    }

    let gateway_pids: Vec<u32> = setup.gateways.iter().map(|(_, pid)| *pid).collect();
    let server_pids: Vec<u32> = setup.nats_servers.iter().map(|(_, pid)| *pid).collect();
    let before_scale = bucket_messages(nats).await;
    let mut scales = Vec::new();
    for holders in &params.scale_holders {
        eprintln!("[{}] scale, {holders} holders ...", setup.name);
        let ttl = Duration::from_millis(params.scale_ttl_ms);
        let run_for = Duration::from_secs(params.scale_seconds);
        let lists = scale::Lists {
            http: http.clone(),
            bases: setup.http_bases.clone(),
            calls: params.list_calls,
            at_once: params.lists_at_once,
        };
        let pids = (&gateway_pids[..], &server_pids[..]);
        scales.push(scale::run(leases, pids, *holders, (ttl, run_for), lists).await);
    }

    // The scale phase's leases expire in seconds and leave markers for a
    // few more; a list measured among them would read twice the keys it
    // reports, while the server writes their markers.
    eprintln!(
        "[{}] waiting for the scale leases to expire ...",
        setup.name
    );
    wait_for_bucket(nats, before_scale).await;
    eprintln!(
        "[{}] list and SSE fan-out, {} clients, {} leases held ...",
        setup.name, params.sse_clients, params.sse_leases
    );
    gateway_ops::hold_many(
        leases,
        HELD_PREFIX,
        params.sse_leases,
        Duration::from_secs(60),
    )
    .await;
    let list = http_ops::list(
        &http,
        (&setup.http_bases, &servers),
        HELD_PREFIX,
        params.sse_leases,
        params.list_calls,
    )
    .await;
    let fan_out = http_ops::fan_out(
        &http,
        &setup.http_bases,
        &gateway_pids,
        params.sse_clients,
        params.sse_changes,
    )
    .await;
    Figures {
        layout: setup.layout.clone(),
        processes,
        floor,
        nats: nats_ops,
        http: http_ops,
        throughput,
        etcd,
        scale: scales,
        list,
        fan_out,
    }
}

/// A throughput phase: its operation, and the processes its CPU time is
/// charged to.
struct Phase {
    op: Op,
    processes: Vec<(&'static str, u32)>,
}

/// Every throughput figure of the layout, its own, its floors' and etcd's
/// (keep-alive, get and compare-and-set, when etcd runs), each set up once
/// and then measured in [`in_rounds`].
async fn throughputs(
    setup: &Setup,
    params: &Params,
    etcd: Option<&EtcdRun>,
) -> (Throughputs, Option<EtcdThroughputs>) {
    let (nats, leases, clients) = (&setup.nats, &setup.leases, params.concurrent_clients);
    let nodes = || setup.nats_servers.clone();
    let gateways = setup.and_nodes(&setup.gateways);
    let fronts = setup.and_nodes(&setup.fronts);
    let phase = |op, processes| Phase { op, processes };
    let mut phases = vec![
        phase(
            floor::compare_and_sets(nats, &setup.floor, clients).await,
            nodes(),
        ),
        phase(floor::leader_reads(nats, &setup.floor), nodes()),
        phase(gateway_ops::renews(leases, clients).await, gateways.clone()),
        phase(gateway_ops::owner_reads(leases), gateways),
    ];
    if !setup.fronts.is_empty() {
        let load = front::Load::new(nats, clients).await;
        phases.push(phase(load.writes(), fronts.clone()));
        phases.push(phase(load.checks(), fronts));
    }
    if let Some(etcd) = etcd {
        let members = etcd.members.clone();
        phases.push(phase(
            etcd_ops::keep_alives(&etcd.client, clients).await,
            members.clone(),
        ));
        phases.push(phase(etcd_ops::gets(&etcd.client), members.clone()));
        phases.push(phase(
            etcd_ops::compare_and_sets(&etcd.client, clients).await,
            members,
        ));
    }
    // A round comes back to each phase's keys one round after it last
    // wrote them: they must still be held (the gateway's, the floor's and
    // the front floor's are written with a 60 s TTL).
    let round = Duration::from_secs(params.throughput_seconds) * phases.len() as u32;
    assert!(
        round < Duration::from_secs(60),
        "a round of {round:?} outlives the throughput keys' TTL"
    );
    eprintln!(
        "[{}] concurrent, {} phases in {} round(s) ...",
        setup.name,
        phases.len(),
        params.throughput_rounds
    );
    let mut figures = in_rounds(&phases, params).await.into_iter();
    let mut next = || figures.next().expect("a figure for every phase");
    let throughput = Throughputs {
        floor_compare_and_set: next(),
        floor_leader_read: next(),
        renew: next(),
        owner: next(),
        front: (!setup.fronts.is_empty()).then(|| FrontFloor {
            write: next(),
            check: next(),
            check_by: front::check_by(setup.replicas),
        }),
    };
    let etcd = etcd.map(|_| EtcdThroughputs {
        keep_alive: next(),
        get: next(),
        compare_and_set: next(),
    });
    (throughput, etcd)
}

/// Runs every phase once a round, in the same order, `throughput_rounds`
/// times: the machine drifts over minutes, and a drift during the run then
/// falls on every system alike instead of on whichever phase ran in the
/// slow stretch. Each phase's figure is its median round.
async fn in_rounds(phases: &[Phase], params: &Params) -> Vec<Throughput> {
    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let mut runs: Vec<Vec<Throughput>> = phases.iter().map(|_| Vec::new()).collect();
    for _ in 0..params.throughput_rounds {
        for (phase, runs) in phases.iter().zip(&mut runs) {
            let run = throughput(phase.op.clone(), clients, secs);
            runs.push(metered(&phase.processes, secs, run).await);
        }
    }
    runs.into_iter().map(Throughput::median).collect()
}

/// etcd's throughput figures, measured in the rounds beside the layout's.
struct EtcdThroughputs {
    keep_alive: Throughput,
    get: Throughput,
    compare_and_set: Throughput,
}

/// etcd's sequential latencies, measured in the rounds beside the layout's.
struct EtcdLatencies {
    acquire: Latency,
    renew: Latency,
    get: Latency,
}

/// etcd, running for the comparison while the rounds run.
struct EtcdRun {
    cluster: procs::Etcd,
    client: etcd_client::Client,
    /// Each member's name and process id.
    members: Vec<(&'static str, u32)>,
    /// Acquire, renew and get, one call after another, in the order
    /// [`EtcdLatencies`] takes their figures.
    sequential: [Op; 3],
}

impl EtcdRun {
    /// Starts etcd with the layout's members and sets up its sequential
    /// calls; `None` when etcd is not installed.
    async fn start(setup: &Setup) -> Option<EtcdRun> {
        let members = setup.etcd_members;
        let Some(cluster) = procs::etcd(members.len()).await else {
            eprintln!("etcd not installed (apt-get install etcd-server): skipping the comparison");
            return None;
        };
        eprintln!("[{}] etcd, {} member(s) ...", setup.name, members.len());
        let client = etcd_ops::connect(&cluster.urls).await;
        Some(EtcdRun {
            members: members.iter().copied().zip(cluster.pids()).collect(),
            sequential: [
                etcd_ops::acquire_calls(&client),
                etcd_ops::renew_calls(&client).await,
                etcd_ops::get_calls(&client),
            ],
            cluster,
            client,
        })
    }

    /// Measures the range read, stops etcd, and returns every figure.
    async fn finish(
        self,
        latencies: EtcdLatencies,
        throughputs: EtcdThroughputs,
        params: &Params,
    ) -> Etcd {
        let range = etcd_ops::range_read(&self.client, params.sse_leases, params.list_calls).await;
        drop(self.cluster);
        Etcd {
            members: self.members.len(),
            acquire: latencies.acquire,
            renew: latencies.renew,
            get: latencies.get,
            keep_alive: throughputs.keep_alive,
            compare_and_set: throughputs.compare_and_set,
            get_throughput: throughputs.get,
            range,
        }
    }
}

/// How many messages the bucket's stream holds now.
async fn bucket_messages(nats: &async_nats::Client) -> u64 {
    let info = dagnats_leases_testkit::nats::stream_info(nats).await;
    info["state"]["messages"].as_u64().unwrap_or_default()
}

/// Waits until the bucket is back to about `messages` (each marker gone),
/// for at most a minute.
async fn wait_for_bucket(nats: &async_nats::Client, messages: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while bucket_messages(nats).await > messages + 100 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
