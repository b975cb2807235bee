//! The processes a run measures: nats-server (one, or the testkit's
//! three-node cluster) and gateways (this binary in gateway mode, so their
//! CPU and memory are their own) from the testkit, and etcd (one member or
//! a cluster). All on loopback, free ports, temp dirs; killed on drop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dagnats_leases_testkit::gateway::Program;
use dagnats_leases_testkit::{Gateway, Log, NatsServer, ServerOptions, free_ports};
use tempfile::TempDir;

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    _dir: Option<TempDir>,
}

impl Proc {
    /// `child`, killed on drop.
    pub fn new(child: Child) -> Self {
        Proc { child, _dir: None }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a responder mode of this binary prints once it listens.
pub const READY: &str = "ready";

/// This binary in a responder mode (`args`), as a process of its own, once
/// it has printed [`READY`].
pub fn responder(args: &[&str]) -> Proc {
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("responder starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped stdout"))
        .read_line(&mut line)
        .expect("the responder's first line");
    assert_eq!(line.trim(), READY, "{args:?} did not start");
    Proc::new(child)
}

/// An echo responder on `url` (this binary's `echo` mode), so it can be
/// pinned to a core as the gateway is.
pub fn echo_responder(url: &str) -> Proc {
    responder(&["echo", url])
}

/// nats-server 2.11+ (`NATS_SERVER_BIN`, else the copy `scripts/test`
/// installs), fsyncing before every acknowledgement when `sync_always`.
pub async fn nats_server(sync_always: bool) -> NatsServer {
    NatsServer::start_with(ServerOptions {
        sync_always,
        ..ServerOptions::default()
    })
    .await
}

/// The gateway, as a separate process of this binary in gateway mode (so
/// its CPU and memory are its own), on `nats_urls` (one URL or a
/// comma-separated list) with extra `serve` flags, once its bucket is ready.
/// With `DAGNATS_LEASES_BIN` set, that `dagnats-leases` binary instead: an
/// earlier build, to measure against this one.
pub async fn gateway(nats_urls: &str, args: &[&str]) -> Gateway {
    let gateway = Gateway::spawn_program(&program(), nats_urls, args, &[]);
    gateway.wait_ready(Duration::from_secs(30)).await;
    gateway
}

/// The gateway program [`gateway`] runs: this binary in gateway mode, or
/// the `dagnats-leases` binary `DAGNATS_LEASES_BIN` names.
pub fn program() -> Program {
    match std::env::var_os("DAGNATS_LEASES_BIN") {
        Some(_) => Program::serve(),
        None => Program {
            path: std::env::current_exe().expect("own path"),
            args: vec!["gateway".into()],
        },
    }
}

/// An etcd cluster: its members (killed on drop) and their client URLs.
pub struct Etcd {
    pub members: Vec<Proc>,
    pub urls: Vec<String>,
}

impl Etcd {
    /// Each member's process id, for its CPU time.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().map(|m| m.child.id()).collect()
    }
}

/// etcd (Debian's etcd-server 3.4, fsync as it ships): `ETCD_BIN`, else
/// `/usr/bin/etcd`; `members` of them clustered on loopback, each with its
/// own data dir and free ports, once every one serves clients. `None` when
/// etcd is not installed.
pub async fn etcd(members: usize) -> Option<Etcd> {
    let bin = std::env::var_os("ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/etcd".into());
    if !bin.is_file() {
        return None;
    }
    let ports = free_ports(2 * members);
    let url = |port: u16| format!("http://127.0.0.1:{port}");
    let name = |i: usize| format!("e{}", i + 1);
    let initial_cluster = (0..members)
        .map(|i| format!("{}={}", name(i), url(ports[members + i])))
        .collect::<Vec<_>>()
        .join(",");
    let token = format!("bench-{}", ports[0]);
    let mut cluster = Etcd {
        members: Vec::new(),
        urls: Vec::new(),
    };
    let mut logs = Vec::new();
    for i in 0..members {
        let dir = tempfile::tempdir().expect("temp dir");
        let (client_url, peer_url) = (url(ports[i]), url(ports[members + i]));
        let mut child = Command::new(&bin)
            .args(["--name", &name(i)])
            .arg("--data-dir")
            .arg(dir.path())
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", &token])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        let log = Log::default();
        log.follow(child.stderr.take().expect("piped stderr"));
        logs.push(log);
        cluster.members.push(Proc {
            child,
            _dir: Some(dir),
        });
        cluster.urls.push(client_url);
    }
    for (i, log) in logs.iter().enumerate() {
        log.wait_for("ready to serve client requests", Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("etcd {} did not start:\n{}", name(i), log.text()));
    }
    Some(cluster)
}

/// CPU time (user + system) and resident memory of a process.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub cpu: Duration,
    pub rss_bytes: u64,
    pub at: Instant,
}

/// Reads `/proc/<pid>` now.
pub fn usage(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<u64>().ok())
        .sum();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // Linux reports CPU in clock ticks of 1/100 s on every common platform.
    Usage {
        cpu: Duration::from_millis(ticks * 10),
        rss_bytes: rss_kb * 1024,
        at: Instant::now(),
    }
}

/// Share of one core used between two readings, in percent.
pub fn cpu_percent(before: Usage, after: Usage) -> f64 {
    let wall = after.at.duration_since(before.at).as_secs_f64();
    if wall == 0.0 {
        return 0.0;
    }
    (after.cpu.saturating_sub(before.cpu)).as_secs_f64() / wall * 100.0
}
