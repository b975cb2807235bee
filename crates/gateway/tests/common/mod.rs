//! Test harness: the processes come from `dagnats-leases-testkit` (real
//! nats-server, the real `dagnats-leases` binary, each killed on drop);
//! this adds what the gateway's tests share: lease calls, the HTTP client
//! that checks every reply against the OpenAPI document, and waits.
#![allow(dead_code)] // each test binary uses its own part of the harness
#![allow(unused_imports)] // likewise for the re-exports

pub mod checker;
pub mod fault_report;
pub mod history_file;
pub mod lease_ops;
pub mod owner;
pub mod proxy;
pub mod records;
pub mod relay;
pub mod renewing;
pub mod service;
pub mod shard_checker;
pub mod sse;
pub mod takeover;
pub mod tenants;

pub use dagnats_leases_testkit::gateway::command;
pub use dagnats_leases_testkit::nats::{
    client, js_api, old_server_binary, server_binary, settle, stream_info, try_js_api,
};
pub use dagnats_leases_testkit::{
    Gateway, Log, NatsServer, ServerOptions, cannot_run, cluster, eventually, netns,
};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

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

/// A server and two gateways on it, in one queue group: what a test of
/// requests many gateways could answer starts from.
pub struct TwoGateways {
    pub server: NatsServer,
    pub gateways: [Gateway; 2],
    pub client: async_nats::Client,
}

impl TwoGateways {
    pub async fn start() -> Self {
        let server = NatsServer::start().await;
        let a = Gateway::start(&server.url).await;
        let b = Gateway::start(&server.url).await;
        let client = client(&server.url).await;
        TwoGateways {
            server,
            gateways: [a, b],
            client,
        }
    }
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

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let resp = self
            .request(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .expect("/metrics answers");
        assert_eq!(resp.status(), 200);
        resp.text().await.expect("/metrics is text")
    }

    /// The value of one series of `/metrics`, such as
    /// `dagnats_store_batches_total{outcome="committed"}` (0 if absent).
    pub async fn metric(&self, series: &str) -> u64 {
        let prefix = format!("{series} ");
        self.metrics()
            .await
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or(0)
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
