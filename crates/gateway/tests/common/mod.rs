//! Test harness: real nats-server processes on free loopback ports with temp
//! store dirs, the real `dagnats-leases` binary, and a NATS client. Every
//! process is killed on drop, so tests run in parallel without clashing.
#![allow(dead_code)] // each test binary uses its own part of the harness

pub mod checker;
pub mod cluster;
pub mod lease_ops;
pub mod netns;
pub mod owner;
pub mod proxy;
pub mod service;
pub mod takeover;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// Lines a child process wrote to stderr, shared with its reader thread.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn follow(&self, stream: impl std::io::Read + Send + 'static) {
        let lines = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
    }

    /// Every line so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }

    /// The first line containing `needle`, waiting up to `timeout`.
    pub async fn wait_for(&self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.0.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return Some(line.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The nats-server 2.11+ the tests run against: `NATS_SERVER_BIN`, else the
/// copy `scripts/test` installs under `.tools/`.
pub fn server_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("NATS_SERVER_BIN") {
        return bin.into();
    }
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/nats/bin/nats-server");
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
    pub extra_args: Vec<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            binary: server_binary(),
            jetstream: true,
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
            cmd.args(["-js", "-sd"]).arg(self.store.path());
        }
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
    "DAGNATS_LOG",
    "DAGNATS_LOG_FORMAT",
    "DAGNATS_HTTP_ADDR",
    "DAGNATS_HTTP_TOKEN",
    "DAGNATS_HTTP_READ_TOKEN",
    "DAGNATS_HTTP_CORS_ORIGINS",
    "DAGNATS_SSE_HEARTBEAT_MS",
    "DAGNATS_SSE_BUFFER",
];

/// One `dagnats-leases serve` process.
pub struct Gateway {
    child: Child,
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
    pub fn spawn(url: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dagnats-leases"));
        for name in GATEWAY_ENV {
            cmd.env_remove(name);
        }
        cmd.arg("serve")
            .args(args)
            .env("NATS_URL", url)
            .env("DAGNATS_LOG", "info")
            .env("DAGNATS_HTTP_ADDR", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("starting dagnats-leases");
        let log = Log::default();
        log.follow(child.stderr.take().unwrap());
        Gateway { child, log }
    }

    /// Waits until the gateway's subscriptions are registered.
    pub async fn wait_serving(&self) {
        self.log
            .wait_for("serving lease requests", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("gateway not serving:\n{}", self.log.text()));
    }

    /// Waits until the gateway has provisioned (or found) the bucket.
    pub async fn wait_bucket_ready(&self) {
        self.log
            .wait_for("leases bucket ready", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("bucket not ready:\n{}", self.log.text()));
    }

    /// Base URL of the gateway's HTTP API (`http://127.0.0.1:PORT`), read
    /// from its log.
    pub async fn http_url(&self) -> String {
        let line = self
            .log
            .wait_for("HTTP listening on ", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("gateway HTTP not listening:\n{}", self.log.text()));
        let addr = line.rsplit("HTTP listening on ").next().unwrap().trim();
        format!("http://{addr}")
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

    /// The exit status, waiting up to `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
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
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dagnats-leases"));
    for name in GATEWAY_ENV.iter().chain(["DAGNATS_HOLDER"].iter()) {
        cmd.env_remove(name);
    }
    cmd.args(args).env("NATS_URL", url);
    cmd
}

/// A server and one gateway on it, ready to serve.
pub struct Setup {
    pub server: NatsServer,
    pub gateway: Gateway,
    pub client: async_nats::Client,
}

impl Setup {
    pub async fn start() -> Self {
        Self::on(NatsServer::start().await).await
    }

    /// On a server whose max_payload is `bytes`. Keep the returned dir (the
    /// server's config file) for as long as the server runs.
    pub async fn with_max_payload(bytes: usize) -> (Self, TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("nats.conf");
        std::fs::write(&config, format!("max_payload: {bytes}\n")).unwrap();
        let server = NatsServer::start_with(ServerOptions {
            extra_args: vec!["-c".into(), config.display().to_string()],
            ..ServerOptions::default()
        })
        .await;
        (Self::on(server).await, dir)
    }

    async fn on(server: NatsServer) -> Self {
        let gateway = Gateway::start(&server.url).await;
        let client = client(&server.url).await;
        Setup {
            server,
            gateway,
            client,
        }
    }

    /// `api.leases.<op>` with a JSON body.
    pub async fn call(&self, op: &str, body: Value) -> Value {
        call(&self.client, op, body).await
    }
}

/// A plain NATS client, as a service would have.
pub async fn client(url: &str) -> async_nats::Client {
    async_nats::connect(url)
        .await
        .expect("connecting to nats-server")
}

/// `api.leases.<op>` with a JSON body; the reply as JSON.
pub async fn call(client: &async_nats::Client, op: &str, body: Value) -> Value {
    call_raw(client, op, serde_json::to_vec(&body).unwrap()).await
}

/// `api.leases.<op>` with raw bytes; the reply as JSON.
pub async fn call_raw(client: &async_nats::Client, op: &str, body: Vec<u8>) -> Value {
    serde_json::from_str(&call_text(client, op, body).await).expect("reply is JSON")
}

/// `api.leases.<op>` with raw bytes; the reply as text, as it was sent.
pub async fn call_text(client: &async_nats::Client, op: &str, body: Vec<u8>) -> String {
    let subject = format!("api.leases.{op}");
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        client.request(subject, body.into()),
    )
    .await
    .expect("reply within 10 s")
    .expect("request answered");
    String::from_utf8(reply.payload.to_vec()).expect("reply is UTF-8")
}

/// `api.leases.<op>`, or `None` when nobody answers (no gateway
/// subscribed yet, or no reply in time): for polling while things start.
pub async fn try_call(client: &async_nats::Client, op: &str, body: Value) -> Option<Value> {
    let subject = format!("api.leases.{op}");
    let payload = serde_json::to_vec(&body).unwrap();
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        client.request(subject, payload.into()),
    )
    .await
    .ok()?
    .ok()?;
    Some(serde_json::from_slice(&reply.payload).expect("reply is JSON"))
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

/// `KV_leases` stream info.
pub async fn stream_info(client: &async_nats::Client) -> Value {
    js_api(client, "STREAM.INFO.KV_leases", json!({})).await
}

/// The stream's state: what a call must leave untouched to have no effect.
pub async fn stream_state(client: &async_nats::Client) -> Value {
    stream_info(client).await["state"].clone()
}

/// Waits up to 5 s until the server has removed `key`'s tombstone (its TTL
/// is the lease's): the moment it would write an expiry marker, if it did.
pub async fn wait_tombstone_gone(client: &async_nats::Client, key: &str) {
    eventually(
        "the tombstone to expire",
        Duration::from_secs(5),
        || async {
            let got = js_api(
                client,
                "STREAM.MSG.GET.KV_leases",
                json!({"last_by_subj": format!("$KV.leases.{key}")}),
            )
            .await;
            (got["error"]["err_code"] == 10037).then_some(())
        },
    )
    .await
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after
/// `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Parses an RFC 3339 timestamp from a reply, checking the `Z` suffix.
pub fn timestamp(value: &Value) -> time::OffsetDateTime {
    let text = value.as_str().expect("timestamp is a string");
    assert!(text.ends_with('Z'), "{text} is not UTC with a Z suffix");
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|err| panic!("{text} is not RFC 3339: {err}"))
}

/// An HTTP reply: status and JSON body.
pub struct HttpReply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

/// A gateway's HTTP API, as any HTTP client would use it. Every JSON reply
/// it receives is checked against the gateway's own OpenAPI document.
#[derive(Clone)]
pub struct Http {
    pub base: String,
    pub client: reqwest::Client,
    pub token: Option<String>,
    /// The served `/openapi.json`.
    openapi: Arc<Value>,
}

impl Http {
    /// The HTTP API of `gateway`.
    pub async fn of(gateway: &Gateway) -> Self {
        let base = gateway.http_url().await;
        let client = reqwest::Client::new();
        let openapi = client
            .get(format!("{base}/openapi.json"))
            .send()
            .await
            .expect("the OpenAPI document is served")
            .json()
            .await
            .expect("the OpenAPI document is JSON");
        Http {
            base,
            client,
            token: None,
            openapi: Arc::new(openapi),
        }
    }

    /// The same API, sending `Authorization: Bearer <token>`.
    pub fn with_token(&self, token: &str) -> Self {
        Http {
            token: Some(token.to_string()),
            ..self.clone()
        }
    }

    /// A request to `path`, with the token if any.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> HttpReply {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> HttpReply {
        self.send(self.request(reqwest::Method::POST, path).json(&body))
            .await
    }

    /// Sends `req`; the reply with its body parsed as JSON and checked
    /// against the OpenAPI document.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> HttpReply {
        let req = req.build().expect("a valid request");
        let (method, path) = (req.method().clone(), req.url().path().to_string());
        let resp = tokio::time::timeout(Duration::from_secs(40), self.client.execute(req))
            .await
            .expect("HTTP reply within 40 s")
            .expect("HTTP request answered");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.expect("HTTP body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("body is not JSON ({err}): {text:?}"));
        self.check_schema(&method, &path, status, &body);
        HttpReply {
            status,
            headers,
            body,
        }
    }

    /// Asserts `body` matches the schema the OpenAPI document gives this
    /// path, method and status. Unknown routes (404) and methods (405) are
    /// not in the document; their body must be an `ErrorBody`.
    fn check_schema(&self, method: &reqwest::Method, path: &str, status: u16, body: &Value) {
        let doc = &*self.openapi;
        let operation = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(template, _)| path_matches(template, path))
            .map(|(_, item)| &item[method.as_str().to_lowercase()])
            .filter(|op| !op.is_null());
        let schema = match operation {
            Some(op) => {
                op["responses"][status.to_string()]["content"]["application/json"]["schema"].clone()
            }
            None => {
                assert!(
                    [404, 405].contains(&status),
                    "{method} {path} is not in the OpenAPI document"
                );
                json!({"$ref": "#/components/schemas/ErrorBody"})
            }
        };
        assert!(
            !schema.is_null(),
            "status {status} of {method} {path} is not in the OpenAPI document"
        );
        let root = json!({"allOf": [schema], "components": doc["components"]});
        let validator = jsonschema::validator_for(&root).expect("a valid schema");
        if let Err(err) = validator.validate(body) {
            panic!("{method} {path} {status}: {body} does not match its schema: {err}");
        }
    }
}

/// Whether a concrete path fits an OpenAPI path template (`{x}` is one
/// segment).
fn path_matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<_>, Vec<_>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| t == p || (t.starts_with('{') && t.ends_with('}') && !p.is_empty()))
}

/// Asserts `reply` is the error body `{"error", "kind"}` of `kind` with
/// `status`, and nothing else besides forward's `holder` and `revision`.
pub fn assert_error(reply: &HttpReply, status: u16, kind: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["kind"], kind, "{}", reply.body);
    assert!(reply.body["error"].as_str().is_some_and(|e| !e.is_empty()));
    let fields = reply.body.as_object().unwrap();
    assert!(
        fields
            .keys()
            .all(|k| ["error", "kind", "holder", "revision"].contains(&k.as_str())),
        "{}",
        reply.body
    );
}
