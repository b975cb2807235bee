//! One nats-server process on a free loopback port with a temp store dir,
//! and raw JetStream API calls for tests that look under the gateway.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::Log;

/// The nats-server 2.11+ the tests run against: `NATS_SERVER_BIN`, else the
/// copy `scripts/test` installs under `.tools/`.
pub fn server_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATS_SERVER_BIN") {
        return bin.into();
    }
    let bin = crate::workspace_root().join(".tools/nats/bin/nats-server");
    assert!(
        bin.is_file(),
        "no nats-server at {}: run ./scripts/test, which installs it",
        bin.display()
    );
    bin
}

/// Debian's nats-server 2.9, the "older server": `NATS_SERVER_OLD_BIN`, else
/// `/usr/sbin/nats-server` (`scripts/test` installs it).
pub fn old_server_binary() -> PathBuf {
    let bin: PathBuf = std::env::var_os("NATS_SERVER_OLD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/sbin/nats-server".into());
    assert!(
        bin.is_file(),
        "no nats-server 2.9 at {}: run ./scripts/test, which installs it",
        bin.display()
    );
    bin
}

/// How to start a server.
#[derive(Clone)]
pub struct ServerOptions {
    pub binary: PathBuf,
    pub jetstream: bool,
    /// `sync_interval: always`: fsync before every acknowledgement, as
    /// docs/operations.md recommends (and as etcd always does).
    pub sync_always: bool,
    /// A configuration file's text (e.g. the accounts of
    /// docs/operations.md), written beside the store and passed with `-c`.
    pub config: Option<String>,
    /// Environment of the server process, for the `$VARIABLE`s a
    /// configuration names.
    pub env: Vec<(String, String)>,
    pub extra_args: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            binary: server_binary(),
            jetstream: true,
            sync_always: false,
            config: None,
            env: Vec::new(),
            extra_args: Vec::new(),
        }
    }
}

/// One nats-server process.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
    pub url: String,
    options: ServerOptions,
    store: TempDir,
    pub log: Log,
}

impl NatsServer {
    /// nats-server 2.11+ with JetStream.
    pub async fn start() -> Self {
        Self::start_with(ServerOptions::default()).await
    }

    /// Debian's nats-server 2.9, older than the gateway supports.
    pub async fn old() -> Self {
        Self::start_with(ServerOptions {
            binary: old_server_binary(),
            ..ServerOptions::default()
        })
        .await
    }

    /// nats-server 2.11+ with JetStream off.
    pub async fn without_jetstream() -> Self {
        Self::start_with(ServerOptions {
            jetstream: false,
            ..ServerOptions::default()
        })
        .await
    }

    /// A server started with `options` on a free port.
    pub async fn start_with(options: ServerOptions) -> Self {
        let store = tempfile::tempdir().unwrap();
        let mut server = NatsServer {
            child: None,
            port: 0,
            url: String::new(),
            options,
            store,
            log: Log::default(),
        };
        server.launch(None).await;
        server
    }

    async fn launch(&mut self, port: Option<u16>) {
        let port_arg = port.map_or("-1".to_string(), |p| p.to_string());
        let mut cmd = Command::new(&self.options.binary);
        cmd.args(["-a", "127.0.0.1", "-p", &port_arg]);
        if self.options.jetstream {
            cmd.args(["-js", "-sd"]).arg(self.store.path().join("js"));
        }
        let mut config = self.options.config.clone().unwrap_or_default();
        if self.options.sync_always {
            config.push_str("\njetstream { sync_interval: always }\n");
        }
        if !config.is_empty() {
            let path = self.store.path().join("server.conf");
            std::fs::write(&path, config).unwrap();
            cmd.arg("-c").arg(path);
        }
        cmd.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        cmd.args(&self.options.extra_args);
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting nats-server");
        self.log = Log::default();
        self.log.follow(child.stderr.take().unwrap());
        self.child = Some(child);
        let line = self
            .log
            .wait_for(
                "Listening for client connections on",
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|| panic!("nats-server did not start:\n{}", self.log.text()));
        self.port = line.rsplit(':').next().unwrap().trim().parse().unwrap();
        self.url = format!("nats://127.0.0.1:{}", self.port);
        self.log
            .wait_for("Server is ready", Duration::from_secs(10))
            .await
            .expect("nats-server ready");
    }

    /// The process id, for signals and CPU accounting.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops the server (SIGKILL) and keeps its store dir.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store dir, optionally with new
    /// options (e.g. JetStream switched on).
    pub async fn restart_with(&mut self, options: ServerOptions) {
        self.stop();
        self.options = options;
        self.launch(Some(self.port)).await;
    }

    /// Starts it again on the same port and store dir.
    pub async fn restart(&mut self) {
        let options = self.options.clone();
        self.restart_with(options).await;
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A JetStream API call, raw JSON in and out.
pub async fn js_api(client: &async_nats::Client, op: &str, body: Value) -> Value {
    let reply = client
        .request(
            format!("$JS.API.{op}"),
            serde_json::to_vec(&body).unwrap().into(),
        )
        .await
        .expect("JetStream API answered");
    serde_json::from_slice(&reply.payload).unwrap()
}

/// A JetStream API call, or `None` if nobody answers in 5 s.
pub async fn try_js_api(client: &async_nats::Client, op: &str, body: Value) -> Option<Value> {
    let request = client.request(
        format!("$JS.API.{op}"),
        serde_json::to_vec(&body).unwrap().into(),
    );
    let reply = tokio::time::timeout(Duration::from_secs(5), request)
        .await
        .ok()?
        .ok()?;
    serde_json::from_slice(&reply.payload).ok()
}

/// `KV_leases` stream info.
pub async fn stream_info(client: &async_nats::Client) -> Value {
    js_api(client, "STREAM.INFO.KV_leases", json!({})).await
}

/// A plain NATS client, as a service would have.
pub async fn client(url: &str) -> async_nats::Client {
    async_nats::connect(url)
        .await
        .expect("connecting to nats-server")
}

/// Returns once the server has handled everything sent on `client` before
/// (a subscription is in its interest, an unsubscription gone from it) and
/// `client` has read every message the server sent it before. A server
/// handles each connection's operations in order, so a message `client`
/// sends itself comes back after all of them; `flush` only writes the
/// socket, and another connection's publish can overtake it.
pub async fn settle(client: &async_nats::Client) {
    use futures::StreamExt;
    let subject = client.new_inbox();
    let mut echo = client.subscribe(subject.clone()).await.unwrap();
    client.publish(subject, Default::default()).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), echo.next())
        .await
        .expect("the server echoes a message within 10 s")
        .expect("the connection stays open");
}
