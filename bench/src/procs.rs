//! The processes a run measures: nats-server, the gateway (this binary in
//! gateway mode, so its CPU and memory are its own), and etcd. All on
//! loopback, free ports, temp dirs; killed on drop.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    _dir: Option<TempDir>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits until `child`'s stderr has a line containing `needle`.
fn wait_for_line(child: &mut Child, needle: &'static str, what: &str) {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut told = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !told && line.contains(needle) {
                let _ = tx.send(());
                told = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} did not start"));
}

/// How the benchmark's nats-server writes to disk.
#[derive(Debug, Clone, Copy)]
pub enum Sync {
    /// nats-server's default: fsync every 2 minutes (and on close).
    Default,
    /// `sync_interval: always`: fsync before every acknowledgement, as
    /// docs/operations.md recommends for leases, and as etcd always does.
    Always,
}

/// nats-server 2.11+: `NATS_SERVER_BIN`, else the copy `scripts/test` installs.
pub fn nats_server(sync: Sync) -> (Proc, String) {
    let bin = std::env::var_os("NATS_SERVER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.tools/nats/bin/nats-server")
        });
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let sync_interval = match sync {
        Sync::Default => "",
        Sync::Always => "sync_interval: always",
    };
    let config = dir.path().join("nats.conf");
    let store = dir.path().join("store");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?}\n {sync_interval} }}\n",
            store.display().to_string()
        ),
    )
    .expect("write nats.conf");
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "starting {}: {e} (run ./scripts/test once to install it)",
                bin.display()
            )
        });
    wait_for_line(&mut child, "Server is ready", "nats-server");
    (
        Proc {
            child,
            _dir: Some(dir),
        },
        format!("nats://127.0.0.1:{port}"),
    )
}

/// The gateway, as a separate process of this binary, and its HTTP base URL.
pub fn gateway(nats_url: &str) -> (Proc, String) {
    let http = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args(["gateway", "--nats-url", nats_url, "--http-addr", &http])
        .env("DAGNATS_LOG", "info")
        // Its HTTP API is not measured; any free port keeps 8080 out of it.
        .env("DAGNATS_HTTP_ADDR", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the gateway");
    wait_for_line(&mut child, "leases bucket ready", "the gateway");
    (Proc { child, _dir: None }, format!("http://{http}"))
}

/// etcd (Debian's etcd-server 3.4): `ETCD_BIN`, else `/usr/bin/etcd`.
/// `None` when it is not installed.
pub fn etcd() -> Option<(Proc, String)> {
    let bin = std::env::var_os("ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/etcd".into());
    if !bin.is_file() {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (client, peer) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let mut child = Command::new(bin)
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
        .args(["--initial-cluster", &format!("default={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    wait_for_line(&mut child, "ready to serve client requests", "etcd");
    Some((
        Proc {
            child,
            _dir: Some(dir),
        },
        client_url,
    ))
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
