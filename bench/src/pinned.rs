//! The single node with its processes pinned: the load generator (this
//! process) on CPU 0, and nats-server, the gateway and the hop's echo
//! responder on CPU 1, so the client and the servers never take each
//! other's core: the single node's latency targets hold in this layout too.
//!
//! Pinning is `taskset -a` (util-linux, part of every Debian system) over
//! every thread of each process; the pin is lifted when the phase ends.

use std::process::{Command, Stdio};

use dagnats_leases_client::LeaseClient;

use crate::floor::{self, FloorStream};
use crate::gateway_ops::Sequential;
use crate::measure::latencies;
use crate::procs;
use crate::report::Pinned;
use crate::{CALL_TIMEOUT, Params, gateway_ops};

/// The core the load generator runs on; the servers get the next one.
const CLIENT_CPU: usize = 0;
const SERVER_CPU: usize = 1;

/// Pins every thread of `pid` to `cpus` (a `taskset -c` list).
fn pin(pid: u32, cpus: &str) {
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", cpus, &pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("taskset (util-linux) runs");
    assert!(status.success(), "taskset -c {cpus} of pid {pid}: {status}");
}

/// This process on [`CLIENT_CPU`] until dropped, then on every core again.
struct ClientPinned {
    all: String,
}

impl ClientPinned {
    fn new(cores: usize) -> Self {
        pin(std::process::id(), &CLIENT_CPU.to_string());
        ClientPinned {
            all: format!("0-{}", cores - 1),
        }
    }
}

impl Drop for ClientPinned {
    fn drop(&mut self) {
        pin(std::process::id(), &self.all);
    }
}

/// The floors and the NATS front, sequentially, on a single node of their
/// own with the processes pinned; `None` on a machine with one core.
pub async fn measure(params: &Params) -> Option<Pinned> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("single node, pinned: skipped, one core");
        return None;
    }
    eprintln!("single node, pinned: client on CPU {CLIENT_CPU}, servers on CPU {SERVER_CPU} ...");
    let nats_proc = procs::nats_server(false).await;
    let gateway = procs::gateway(&nats_proc.url, &[]).await;
    let echo = procs::echo_responder(&nats_proc.url);
    let nats = async_nats::connect(&nats_proc.url).await.expect("connect");
    for pid in [nats_proc.pid(), gateway.pid(), echo.child.id()] {
        pin(pid, &SERVER_CPU.to_string());
    }
    let _client = ClientPinned::new(cores);
    let n = params.sequential_ops;
    let on = FloorStream::bucket();
    let leases = LeaseClient::new(nats.clone()).with_timeout(CALL_TIMEOUT);
    let mut ops = floor::sequential_ops(&nats, floor::ECHO_SUBJECT, &on)
        .await
        .to_vec();
    ops.extend(gateway_ops::sequential_ops(&leases, n).await.ops());
    let mut figures = latencies(&ops, n, params.latency_rounds).await.into_iter();
    let mut next = || figures.next().expect("a latency for every op");
    let floor = floor::from_latencies(&on, &mut next);
    let nats = Sequential::latencies(next);
    Some(Pinned { floor, nats })
}
