//! The `dagnats-leases` command: parses arguments and calls the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dagnats_leases::cli::{self, ClientCommand};
use dagnats_leases::{Config, init_logs, run, shutdown_signal};

/// mimalloc rather than glibc's allocator: fewer instructions a call, for
/// a little more resident memory (docs/performance.md, What the profiles
/// changed).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Leases over NATS: leader election and shard ownership for your replicas.
#[derive(Parser)]
#[command(name = "dagnats-leases", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway: the lease subjects over NATS and the HTTP API.
    Serve(Config),
    #[command(flatten)]
    Client(ClientCommand),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Serve(config) => {
            if let Err(err) = init_logs(&config.log, config.log_format) {
                eprintln!("dagnats-leases: invalid settings: {err}");
                return ExitCode::FAILURE;
            }
            on(config.runtime(), serve(config))
        }
        Command::Client(command) => on(tokio::runtime::Runtime::new(), cli::run(command)),
    }
}

/// Runs `task` on `runtime`, or says why there is no runtime to run it on.
fn on<T: Into<ExitCode>>(
    runtime: std::io::Result<tokio::runtime::Runtime>,
    task: impl Future<Output = T>,
) -> ExitCode {
    match runtime {
        Ok(runtime) => runtime.block_on(task).into(),
        Err(err) => {
            eprintln!("dagnats-leases: no async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Config) -> ExitCode {
    match run(config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(%err, "dagnats-leases stopped");
            eprintln!("dagnats-leases: {err}");
            ExitCode::FAILURE
        }
    }
}
