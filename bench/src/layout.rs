//! One layout's figures: the same measurements, in the same order, whether
//! the servers are one nats-server, one gateway and one etcd member, or the
//! production layout of three nodes, two gateways and three etcd members.
//! Only what is started differs; [`Setup`] says what that is.

use std::time::Duration;

use dagnats_leases_client::LeaseClient;

use crate::floor::{self, FloorStream};
use crate::front;
use crate::measure::metered;
use crate::report::{Etcd, Figures, Floor, FrontFloor, Throughputs};
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

/// Measures everything, in order: the floor, sequential latency over NATS
/// and HTTP, throughput, etcd, scale, list and SSE fan-out.
pub async fn measure(setup: &Setup, params: &Params) -> Figures {
    let (nats, leases, n) = (&setup.nats, &setup.leases, params.sequential_ops);
    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    eprintln!("[{}] floor ...", setup.name);
    let echo = floor::echo_responder(nats).await;
    let floor = Floor {
        stream: setup.floor.stream.clone(),
        hop: floor::hop(nats, &echo, n).await,
        compare_and_set: floor::compare_and_set(nats, &setup.floor, n).await,
        leader_read: floor::leader_read(nats, &setup.floor, n).await,
    };
    eprintln!("[{}] gateway, sequential ...", setup.name);
    let nats_ops = gateway_ops::sequential_ops(leases, n).await;
    eprintln!("[{}] gateway over HTTP, sequential ...", setup.name);
    let http = reqwest::Client::new();
    let http_ops = http_ops::sequential_ops(&http, &setup.http_bases, n).await;
    eprintln!("[{}] concurrent ...", setup.name);
    let servers = setup.and_nodes(&setup.gateways);
    let throughput = Throughputs {
        floor_compare_and_set: metered(
            &setup.nats_servers,
            secs,
            floor::compare_and_set_throughput(nats, &setup.floor, clients, secs),
        )
        .await,
        floor_leader_read: metered(
            &setup.nats_servers,
            secs,
            floor::leader_read_throughput(nats, &setup.floor, clients, secs),
        )
        .await,
        renew: metered(
            &servers,
            secs,
            gateway_ops::renew_throughput(leases, clients, secs),
        )
        .await,
        owner: metered(
            &servers,
            secs,
            gateway_ops::owner_throughput(leases, clients, secs),
        )
        .await,
        front: front_floor(setup, clients, secs).await,
    };
    eprintln!(
        "[{}] etcd, {} member(s) ...",
        setup.name,
        setup.etcd_members.len()
    );
    let etcd = etcd(setup.etcd_members, params).await;
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

/// Writes, then checks, per second through the front floor's responders
/// (`front.rs`), with their CPU and the nodes'; `None` without responders.
async fn front_floor(setup: &Setup, clients: u64, secs: Duration) -> Option<FrontFloor> {
    if setup.fronts.is_empty() {
        return None;
    }
    eprintln!("[{}] front floor ...", setup.name);
    let processes = setup.and_nodes(&setup.fronts);
    let load = front::Load::new(&setup.nats, clients).await;
    Some(FrontFloor {
        write: metered(&processes, secs, load.writes(clients, secs)).await,
        check: metered(&processes, secs, load.checks(clients, secs)).await,
        check_by: front::check_by(setup.replicas),
    })
}

/// Starts etcd with `members`, measures the same operations on it, and
/// stops it again; `None` when etcd is not installed.
async fn etcd(members: &'static [&'static str], params: &Params) -> Option<Etcd> {
    let Some(cluster) = procs::etcd(members.len()).await else {
        eprintln!("etcd not installed (apt-get install etcd-server): skipping the comparison");
        return None;
    };
    let client = etcd_ops::connect(&cluster.urls).await;
    let procs: Vec<_> = members.iter().copied().zip(cluster.pids()).collect();
    let (n, clients, secs) = (
        params.sequential_ops,
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let acquire = etcd_ops::acquire_latency(&client, n).await;
    let renew = etcd_ops::renew_latency(&client, n).await;
    let get = etcd_ops::get_latency(&client, n).await;
    let keep_alive = metered(
        &procs,
        secs,
        etcd_ops::renew_throughput(&client, clients, secs),
    )
    .await;
    let get_throughput = metered(
        &procs,
        secs,
        etcd_ops::get_throughput(&client, clients, secs),
    )
    .await;
    let compare_and_set = metered(
        &procs,
        secs,
        etcd_ops::compare_and_set_throughput(&client, clients, secs),
    )
    .await;
    let range = etcd_ops::range_read(&client, params.sse_leases, params.list_calls).await;
    Some(Etcd {
        members: members.len(),
        acquire,
        renew,
        get,
        keep_alive,
        compare_and_set,
        get_throughput,
        range,
    })
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
