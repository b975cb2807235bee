//! `dagnats-leases-bench`: latency, throughput and scale of the lease
//! gateway beside the floor NATS sets and beside etcd, in one run, against
//! servers it starts itself on loopback: first the production layout (three
//! nats-server nodes fsyncing every write, the bucket at 3 replicas, two
//! gateways, a three-member etcd), then a single node.
//!
//! ```sh
//! cargo run --release -p dagnats-leases-bench                         # both layouts
//! cargo run --release -p dagnats-leases-bench -- --layout production  # one of them
//! cargo run -p dagnats-leases-bench -- --smoke                        # seconds; what CI runs
//! cargo run --release -p dagnats-leases-bench -- policy --runs 3      # what a policy costs
//! ```
//!
//! It prints markdown tables and writes the figures as JSON (`--out`).

mod etcd_ops;
mod floor;
mod front;
mod gateway_ops;
mod history_cost;
mod http_ops;
mod layout;
mod measure;
mod pinned;
mod policy;
mod probe;
mod procs;
mod report;
mod scale;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use dagnats_leases_client::LeaseClient;
use dagnats_leases_testkit::{Cluster, Gateway};
use floor::FloorStream;
use layout::Setup;
use measure::{metered, throughput};
use probe::{Probed, SingleServers, probe};
use report::{Durable, Figures, SingleNode};

/// The gateway this benchmark measures runs in this binary (`gateway`
/// mode), so it takes the allocator `dagnats-leases` ships with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Benchmark of dagnats-leases.
#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    /// A run of seconds with tiny counts, to prove the benchmark still works.
    #[arg(long)]
    smoke: bool,
    /// Which servers to measure: the production layout, a single node, or
    /// both in one run (production first).
    #[arg(long, value_enum, default_value_t = Layout::Both)]
    layout: Layout,
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "target/bench/leases.json")]
    out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Layout {
    /// 3 nats-server nodes with `sync_interval: always`, the bucket at R3,
    /// 2 gateways, a 3-member etcd, the floor on an R3 stream.
    Production,
    /// 1 nats-server with its default fsync, 1 gateway, 1 etcd member, the
    /// floor on the bucket's stream; and the gateway on 1 fsyncing node.
    Single,
    /// Production, then single.
    Both,
}

#[derive(Subcommand)]
enum Mode {
    /// (internal) Run the gateway in this process, so its CPU and memory
    /// can be measured apart from the load generator.
    #[command(hide = true)]
    Gateway(Box<dagnats_leases::Config>),
    /// (internal) Answer every request on the floor's echo subject, as a
    /// process of its own that can be pinned beside the servers.
    #[command(hide = true)]
    Echo { url: String },
    /// (internal) Answer the front floor's calls (`front.rs`), as a process
    /// of its own in a gateway's place, writing to the floor's own stream
    /// at `replicas`.
    #[command(hide = true)]
    Front {
        urls: String,
        #[arg(long)]
        replicas: usize,
    },
    /// One phase of the production layout (or of the single node) alone,
    /// run after run, each on servers of its own: a figure that moves from
    /// run to run takes several to judge. One JSON line per run.
    Probe {
        #[arg(value_enum)]
        phase: Phase,
        /// How many runs.
        #[arg(long, default_value_t = 3)]
        runs: u64,
        /// Holders of the scale phase, each renewing its lease at ttl/3.
        #[arg(long, default_value_t = 10_000)]
        holders: u64,
        /// Times every holder's lease is listed during the scale phase
        /// (once a TTL from half a TTL in); 0 shows what the lists cost
        /// the renewals.
        #[arg(long, default_value_t = 5)]
        lists: u64,
        /// Lists sent together each of those times, on the gateways in
        /// turn (as that many dashboards opening at once).
        #[arg(long, default_value_t = 1)]
        lists_at_once: u64,
        /// The single-node layout instead: one nats-server with its
        /// default fsync, one gateway, the floors on one replica.
        #[arg(long)]
        single_node: bool,
        /// Where the front floor's responders connect (`front` only).
        #[arg(long, value_enum, default_value_t = front::FrontsOn::Any)]
        fronts_on: front::FrontsOn,
    },
    /// What the tenure history costs: acquire, release, renew and owner,
    /// latency and throughput, with the history on and off side by side on two
    /// single nodes, in interleaved rounds; the figures as a table, and as
    /// JSON beside `--out` (`history.json`).
    History,
    /// What a loaded policy costs a call: renew and owner latency and
    /// throughput of a gateway with the policy of docs/operations.md and one without,
    /// single node, through a tenant account, in interleaved rounds
    /// (`policy.rs`). One JSON line per run.
    Policy {
        /// How many runs.
        #[arg(long, default_value_t = 1)]
        runs: u64,
        /// An earlier `dagnats-leases` binary, measured without a policy
        /// beside this build.
        #[arg(long)]
        baseline: Option<PathBuf>,
    },
}

/// What `probe` measures.
#[derive(Clone, Copy, ValueEnum)]
pub enum Phase {
    /// Latency of each operation over NATS, one call after another.
    Sequential,
    /// Renews per second with 64 concurrent clients, and CPU per renew.
    Renew,
    /// Owner reads per second with 64 concurrent clients, and CPU per read.
    Owner,
    /// The floor under renew: raw compare-and-set publishes per second on
    /// an R3 stream with the bucket's settings, 64 concurrent clients, and
    /// the nodes' CPU per publish.
    Floor,
    /// Many holders at a 3 s TTL, renewing at ttl/3.
    Scale,
    /// The floor under renew and owner: two responders in the gateways'
    /// place, one publish per call (`front.rs`), writes then checks per
    /// second with 64 concurrent clients.
    Front,
}

/// The fixed parameters of a run, printed with the results.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Params {
    pub sequential_ops: u64,
    /// Rounds the sequential calls run in (every system's operations in
    /// turn each round), each operation's samples pooled.
    pub latency_rounds: u64,
    pub concurrent_clients: u64,
    pub throughput_seconds: u64,
    /// Rounds of the throughput phases (every system's, one after another),
    /// each phase's figure its median round.
    pub throughput_rounds: u64,
    pub scale_holders: Vec<u64>,
    pub scale_ttl_ms: u64,
    pub scale_seconds: u64,
    pub sse_clients: u64,
    pub sse_changes: u64,
    /// Leases held (TTL 60 s) while they are listed and the SSE fan-out
    /// is measured; etcd's range read gets as many keys.
    pub sse_leases: u64,
    /// Calls of list (and of etcd's range get), each timed; the scale
    /// phase's lists, sent `lists_at_once` together each time.
    pub list_calls: u64,
    pub lists_at_once: u64,
}

impl Params {
    fn new(smoke: bool) -> Params {
        if smoke {
            Params {
                sequential_ops: 50,
                latency_rounds: 1,
                concurrent_clients: 4,
                throughput_seconds: 1,
                throughput_rounds: 1,
                scale_holders: vec![50],
                scale_ttl_ms: 3_000,
                scale_seconds: 3,
                sse_clients: 10,
                sse_changes: 10,
                sse_leases: 100,
                list_calls: 2,
                lists_at_once: 1,
            }
        } else {
            Params {
                sequential_ops: 2_000,
                latency_rounds: 10,
                concurrent_clients: 64,
                throughput_seconds: 5,
                throughput_rounds: 3,
                scale_holders: vec![1_000, 10_000],
                scale_ttl_ms: 3_000,
                scale_seconds: 15,
                sse_clients: 1_000,
                sse_changes: 200,
                sse_leases: 10_000,
                list_calls: 5,
                lists_at_once: 1,
            }
        }
    }
}

fn main() {
    let mut cli = Cli::parse();
    let runtime = || tokio::runtime::Runtime::new().expect("load generator runtime");
    match cli.mode.take() {
        Some(Mode::Gateway(config)) => gateway(*config),
        Some(Mode::Echo { url }) => echo(&url),
        Some(Mode::Front { urls, replicas }) => front::serve(&urls, replicas),
        Some(Mode::Probe {
            phase,
            runs,
            holders,
            lists,
            lists_at_once,
            single_node,
            fronts_on,
        }) => runtime().block_on(async {
            let params = Params {
                list_calls: lists,
                lists_at_once,
                ..Params::new(cli.smoke)
            };
            let layout = if single_node {
                "single node"
            } else {
                "production"
            };
            for run in 1..=runs {
                eprintln!("{layout}, probe run {run} of {runs} ...");
                let per_phase = (holders, fronts_on);
                let json = if single_node {
                    probe(&SingleServers::start().await, phase, per_phase, &params).await
                } else {
                    probe(&ProductionServers::start().await, phase, per_phase, &params).await
                };
                println!("{json}");
            }
        }),
        Some(Mode::History) => runtime().block_on(async {
            let cost = history_cost::measure(&Params::new(cli.smoke)).await;
            println!("{}", cost.markdown());
            let out = cli.out.with_file_name("history.json");
            if let Some(dir) = out.parent() {
                std::fs::create_dir_all(dir).expect("output dir");
            }
            std::fs::write(&out, serde_json::to_vec_pretty(&cost).expect("JSON"))
                .expect("write results");
            eprintln!("figures written to {}", out.display());
        }),
        Some(Mode::Policy { runs, baseline }) => runtime().block_on(async {
            let params = Params::new(cli.smoke);
            for run in 1..=runs {
                eprintln!("policy cost, run {run} of {runs} ...");
                let found = policy::run(&procs::program(), baseline.clone(), &params).await;
                println!("{}", serde_json::to_string(&found).expect("JSON"));
            }
        }),
        None => runtime().block_on(measure(cli)),
    }
}

/// The gateway, on the runtime `dagnats-leases serve` builds from the same
/// settings.
fn gateway(config: dagnats_leases::Config) {
    dagnats_leases::init_logs(&config.log, config.log_format).expect("log settings");
    let runtime = config.runtime().expect("gateway runtime");
    runtime
        .block_on(dagnats_leases::run(
            config,
            dagnats_leases::shutdown_signal(),
        ))
        .expect("gateway");
}

/// The floor's echo responder, on one thread like the gateway, until killed.
fn echo(url: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("echo runtime");
    runtime.block_on(async {
        let nats = async_nats::connect(url).await.expect("connect");
        floor::echo_responder(&nats).await;
        println!("{}", procs::READY);
        std::future::pending::<()>().await;
    });
}

/// Both layouts, or the one `cli` names: the tables and the JSON.
async fn measure(cli: Cli) {
    let params = Params::new(cli.smoke);
    eprintln!("parameters: {params:?}");
    let production = match cli.layout {
        Layout::Production | Layout::Both => Some(production(&params).await),
        Layout::Single => None,
    };
    let single_node = match cli.layout {
        Layout::Single | Layout::Both => Some(single_node(&params).await),
        Layout::Production => None,
    };
    let results = report::Results {
        machine: report::machine(),
        params,
        production,
        single_node,
    };
    println!("{}", results.markdown());
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).expect("output dir");
    }
    std::fs::write(&cli.out, serde_json::to_vec_pretty(&results).expect("JSON"))
        .expect("write results");
    eprintln!("figures written to {}", cli.out.display());
}

/// Names of the production layout's processes, in the tables' order.
const GATEWAYS: [&str; 2] = ["gateway 1", "gateway 2"];
/// The front floor's responders, one in each gateway's place.
const FRONTS: [&str; 2] = ["front 1", "front 2"];
const NODES: [&str; 3] = ["nats-server n1", "nats-server n2", "nats-server n3"];
const ETCD_MEMBERS: [&str; 3] = ["etcd e1", "etcd e2", "etcd e3"];
/// The bucket's replicas in the production layout, and the floor stream's.
const REPLICAS: usize = 3;

/// How long a lease call may take before the client gives up.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The layout docs/operations.md tells users to run: three nodes with
/// `sync_interval: always` (the testkit's cluster), the bucket at 3
/// replicas, two gateways on every node's URL sharing the load (the queue
/// group spreads NATS requests, HTTP calls alternate), etcd with three
/// members, and the floor on an R3 stream of its own.
async fn production(params: &Params) -> Figures {
    eprintln!(
        "production: 3 nats-server nodes, {} gateways ...",
        GATEWAYS.len()
    );
    let servers = ProductionServers::start().await;
    let nats = servers.nats.clone();
    let http_bases = servers.http_bases().await;
    let floor = FloorStream::create(&nats, REPLICAS).await;
    let (_fronts, fronts) = servers.start_fronts(None);
    let setup = Setup {
        name: "production",
        layout: format!(
            "{} nats-server nodes (sync_interval: always), bucket at R3, {} gateways, {} etcd members",
            servers.cluster.nodes.len(),
            GATEWAYS.len(),
            ETCD_MEMBERS.len()
        ),
        leases: LeaseClient::new(nats.clone()).with_timeout(CALL_TIMEOUT),
        floor,
        nats,
        http_bases,
        gateways: servers.gateways(),
        fronts,
        nats_servers: servers.nodes(),
        replicas: REPLICAS,
        etcd_members: &ETCD_MEMBERS,
    };
    layout::measure(&setup, params).await
}

/// The production layout's NATS side, running: three nodes, the bucket at
/// 3 replicas, a gateway on every node's URL per name in [`GATEWAYS`].
/// Dropped in this order: the gateways stop before the nodes they use.
pub struct ProductionServers {
    gateways: Vec<Gateway>,
    nats: async_nats::Client,
    cluster: Cluster,
}

impl ProductionServers {
    async fn start() -> Self {
        let cluster = Cluster::start().await;
        let urls = cluster.urls();
        let mut gateways = Vec::new();
        for _ in GATEWAYS {
            let replicas = REPLICAS.to_string();
            gateways.push(procs::gateway(&urls, &["--replicas", &replicas]).await);
        }
        let nats = cluster.client().await;
        cluster.wait_healthy(&nats, Duration::from_secs(30)).await;
        ProductionServers {
            gateways,
            nats,
            cluster,
        }
    }
}

impl Probed for ProductionServers {
    fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    fn replicas(&self) -> usize {
        REPLICAS
    }

    async fn http_bases(&self) -> Vec<String> {
        let mut bases = Vec::new();
        for gateway in &self.gateways {
            bases.push(gateway.http_url().await);
        }
        bases
    }

    fn gateways(&self) -> Vec<(&'static str, u32)> {
        GATEWAYS
            .into_iter()
            .zip(self.gateways.iter().map(Gateway::pid))
            .collect()
    }

    fn start_fronts(&self, on: Option<&str>) -> (Vec<procs::Proc>, Vec<(&'static str, u32)>) {
        let urls = match on {
            Some(name) => {
                let node = self.cluster.nodes.iter().find(|n| n.name == name);
                node.expect("a node of the cluster").url.clone()
            }
            None => self.cluster.urls(),
        };
        let fronts = front::responders(&urls, FRONTS.len(), REPLICAS);
        let named = FRONTS
            .into_iter()
            .zip(fronts.iter().map(|f| f.child.id()))
            .collect();
        (fronts, named)
    }

    fn nodes(&self) -> Vec<(&'static str, u32)> {
        let pids = self
            .cluster
            .nodes
            .iter()
            .map(|n| n.pid().expect("node runs"));
        NODES.into_iter().zip(pids).collect()
    }

    /// Messages and bytes in and out of every node (their `/varz`, clients
    /// and routes alike).
    fn traffic(&self) -> Option<[u64; 2]> {
        let mut total = [0; 2];
        for node in &self.cluster.nodes {
            let varz = node.varz().expect("the node's /varz");
            let count = |field: &str| varz[field].as_u64().expect("a /varz counter");
            total[0] += count("in_msgs") + count("out_msgs");
            total[1] += count("in_bytes") + count("out_bytes");
        }
        Some(total)
    }
}

/// One nats-server with its default (lazy) fsync, one gateway, one etcd
/// member, the floor in the bucket's own stream, one front floor responder
/// on a stream of its own; then the gateway on one nats-server that fsyncs
/// every write.
async fn single_node(params: &Params) -> SingleNode {
    eprintln!("single node: 1 nats-server, 1 gateway ...");
    let figures = {
        let nats_proc = procs::nats_server(false).await;
        let gateway = procs::gateway(&nats_proc.url, &[]).await;
        let nats = async_nats::connect(&nats_proc.url).await.expect("connect");
        FloorStream::create(&nats, 1).await;
        let front = front::responders(&nats_proc.url, 1, 1);
        let setup = Setup {
            name: "single node",
            layout: "1 nats-server (default fsync), 1 gateway, 1 etcd member".into(),
            leases: LeaseClient::new(nats.clone()).with_timeout(CALL_TIMEOUT),
            nats,
            http_bases: vec![gateway.http_url().await],
            gateways: vec![("gateway", gateway.pid())],
            fronts: vec![("front", front[0].child.id())],
            nats_servers: vec![("nats-server", nats_proc.pid())],
            replicas: 1,
            floor: FloorStream::bucket(),
            etcd_members: &["etcd"],
        };
        layout::measure(&setup, params).await
    };
    SingleNode {
        figures,
        pinned: pinned::measure(params).await,
        durable: durable(params).await,
    }
}

/// The gateway on one nats-server with `sync_interval: always`.
async fn durable(params: &Params) -> Durable {
    eprintln!("gateway on a nats-server with sync_interval: always ...");
    let nats_proc = procs::nats_server(true).await;
    let gateway = procs::gateway(&nats_proc.url, &[]).await;
    let servers = [("gateway", gateway.pid()), ("nats-server", nats_proc.pid())];
    let nats = async_nats::connect(&nats_proc.url).await.expect("connect");
    let leases = LeaseClient::new(nats).with_timeout(CALL_TIMEOUT);
    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let nats =
        gateway_ops::sequential_latencies(&leases, params.sequential_ops, params.latency_rounds)
            .await;
    let renews = gateway_ops::renews(&leases, clients).await;
    Durable {
        nats,
        renew: metered(&servers, secs, throughput(renews, clients, secs)).await,
    }
}
