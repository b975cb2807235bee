//! A `dagnats-leases serve` process: its HTTP address is chosen before it
//! starts (so nobody reads a log to learn a port) and its readiness is
//! `/readyz`.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Log, free_port};

/// Environment variables of the gateway that a test must not inherit.
const GATEWAY_ENV: &[&str] = &[
    "NATS_URL",
    "NATS_CREDS",
    "NATS_NKEY",
    "NATS_TOKEN",
    "NATS_USER",
    "NATS_PASSWORD",
    "NATS_TLS_CA",
    "NATS_TLS_CERT",
    "NATS_TLS_KEY",
    "DAGNATS_BUCKET_REPLICAS",
    "DAGNATS_BUCKET_RECHECK_MS",
    "DAGNATS_LOG",
    "DAGNATS_LOG_FORMAT",
    "DAGNATS_HTTP_ADDR",
    "DAGNATS_HTTP_TOKEN",
    "DAGNATS_HTTP_INSECURE",
    "DAGNATS_NATS_LISTED_ONLY",
    "DAGNATS_HTTP_READ_TOKEN",
    "DAGNATS_HTTP_CORS_ORIGINS",
    "DAGNATS_SSE_HEARTBEAT_MS",
    "DAGNATS_SSE_BUFFER",
    "DAGNATS_SHUTDOWN_GRACE_MS",
    "DAGNATS_PUBLISHES_IN_FLIGHT",
    "DAGNATS_POLICY",
    "DAGNATS_HISTORY_MAX_AGE",
];

/// How to start the gateway: a program and the arguments before `serve`'s
/// flags. The tests run the `dagnats-leases` binary; the benchmark runs
/// itself in gateway mode, so the CPU it measures is the gateway's own.
#[derive(Debug, Clone)]
pub struct Program {
    pub path: PathBuf,
    pub args: Vec<String>,
}

impl Program {
    /// `dagnats-leases serve`: `DAGNATS_LEASES_BIN`, else the binary cargo
    /// built beside the running test (`target/<profile>/dagnats-leases`).
    pub fn serve() -> Self {
        let path = std::env::var_os("DAGNATS_LEASES_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let exe = std::env::current_exe().expect("own path");
                // target/<profile>/deps/<test>-<hash> -> target/<profile>/
                let profile = exe.parent().and_then(|d| d.parent()).expect("target dir");
                profile.join("dagnats-leases")
            });
        assert!(
            path.is_file(),
            "no gateway binary at {}: build it (cargo build -p dagnats-leases) or set DAGNATS_LEASES_BIN",
            path.display()
        );
        Program {
            path,
            args: vec!["serve".into()],
        }
    }
}

/// One `dagnats-leases serve` process.
pub struct Gateway {
    child: Child,
    /// Its HTTP address, chosen before it started.
    http_addr: String,
    pub log: Log,
}

impl Gateway {
    /// A gateway on `url`, once it serves and its bucket is ready.
    pub async fn start(url: &str) -> Self {
        Self::start_with(url, &[], &[]).await
    }

    /// [`start`](Self::start) with extra flags and environment.
    pub async fn start_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let gateway = Self::spawn(url, args, env);
        gateway.wait_serving().await;
        gateway.wait_bucket_ready().await;
        gateway
    }

    /// A gateway started with extra flags and environment, not waited for.
    /// Its HTTP API listens on a free loopback port unless `env` sets
    /// `DAGNATS_HTTP_ADDR`.
    pub fn spawn(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_program(&Program::serve(), url, args, env)
    }

    /// [`spawn`](Self::spawn) of another gateway program.
    pub fn spawn_program(
        program: &Program,
        url: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let (listen, http_addr) = http_addresses(env);
        let mut cmd = Command::new(&program.path);
        for name in GATEWAY_ENV {
            cmd.env_remove(name);
        }
        cmd.args(&program.args)
            .args(args)
            .env("NATS_URL", url)
            .env("DAGNATS_LOG", "info")
            .envs(env.iter().copied())
            .env("DAGNATS_HTTP_ADDR", &listen)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("starting dagnats-leases");
        let log = Log::default();
        log.follow(child.stderr.take().unwrap());
        Gateway {
            child,
            http_addr,
            log,
        }
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the gateway's subscriptions are registered.
    pub async fn wait_serving(&self) {
        self.log
            .wait_for("serving lease requests", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("gateway not serving:\n{}", self.log.text()));
    }

    /// Waits until `/readyz` answers 200: the lease subjects are
    /// subscribed and the bucket is provisioned (or found).
    pub async fn wait_bucket_ready(&self) {
        self.wait_ready(Duration::from_secs(15)).await;
    }

    /// Waits up to `timeout` until `/readyz` answers 200.
    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while readyz_status(&self.http_addr).await != Some(200) {
            assert!(
                Instant::now() < deadline,
                "gateway not ready within {timeout:?}:\n{}",
                self.log.text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Base URL of the gateway's HTTP API (`http://127.0.0.1:PORT`), once it
    /// accepts connections.
    pub async fn http_url(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        while tokio::net::TcpStream::connect(&self.http_addr)
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "gateway HTTP not listening on {}:\n{}",
                self.http_addr,
                self.log.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        format!("http://{}", self.http_addr)
    }

    /// Sends SIGTERM and waits for the exit.
    pub async fn terminate(mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.wait_exit(Duration::from_secs(15))
            .await
            .expect("gateway exits after SIGTERM")
    }

    /// The exit status, waiting up to `timeout`; once it exited, its log
    /// holds everything it wrote.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let log = &self.log;
                crate::eventually(
                    "the end of the gateway's stderr",
                    Duration::from_secs(5),
                    || std::future::ready(log.ended().then_some(())),
                )
                .await;
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `dagnats-leases` binary with `args`, pointed at `url`, with no
/// inherited gateway settings.
pub fn command(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(Program::serve().path);
    for name in GATEWAY_ENV.iter().chain(["DAGNATS_HOLDER"].iter()) {
        cmd.env_remove(name);
    }
    cmd.args(args).env("NATS_URL", url);
    cmd
}

/// Where the gateway listens and where a client reaches it: a free
/// loopback port, or the test's `DAGNATS_HTTP_ADDR` with port 0 replaced by
/// a free one (so the port is known up front) and an unspecified address
/// reached on loopback.
fn http_addresses(env: &[(&str, &str)]) -> (String, String) {
    let given = env
        .iter()
        .find(|(name, _)| *name == "DAGNATS_HTTP_ADDR")
        .and_then(|(_, addr)| addr.parse::<SocketAddr>().ok());
    let Some(mut listen) = given else {
        let addr = format!("127.0.0.1:{}", free_port());
        return (addr.clone(), addr);
    };
    if listen.port() == 0 {
        listen.set_port(free_port());
    }
    let mut reach = listen;
    if reach.ip().is_unspecified() {
        reach.set_ip(if reach.is_ipv4() {
            Ipv4Addr::LOCALHOST.into()
        } else {
            Ipv6Addr::LOCALHOST.into()
        });
    }
    (listen.to_string(), reach.to_string())
}

/// The status `GET /readyz` answers on `addr`, or `None` if nothing does
/// within 5 s. Async, so a test's own tasks (a proxy in front of NATS) go
/// on while the gateway answers.
async fn readyz_status(addr: &str) -> Option<u16> {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(b"GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    };
    tokio::time::timeout(Duration::from_secs(5), probe)
        .await
        .ok()
        .flatten()
}
