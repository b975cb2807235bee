//! `conformance-driver`: the Rust client (`dagnats-leases-client`) behind
//! the conformance driver protocol (`clients/conformance/DRIVER.md`).
//!
//! It reads one JSON request a line on stdin, runs each concurrently
//! against the library's public API, and prints one answer line per
//! request, plus unsolicited event lines (ownership changes, inbox
//! deliveries). It holds no lease logic of its own: every decision is the
//! library's.
//!
//! # Layout
//!
//! - `protocol`: the request lines, decoded; the answer lines, encoded.
//! - `output`: whole lines to stdout, never interleaved.
//! - `calls`: the `call` op, one `LeaseClient` call each.
//! - `keepers`: `keeper.*` ops and their ownership events.
//! - `inboxes`: `inbox.*` ops, `serve_inbox` with the runner's tenures.
//! - `gates`: `gate.admit`, one `FenceGate` per name.

mod calls;
mod gates;
mod inboxes;
mod keepers;
mod output;
mod protocol;

use std::sync::Arc;
use std::time::Duration;

use dagnats_leases_client::LeaseClient;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use output::Output;
use protocol::{Failure, Op, Request};

/// The `LeaseClient` timeout when `DRIVER_CALL_TIMEOUT_MS` is not set.
const DEFAULT_CALL_TIMEOUT_MS: u64 = 5000;

/// What every request works with.
pub struct Driver {
    pub client: LeaseClient,
    pub out: Output,
    pub keepers: keepers::Keepers,
    pub inboxes: inboxes::Inboxes,
    pub gates: gates::Gates,
}

#[tokio::main]
async fn main() {
    // Logs go to stderr, which the runner keeps for failure reports.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("DRIVER_LOG")
                .unwrap_or_else(|_| "dagnats_leases_client=debug".into()),
        )
        .init();
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let timeout_ms = match std::env::var("DRIVER_CALL_TIMEOUT_MS") {
        Ok(ms) => ms.parse().unwrap_or_else(|_| {
            eprintln!("DRIVER_CALL_TIMEOUT_MS is not a number of milliseconds: {ms:?}");
            std::process::exit(2)
        }),
        Err(_) => DEFAULT_CALL_TIMEOUT_MS,
    };
    let nats = async_nats::connect(&url).await.unwrap_or_else(|err| {
        eprintln!("cannot connect to {url}: {err}");
        std::process::exit(1)
    });
    let out = Output;
    let driver = Arc::new(Driver {
        client: LeaseClient::new(nats).with_timeout(Duration::from_millis(timeout_ms)),
        keepers: keepers::Keepers::default(),
        inboxes: inboxes::Inboxes::default(),
        gates: gates::Gates::default(),
        out,
    });
    out.line(&json!({"ready": true, "library": "rust", "version": env!("CARGO_PKG_VERSION")}));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let request = Request::decode(&line);
        if matches!(request.op, Ok(Op::Exit)) {
            driver.keepers.stop_all().await;
            out.answer(&request.id, Ok(json!({})));
            std::process::exit(0);
        }
        let driver = driver.clone();
        tokio::spawn(async move {
            let answer = match request.op {
                Ok(op) => run(&driver, op).await,
                Err(failure) => Err(failure),
            };
            driver.out.answer(&request.id, answer);
        });
    }
    // stdin closed: stop (and release) like `exit` does.
    driver.keepers.stop_all().await;
}

/// One request's answer.
async fn run(driver: &Driver, op: Op) -> Result<Value, Failure> {
    match op {
        Op::Call { method, args } => calls::call(&driver.client, &method, args).await,
        Op::KeeperStart(start) => driver.keepers.start(driver, start),
        Op::KeeperState { keeper } => driver.keepers.state(&keeper),
        Op::KeeperWaitOwner { keeper, timeout_ms } => {
            driver.keepers.wait_owner(&keeper, timeout_ms).await
        }
        Op::KeeperHandOff { keeper, to } => driver.keepers.hand_off(&keeper, &to).await,
        Op::KeeperStop { keeper } => driver.keepers.stop(&keeper).await,
        Op::InboxServe(serve) => driver.inboxes.serve(driver, serve).await,
        Op::InboxStop { inbox } => driver.inboxes.stop(&inbox).await,
        Op::GateAdmit { gate, fence } => driver.gates.admit(&gate, fence),
        Op::Exit => unreachable!("exit is answered by the read loop"),
    }
}
