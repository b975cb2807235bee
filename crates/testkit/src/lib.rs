//! `dagnats-leases-testkit`: the real processes the tests and the benchmark
//! run against, on free loopback ports with temp store dirs, each killed on
//! drop so tests run in parallel without clashing. Never a mock of NATS.
//!
//! # Layout
//!
//! - [`accounts`]: the tenants example of docs/operations.md (accounts
//!   and policy), read from the doc, on a real server.
//! - [`nats`]: one nats-server (2.11+, the "older" 2.9, without JetStream,
//!   with `sync_interval: always`), and raw JetStream API calls.
//! - [`cluster`]: three clustered nodes, optionally each in a network
//!   namespace of its own ([`netns`]) so a test can partition one.
//! - [`gateway`]: a `dagnats-leases serve` process, its HTTP address chosen
//!   up front and its readiness read from `/readyz`.
//! - [`chromium`]: chromedriver and headless Chromium for browser tests.
//! - [`log`]: a child's stderr, line by line.

pub mod accounts;
pub mod chromium;
pub mod cluster;
pub mod gateway;
pub mod log;
pub mod nats;
pub mod netns;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use cluster::Cluster;
pub use gateway::Gateway;
pub use log::Log;
pub use nats::{NatsServer, ServerOptions};

/// Says that `test` cannot run its scenario on this machine, and why: a
/// panic under `CI=true`, where every scenario must run; elsewhere one
/// `SKIPPED` line straight to stderr, past the harness's capture, so a
/// skip is never silent.
pub fn cannot_run(test: &str, why: &str) {
    if std::env::var("CI").is_ok_and(|ci| ci == "true" || ci == "1") {
        panic!("{test} cannot run on this machine ({why}), and CI=true needs every scenario run");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The workspace root (where `.tools/`, `docs/` and `openapi/` live).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `n` distinct free loopback ports: each is bound at once, then released.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("a free port"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// One free loopback port.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after
/// `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    within(timeout, check)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// Polls `check` every 50 ms until it returns `Some`; `None` once
/// `timeout` has passed, for a caller that has more to say than
/// [`eventually`]'s panic.
pub async fn within<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
