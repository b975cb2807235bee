//! `probe`: one phase alone, on servers of its own, run after run. A figure
//! that moves from run to run takes several runs to judge, and a whole
//! benchmark run is too long to repeat for each change.

use std::future::Future;
use std::time::Duration;

use dagnats_leases_client::LeaseClient;
use dagnats_leases_testkit::{Gateway, NatsServer};

use crate::floor::{self, FloorStream};
use crate::front::FrontsOn;
use crate::measure::{self, metered, throughput};
use crate::procs::{self, Proc};
use crate::{CALL_TIMEOUT, Params, Phase, front, gateway_ops, scale};

/// The servers a probe runs on: the production layout or the single node.
pub trait Probed {
    /// The load generator's connection.
    fn nats(&self) -> &async_nats::Client;
    /// The bucket's replicas, and the floor streams'.
    fn replicas(&self) -> usize;
    /// Each gateway's HTTP base URL.
    fn http_bases(&self) -> impl Future<Output = Vec<String>>;
    /// Each gateway's name and process id.
    fn gateways(&self) -> Vec<(&'static str, u32)>;
    /// Starts the front floor's responders (`front.rs`), one in each
    /// gateway's place, on the node named `on` (or any node): the
    /// processes (killed when dropped), and each one's name and process id.
    fn start_fronts(&self, on: Option<&str>) -> (Vec<Proc>, Vec<(&'static str, u32)>);
    /// Each nats-server node's name and process id.
    fn nodes(&self) -> Vec<(&'static str, u32)>;
    /// Messages and bytes in and out of every node so far, summed, where
    /// the nodes report them.
    fn traffic(&self) -> Option<[u64; 2]>;
}

/// One nats-server with its default (lazy) fsync and one gateway, as the
/// single-node layout runs them. Dropped in this order: the gateway stops
/// before the node it uses.
pub struct SingleServers {
    gateway: Gateway,
    nats: async_nats::Client,
    server: NatsServer,
}

impl SingleServers {
    pub async fn start() -> Self {
        let server = procs::nats_server(false).await;
        let gateway = procs::gateway(&server.url, &[]).await;
        let nats = async_nats::connect(&server.url).await.expect("connect");
        SingleServers {
            gateway,
            nats,
            server,
        }
    }
}

impl Probed for SingleServers {
    fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    fn replicas(&self) -> usize {
        1
    }

    async fn http_bases(&self) -> Vec<String> {
        vec![self.gateway.http_url().await]
    }

    fn gateways(&self) -> Vec<(&'static str, u32)> {
        vec![("gateway", self.gateway.pid())]
    }

    /// One node: every placement is the same.
    fn start_fronts(&self, _on: Option<&str>) -> (Vec<Proc>, Vec<(&'static str, u32)>) {
        let fronts = front::responders(&self.server.url, 1, 1);
        let named = vec![("front", fronts[0].child.id())];
        (fronts, named)
    }

    fn nodes(&self) -> Vec<(&'static str, u32)> {
        vec![("nats-server", self.server.pid())]
    }

    /// Not measured: the single node runs without its monitoring port.
    fn traffic(&self) -> Option<[u64; 2]> {
        None
    }
}

/// A probe's throughput with the servers' traffic per operation.
#[derive(serde::Serialize)]
struct Counted {
    #[serde(flatten)]
    throughput: measure::Throughput,
    #[serde(skip_serializing_if = "Option::is_none")]
    nats_messages_per_op: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nats_bytes_per_op: Option<f64>,
}

/// [`metered`], and the messages and bytes the nodes handled per operation
/// meanwhile: what each operation costs the servers in traffic.
async fn counted(
    servers: &impl Probed,
    processes: &[(&'static str, u32)],
    duration: Duration,
    run: impl Future<Output = f64>,
) -> Counted {
    let before = servers.traffic();
    let throughput = metered(processes, duration, run).await;
    let after = servers.traffic();
    let ops = (throughput.ops_per_second * duration.as_secs_f64()).max(1.0);
    let per_op = |i: usize| Some(after?[i].saturating_sub(before?[i]) as f64 / ops);
    Counted {
        throughput,
        nats_messages_per_op: per_op(0),
        nats_bytes_per_op: per_op(1),
    }
}

/// What one run of `phase` on `servers` measured, as JSON.
pub async fn probe(
    servers: &impl Probed,
    phase: Phase,
    (holders, fronts_on): (u64, FrontsOn),
    params: &Params,
) -> String {
    let nats = servers.nats();
    let leases = LeaseClient::new(nats.clone()).with_timeout(CALL_TIMEOUT);
    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let gateways = servers.gateways();
    let pids: Vec<u32> = gateways.iter().map(|(_, pid)| *pid).collect();
    let processes: Vec<_> = gateways.into_iter().chain(servers.nodes()).collect();
    let json = match phase {
        Phase::Sequential => serde_json::to_string(
            &gateway_ops::sequential_latencies(
                &leases,
                params.sequential_ops,
                params.latency_rounds,
            )
            .await,
        ),
        Phase::Renew => serde_json::to_string(
            &counted(
                servers,
                &processes,
                secs,
                throughput(gateway_ops::renews(&leases, clients).await, clients, secs),
            )
            .await,
        ),
        Phase::Owner => {
            // Held, as in the full run (its renew phase holds them), so
            // each gateway knows them from its own write or event.
            let held = Duration::from_secs(60);
            gateway_ops::hold_many(&leases, gateway_ops::THROUGHPUT_KEYS, clients, held).await;
            serde_json::to_string(
                &counted(
                    servers,
                    &processes,
                    secs,
                    throughput(gateway_ops::owner_reads(&leases), clients, secs),
                )
                .await,
            )
        }
        Phase::Floor => {
            let floor = FloorStream::create(nats, servers.replicas()).await;
            serde_json::to_string(
                &counted(
                    servers,
                    &servers.nodes(),
                    secs,
                    throughput(
                        floor::compare_and_sets(nats, &floor, clients).await,
                        clients,
                        secs,
                    ),
                )
                .await,
            )
        }
        Phase::Front => {
            let floor = FloorStream::create(nats, servers.replicas()).await;
            let node = fronts_on.node(nats, &floor).await;
            let (_fronts, mut processes) = servers.start_fronts(node.as_deref());
            processes.extend(servers.nodes());
            let load = front::Load::new(nats, clients).await;
            let write = throughput(load.writes(), clients, secs);
            let write = counted(servers, &processes, secs, write).await;
            let check = throughput(load.checks(), clients, secs);
            let check = counted(servers, &processes, secs, check).await;
            serde_json::to_string(&serde_json::json!({
                "write": write,
                "check": check,
                "fronts_on": { "placement": fronts_on, "node": node },
            }))
        }
        Phase::Scale => {
            let lists = scale::Lists {
                http: reqwest::Client::new(),
                bases: servers.http_bases().await,
                calls: params.list_calls,
                at_once: params.lists_at_once,
            };
            let nodes: Vec<u32> = servers.nodes().iter().map(|(_, pid)| *pid).collect();
            let ttl = Duration::from_millis(params.scale_ttl_ms);
            let run_for = Duration::from_secs(params.scale_seconds);
            serde_json::to_string(
                &scale::run(&leases, (&pids, &nodes), holders, (ttl, run_for), lists).await,
            )
        }
    };
    json.expect("JSON")
}
