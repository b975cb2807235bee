//! The `dagnats-leases` command: parses arguments and calls the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dagnats_leases::{Config, run, telemetry};

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
}

#[tokio::main]
async fn main() -> ExitCode {
    let Command::Serve(config) = Cli::parse().command;
    if let Err(err) = telemetry::init(&config.log, config.log_format) {
        eprintln!("dagnats-leases: invalid settings: {err}");
        return ExitCode::FAILURE;
    }
    match run(config, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(%err, "dagnats-leases stopped");
            eprintln!("dagnats-leases: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = interrupt => {}
        _ = terminate.recv() => {}
    }
}
