//! A client generated from the committed OpenAPI document type-checks
//! against what a real gateway answers: every operation, every status the
//! document names, each response body assigned to the generated type of
//! its path, method, status and media type
//! (`paths[P][M]["responses"][S]["content"][C]`), then `tsc --noEmit`.
//!
//! openapi-typescript and TypeScript come from `openapi/package.json`;
//! `scripts/test` installs them (`scripts/install-npm-tools`). An object
//! literal with a field its type lacks fails the check, as does a status or
//! media type the document does not declare for the operation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common;
use crate::common::owner::{Answer, Owner};
use crate::common::{Gateway, Http, NatsServer, Setup};

const OPENAPI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi");

/// A program of `openapi/node_modules/.bin`.
fn npm_bin(name: &str) -> PathBuf {
    let bin = Path::new(OPENAPI).join("node_modules/.bin").join(name);
    assert!(
        bin.is_file(),
        "no {} : run scripts/test, which installs openapi/'s npm packages (scripts/install-npm-tools)",
        bin.display()
    );
    bin
}

/// Runs a program of `openapi/node_modules/.bin` and asserts it succeeds.
fn run_npm_bin(name: &str, args: &[&std::ffi::OsStr]) {
    let out = std::process::Command::new(npm_bin(name))
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("{name} starts: {err}"));
    assert!(
        out.status.success(),
        "{name} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One response as the test received it.
struct Seen {
    method: &'static str,
    template: &'static str,
    status: u16,
    /// The media type, without parameters.
    media: String,
    body: String,
}

/// The responses received so far.
#[derive(Default)]
struct Responses(Vec<Seen>);

impl Responses {
    /// Sends `req` (an operation `method template`), asserts it answers
    /// `status`, and keeps the response; its body as JSON, if it is.
    async fn expect(
        &mut self,
        (method, template): (&'static str, &'static str),
        req: RequestBuilder,
        status: u16,
    ) -> Value {
        let resp = tokio::time::timeout(Duration::from_secs(40), req.send())
            .await
            .expect("an answer within 40 s")
            .expect("an HTTP answer");
        let got = resp.status().as_u16();
        let media = media_type(&resp);
        let body = resp.text().await.expect("a body");
        assert_eq!(got, status, "{method} {template}: {body}");
        let json = serde_json::from_str(&body).unwrap_or(Value::Null);
        self.0.push(Seen {
            method,
            template,
            status,
            media,
            body,
        });
        json
    }

    /// `operation` on `key` as `holder` at `revision`, answered `status`.
    async fn on(
        &mut self,
        http: &Http,
        operation: (&'static str, &'static str),
        (key, holder, revision): (&str, &str, &Value),
        status: u16,
    ) -> Value {
        let req = call(http, operation, key, holder, revision);
        self.expect(operation, req, status).await
    }

    /// `GET /v1/events` up to its first event.
    async fn first_event(&mut self, req: RequestBuilder) {
        let mut resp = req.send().await.expect("an HTTP answer");
        assert_eq!(resp.status().as_u16(), 200);
        let media = media_type(&resp);
        let mut body = String::new();
        while !body.contains("\n\n") {
            let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
                .await
                .expect("an event within 10 s")
                .expect("the stream goes on")
                .expect("the stream is not over");
            body.push_str(std::str::from_utf8(&chunk).expect("UTF-8"));
        }
        self.0.push(Seen {
            method: "get",
            template: "/v1/events",
            status: 200,
            media,
            body,
        });
    }

    /// A TypeScript module that assigns every body to its generated type.
    fn typescript(&self) -> String {
        let mut ts = String::from("import type { paths } from \"./leases\";\n\n");
        for (i, seen) in self.0.iter().enumerate() {
            let value = if seen.media == "application/json" {
                let json: Value = serde_json::from_str(&seen.body)
                    .unwrap_or_else(|err| panic!("{} is not JSON: {err}", seen.body));
                serde_json::to_string_pretty(&json).unwrap()
            } else {
                serde_json::to_string(&seen.body).unwrap()
            };
            ts.push_str(&format!(
                "// {} {} {}\nexport const r{i}: paths[{:?}][{:?}][\"responses\"][{}][\"content\"][{:?}] = {value};\n\n",
                seen.method.to_uppercase(),
                seen.template,
                seen.status,
                seen.template,
                seen.method,
                seen.status,
                seen.media,
            ));
        }
        ts
    }
}

fn media_type(resp: &reqwest::Response) -> String {
    let value = resp.headers()["content-type"].to_str().expect("ASCII");
    value.split(';').next().unwrap().trim().to_string()
}

/// Every operation of the document (method, path template) and every error
/// status it names.
fn declared(doc: &Value) -> (BTreeSet<(String, String)>, BTreeSet<u16>) {
    let (mut operations, mut errors) = (BTreeSet::new(), BTreeSet::new());
    for (template, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            operations.insert((method.clone(), template.clone()));
            for status in operation["responses"].as_object().unwrap().keys() {
                let status: u16 = status.parse().expect("numeric statuses");
                if status >= 400 {
                    errors.insert(status);
                }
            }
        }
    }
    (operations, errors)
}

/// No revision: the operation takes none, or it is left out.
const NONE: Value = Value::Null;

const ACQUIRE: (&str, &str) = ("post", "/v1/leases/{key}/acquire");
const RENEW: (&str, &str) = ("post", "/v1/leases/{key}/renew");
const RELEASE: (&str, &str) = ("post", "/v1/leases/{key}/release");
const TRANSFER: (&str, &str) = ("post", "/v1/leases/{key}/transfer");
const OWNER: (&str, &str) = ("get", "/v1/leases/{key}");
const REVOKE: (&str, &str) = ("delete", "/v1/leases/{key}");
const LIST: (&str, &str) = ("get", "/v1/leases");
const FORWARD: (&str, &str) = ("post", "/v1/leases/{key}/forward");
const EVENTS: (&str, &str) = ("get", "/v1/events");
const RECENT: (&str, &str) = ("get", "/v1/events/recent");
const CLUSTER: (&str, &str) = ("get", "/v1/cluster");
const HISTORY: (&str, &str) = ("get", "/v1/history");
const KEY_HISTORY: (&str, &str) = ("get", "/v1/leases/{key}/history");
const HEALTHZ: (&str, &str) = ("get", "/healthz");
const READYZ: (&str, &str) = ("get", "/readyz");
const METRICS: (&str, &str) = ("get", "/metrics");

/// The request of `operation` on `key` (its `{key}`).
fn request(http: &Http, (method, template): (&str, &str), key: &str) -> RequestBuilder {
    let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
    http.request(method, &template.replace("{key}", key))
}

/// The HTTP front's body limit.
const BODY_LIMIT: usize = 12 << 20;

/// A JSON body one byte over the HTTP front's limit: the server has read it
/// all when it refuses it, so the answer is never lost to a write it cut.
fn oversized() -> String {
    let shell = "{\"holder\": \"\"}";
    format!(
        "{{\"holder\": \"{}\"}}",
        "x".repeat(BODY_LIMIT + 1 - shell.len())
    )
}

/// The JSON body of each POST operation on a lease, as `holder` at `revision`.
fn body(operation: (&str, &str), holder: &str, revision: &Value) -> Value {
    match operation {
        ACQUIRE => json!({"holder": holder, "ttl_ms": 30000}),
        RENEW => json!({"holder": holder, "revision": revision, "ttl_ms": 30000}),
        RELEASE => json!({"holder": holder, "revision": revision}),
        TRANSFER => json!({"holder": holder, "revision": revision, "to": "other", "ttl_ms": 30000}),
        FORWARD => json!({"payload": STANDARD.encode("ping"), "timeout_ms": 2000}),
        _ => unreachable!("not a POST on a lease"),
    }
}

/// The operations on one lease.
const ON_A_LEASE: [(&str, &str); 7] = [ACQUIRE, RENEW, RELEASE, TRANSFER, OWNER, REVOKE, FORWARD];

/// Sends `operation` on `key` as `holder` at `revision`.
fn call(
    http: &Http,
    operation: (&str, &str),
    key: &str,
    holder: &str,
    revision: &Value,
) -> RequestBuilder {
    let req = request(http, operation, key);
    match operation.0 {
        "post" => req.json(&body(operation, holder, revision)),
        _ => req,
    }
}

#[tokio::test]
async fn a_typescript_client_generated_from_the_document_type_checks_against_every_response() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let mut seen = Responses::default();

    // Answers that succeed.
    let lease = seen.on(&http, ACQUIRE, ("k", "h", &NONE), 200).await;
    let fence = lease["revision"].clone();
    seen.on(&http, ACQUIRE, ("k", "other", &NONE), 200).await;
    let renewed = seen.on(&http, RENEW, ("k", "h", &fence), 200).await;
    let fence = renewed["revision"].clone();
    seen.on(&http, OWNER, ("k", "", &NONE), 200).await;
    seen.on(&http, OWNER, ("free", "", &NONE), 200).await;
    seen.on(&http, LIST, ("", "", &NONE), 200).await;
    seen.expect(LIST, http.request(Method::GET, "/v1/leases?limit=1"), 200)
        .await;
    let _owner = Owner::start(&s.client, "h", Answer::Echo).await;
    seen.on(&http, FORWARD, ("k", "h", &fence), 200).await;
    let raw = request(&http, FORWARD, "k")
        .header("content-type", "application/octet-stream")
        .body("ping");
    seen.expect(FORWARD, raw, 200).await;
    let handed = seen.on(&http, TRANSFER, ("k", "h", &fence), 200).await;
    seen.on(&http, RELEASE, ("k", "other", &handed["revision"]), 200)
        .await;
    seen.on(&http, ACQUIRE, ("stuck", "h", &NONE), 200).await;
    seen.on(&http, REVOKE, ("stuck", "", &NONE), 200).await;
    // A stream resumed from revision 0 starts with every held key's state.
    seen.on(&http, ACQUIRE, ("e", "h", &NONE), 200).await;
    let events = http
        .request(Method::GET, "/v1/events?key=e")
        .header("Last-Event-ID", "0");
    seen.first_event(events).await;
    seen.on(&http, RECENT, ("", "", &NONE), 200).await;
    seen.on(&http, HISTORY, ("", "", &NONE), 200).await;
    seen.on(&http, KEY_HISTORY, ("k", "", &NONE), 200).await;
    seen.on(&http, CLUSTER, ("", "", &NONE), 200).await;
    seen.on(&http, HEALTHZ, ("", "", &NONE), 200).await;
    seen.on(&http, READYZ, ("", "", &NONE), 200).await;
    seen.on(&http, METRICS, ("", "", &NONE), 200).await;

    // 400 invalid: a key out of bounds, a list limit out of bounds, a
    // filter key out of bounds.
    for operation in ON_A_LEASE {
        seen.on(&http, operation, ("not.a.key", "h", &fence), 400)
            .await;
    }
    seen.expect(LIST, http.request(Method::GET, "/v1/leases?limit=0"), 400)
        .await;
    seen.expect(EVENTS, http.request(Method::GET, "/v1/events?key=a.b"), 400)
        .await;
    let history = http.request(Method::GET, "/v1/history?limit=0");
    seen.expect(HISTORY, history, 400).await;
    seen.on(&http, KEY_HISTORY, ("not.a.key", "", &NONE), 400)
        .await;

    // 409: a renew, release or transfer at a stale fence is lost; a forward
    // its owner rejects is owner_rejected.
    seen.on(&http, ACQUIRE, ("k", "h", &NONE), 200).await;
    for operation in [RENEW, RELEASE, TRANSFER] {
        seen.on(&http, operation, ("k", "h", &json!(1)), 409).await;
    }
    seen.on(&http, ACQUIRE, ("rejects", "r", &NONE), 200).await;
    let _rejecting = Owner::start(&s.client, "r", Answer::Reject).await;
    seen.on(&http, FORWARD, ("rejects", "r", &NONE), 409).await;

    // 404 not_held: nobody holds the key.
    seen.on(&http, FORWARD, ("free", "h", &NONE), 404).await;
    seen.on(&http, REVOKE, ("free", "", &NONE), 404).await;

    // 413: a body over the HTTP front's limit.
    for operation in [ACQUIRE, RENEW, RELEASE, TRANSFER, FORWARD] {
        let req = request(&http, operation, "k")
            .header("content-type", "application/json")
            .body(oversized());
        seen.expect(operation, req, 413).await;
    }

    // 502 owner_unavailable: nobody listens on the holder's inbox; 504
    // owner_timeout: the owner never answers.
    seen.on(&http, ACQUIRE, ("gone", "g", &NONE), 200).await;
    seen.on(&http, FORWARD, ("gone", "g", &NONE), 502).await;
    seen.on(&http, ACQUIRE, ("silent", "q", &NONE), 200).await;
    let _silent = Owner::start(&s.client, "q", Answer::Silent).await;
    let slow = request(&http, FORWARD, "silent").json(&json!({"payload": "", "timeout_ms": 100}));
    seen.expect(FORWARD, slow, 504).await;

    // 500 internal: the key's record does not parse.
    let seq = json!(common::records::write_corrupt(&s.client, "corrupt").await);
    for operation in [ACQUIRE, RENEW, RELEASE, TRANSFER, OWNER, FORWARD] {
        seen.on(&http, operation, ("corrupt", "h", &seq), 500).await;
    }

    // 401 unauthorized: every operation that takes a token, without it;
    // 403 forbidden: every operation on a key, by a principal of the policy
    // whose keys are others.
    let policy = tempfile::NamedTempFile::new().unwrap();
    let stranger = format!("{:x}", Sha256::digest("stranger"));
    std::fs::write(
        policy.path(),
        format!(
            "[[principal]]\nname = \"stranger\"\nhttp_token_sha256 = \"{stranger}\"\n\
             prefixes = [\"elsewhere-\"]\nrights = [\"admin\"]\n"
        ),
    )
    .unwrap();
    let guarded = Gateway::start_with(
        &s.server.url,
        &["--policy", policy.path().to_str().unwrap()],
        &[
            ("DAGNATS_HTTP_TOKEN", "w"),
            ("DAGNATS_HTTP_READ_TOKEN", "r"),
        ],
    )
    .await;
    let guarded = Http::of(&guarded).await;
    for operation in
        ON_A_LEASE
            .into_iter()
            .chain([LIST, EVENTS, RECENT, CLUSTER, HISTORY, KEY_HISTORY])
    {
        seen.on(&guarded, operation, ("k", "h", &fence), 401).await;
    }
    let stranger = guarded.with_token("stranger");
    for operation in ON_A_LEASE {
        seen.on(&stranger, operation, ("k", "h", &fence), 403).await;
    }
    let events = stranger.request(Method::GET, "/v1/events?key=k");
    seen.expect(EVENTS, events, 403).await;
    seen.on(&stranger, KEY_HISTORY, ("k", "", &NONE), 403).await;
    let history = stranger.request(Method::GET, "/v1/history?key=k");
    seen.expect(HISTORY, history, 403).await;

    // 501 unsupported: a server older than 2.11; 503 unavailable: one
    // without JetStream.
    let old = NatsServer::old().await;
    let without = NatsServer::without_jetstream().await;
    for (server, status, said) in [
        (&old, 501, "older than 2.11"),
        (&without, 503, "leases unavailable"),
    ] {
        let gateway = Gateway::spawn(&server.url, &[], &[]);
        gateway.wait_serving().await;
        gateway
            .log
            .wait_for(said, Duration::from_secs(15))
            .await
            .expect("the gateway says what it found");
        let http = Http::of(&gateway).await;
        let reads = [LIST, EVENTS, RECENT, HISTORY, KEY_HISTORY];
        for operation in ON_A_LEASE.into_iter().chain(reads) {
            seen.on(&http, operation, ("k", "h", &json!(1)), status)
                .await;
        }
        seen.on(&http, READYZ, ("", "", &NONE), 503).await;
    }

    // Every operation and every error status of the document was seen.
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(OPENAPI).join("leases.json")).unwrap(),
    )
    .unwrap();
    let (operations, errors) = declared(&doc);
    let covered: BTreeSet<(String, String)> = seen
        .0
        .iter()
        .map(|s| (s.method.to_string(), s.template.to_string()))
        .collect();
    assert_eq!(
        covered, operations,
        "operations seen against the document's"
    );
    let statuses: BTreeSet<u16> = seen.0.iter().map(|s| s.status).collect();
    let unseen: Vec<&u16> = errors.difference(&statuses).collect();
    assert!(unseen.is_empty(), "error statuses never seen: {unseen:?}");

    // The generated client, and the responses assigned to its types.
    let dir = tempfile::tempdir().unwrap();
    let (document, client) = (
        Path::new(OPENAPI).join("leases.json"),
        dir.path().join("leases.ts"),
    );
    run_npm_bin(
        "openapi-typescript",
        &[
            document.as_os_str(),
            "--output".as_ref(),
            client.as_os_str(),
        ],
    );
    std::fs::write(dir.path().join("responses.ts"), seen.typescript()).unwrap();
    std::fs::write(
        dir.path().join("tsconfig.json"),
        json!({
            "compilerOptions": {
                "strict": true,
                "noEmit": true,
                "target": "ES2022",
                "module": "ES2022",
                "moduleResolution": "bundler",
                "types": [],
            },
            "files": ["responses.ts"],
        })
        .to_string(),
    )
    .unwrap();
    let project = dir.path().join("tsconfig.json");
    run_npm_bin("tsc", &["--project".as_ref(), project.as_os_str()]);
}
