//! `dagnats-leases-bench`: latency, throughput and scale of the lease
//! gateway beside the floor NATS sets and beside etcd, in one run, against
//! servers it starts itself on loopback.
//!
//! ```sh
//! cargo run --release -p dagnats-leases-bench            # the full run (a few minutes)
//! cargo run -p dagnats-leases-bench -- --smoke           # seconds; what CI runs
//! ```
//!
//! It prints a markdown table and writes the figures as JSON (`--out`).

mod etcd_ops;
mod floor;
mod gateway_ops;
mod http_ops;
mod measure;
mod procs;
mod report;
mod scale;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use dagnats_leases_client::LeaseClient;
use measure::metered;

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
    /// Where to write the figures as JSON.
    #[arg(long, default_value = "target/bench/leases.json")]
    out: PathBuf,
}

#[derive(Subcommand)]
enum Mode {
    /// (internal) Run the gateway in this process, so its CPU and memory
    /// can be measured apart from the load generator.
    #[command(hide = true)]
    Gateway(dagnats_leases::Config),
}

/// The fixed parameters of a run, printed with the results.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Params {
    pub sequential_ops: u64,
    pub concurrent_clients: u64,
    pub throughput_seconds: u64,
    pub scale_holders: Vec<u64>,
    pub scale_ttl_ms: u64,
    pub scale_seconds: u64,
    pub sse_clients: u64,
    pub sse_changes: u64,
    /// Leases held (TTL 60 s) while the SSE fan-out is measured.
    pub sse_leases: u64,
}

impl Params {
    fn new(smoke: bool) -> Params {
        if smoke {
            Params {
                sequential_ops: 50,
                concurrent_clients: 4,
                throughput_seconds: 1,
                scale_holders: vec![50],
                scale_ttl_ms: 3_000,
                scale_seconds: 3,
                sse_clients: 10,
                sse_changes: 10,
                sse_leases: 100,
            }
        } else {
            Params {
                sequential_ops: 2_000,
                concurrent_clients: 64,
                throughput_seconds: 5,
                scale_holders: vec![1_000, 10_000],
                scale_ttl_ms: 3_000,
                scale_seconds: 15,
                sse_clients: 1_000,
                sse_changes: 200,
                sse_leases: 10_000,
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    if let Some(Mode::Gateway(config)) = cli.mode {
        dagnats_leases::init_logs(&config.log, config.log_format).expect("log settings");
        dagnats_leases::run(config, dagnats_leases::shutdown_signal())
            .await
            .expect("gateway");
        return;
    }
    let params = Params::new(cli.smoke);
    eprintln!("parameters: {params:?}");
    let nats_proc = procs::nats_server(false).await;
    let nats_url = nats_proc.url.clone();
    let gateway = procs::gateway(&nats_url).await;
    let http_base = gateway.http_url().await;
    let gateway_pid = gateway.pid();
    let servers = [("gateway", gateway_pid), ("nats-server", nats_proc.pid())];
    let nats = async_nats::connect(&nats_url).await.expect("connect");
    let leases = LeaseClient::new(nats.clone()).with_timeout(Duration::from_secs(10));
    let n = params.sequential_ops;

    eprintln!("floor ...");
    let echo = floor::echo_responder(&nats).await;
    let floor = report::Floor {
        hop: floor::hop(&nats, &echo, n).await,
        compare_and_set: floor::compare_and_set(&nats, n).await,
        leader_read: floor::leader_read(&nats, n).await,
    };
    eprintln!("gateway, sequential ...");
    let nats_ops = gateway_ops::sequential_ops(&leases, n).await;
    eprintln!("gateway over HTTP, sequential ...");
    let http = reqwest::Client::new();
    let http_ops = http_ops::sequential_ops(&http, &http_base, n).await;
    eprintln!("concurrent ...");
    let (clients, secs) = (
        params.concurrent_clients,
        Duration::from_secs(params.throughput_seconds),
    );
    let throughput = report::Throughputs {
        floor_compare_and_set: metered(
            &servers[1..],
            secs,
            floor::compare_and_set_throughput(&nats, clients, secs),
        )
        .await,
        renew: metered(
            &servers,
            secs,
            gateway_ops::renew_throughput(&leases, clients, secs),
        )
        .await,
        owner: metered(
            &servers,
            secs,
            gateway_ops::owner_throughput(&leases, clients, secs),
        )
        .await,
    };

    eprintln!("gateway on a nats-server with sync_interval: always ...");
    let durable = {
        let nats_proc = procs::nats_server(true).await;
        let url = nats_proc.url.clone();
        let gateway = procs::gateway(&url).await;
        let servers = [("gateway", gateway.pid()), ("nats-server", nats_proc.pid())];
        let nats = async_nats::connect(&url).await.expect("connect");
        let leases = LeaseClient::new(nats).with_timeout(Duration::from_secs(10));
        report::Durable {
            nats: gateway_ops::sequential_ops(&leases, n).await,
            renew: metered(
                &servers,
                secs,
                gateway_ops::renew_throughput(&leases, clients, secs),
            )
            .await,
        }
    };

    let etcd = match procs::etcd().await {
        Some((proc_, url)) => {
            eprintln!("etcd ...");
            let client = etcd_ops::connect(&url).await;
            let etcd = [("etcd", proc_.child.id())];
            let figures = report::Etcd {
                acquire: etcd_ops::acquire_latency(&client, n).await,
                renew: etcd_ops::renew_latency(&client, n).await,
                keep_alive: metered(
                    &etcd,
                    secs,
                    etcd_ops::renew_throughput(&client, clients, secs),
                )
                .await,
                compare_and_set: metered(
                    &etcd,
                    secs,
                    etcd_ops::compare_and_set_throughput(&client, clients, secs),
                )
                .await,
            };
            drop(proc_);
            Some(figures)
        }
        None => {
            eprintln!("etcd not installed (apt-get install etcd-server): skipping the comparison");
            None
        }
    };

    let mut scales = Vec::new();
    for holders in &params.scale_holders {
        eprintln!("scale, {holders} holders ...");
        let ttl = Duration::from_millis(params.scale_ttl_ms);
        let run_for = Duration::from_secs(params.scale_seconds);
        scales.push(scale::run(&leases, gateway_pid, *holders, ttl, run_for).await);
    }

    eprintln!(
        "SSE fan-out, {} clients, {} leases held ...",
        params.sse_clients, params.sse_leases
    );
    gateway_ops::hold_many(&leases, params.sse_leases, Duration::from_secs(60)).await;
    let fan_out = http_ops::fan_out(
        &http,
        &http_base,
        gateway_pid,
        params.sse_clients,
        params.sse_changes,
    )
    .await;

    let results = report::Results {
        machine: report::machine(),
        params,
        floor,
        nats: nats_ops,
        http: http_ops,
        fan_out,
        throughput,
        durable,
        etcd,
        scale: scales,
    };
    println!("{}", results.markdown());
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).expect("output dir");
    }
    std::fs::write(&cli.out, serde_json::to_vec_pretty(&results).expect("JSON"))
        .expect("write results");
    eprintln!("figures written to {}", cli.out.display());
}
