//! Auth, health, readiness, metrics and the HTTP layers (request id,
//! compression, CORS).

use crate::common::{Gateway, Http, NatsServer, Setup, assert_error};
use reqwest::Method;
use serde_json::json;

const WRITE: &str = "write-secret-7f3a";
const READ: &str = "read-secret-19bc";

async fn gateway_with(env: &[(&str, &str)]) -> (NatsServer, Gateway, Http) {
    let server = NatsServer::start().await;
    let gateway = Gateway::start_with(&server.url, &[], env).await;
    let http = Http::of(&gateway).await;
    (server, gateway, http)
}

fn acquire_body() -> serde_json::Value {
    json!({"holder": "h", "ttl_ms": 15000})
}

#[tokio::test]
async fn with_a_write_token_mutations_need_it_and_reads_stay_open() {
    let (_server, gateway, http) = gateway_with(&[("DAGNATS_HTTP_TOKEN", WRITE)]).await;
    let missing = http.post("/v1/leases/k/acquire", acquire_body()).await;
    assert_error(&missing, 401, "unauthorized");
    assert_eq!(missing.headers["www-authenticate"], "Bearer");
    let wrong = http
        .with_token("nope")
        .post("/v1/leases/k/acquire", acquire_body())
        .await;
    assert_error(&wrong, 401, "unauthorized");
    let forward = http
        .post("/v1/leases/k/forward", json!({"payload": ""}))
        .await;
    assert_error(&forward, 401, "unauthorized");
    let ok = http
        .with_token(WRITE)
        .post("/v1/leases/k/acquire", acquire_body())
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(http.get("/v1/leases/k").await.status, 200);
    assert_eq!(http.get("/v1/leases").await.status, 200);
    assert!(!gateway.log.text().contains(WRITE), "the token was logged");
}

#[tokio::test]
async fn with_a_read_token_reads_and_events_need_it() {
    let (_server, gateway, http) = gateway_with(&[
        ("DAGNATS_HTTP_TOKEN", WRITE),
        ("DAGNATS_HTTP_READ_TOKEN", READ),
    ])
    .await;
    for path in ["/v1/leases/k", "/v1/leases", "/v1/events"] {
        assert_error(&http.get(path).await, 401, "unauthorized");
        assert_error(
            &http.with_token("nope").get(path).await,
            401,
            "unauthorized",
        );
    }
    let reader = http.with_token(READ);
    assert_eq!(reader.get("/v1/leases/k").await.status, 200);
    assert_eq!(reader.get("/v1/leases").await.status, 200);
    let events = reader
        .request(Method::GET, "/v1/events")
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    // The write token reads too; the read token does not write.
    assert_eq!(http.with_token(WRITE).get("/v1/leases").await.status, 200);
    let write = reader.post("/v1/leases/k/acquire", acquire_body()).await;
    assert_error(&write, 401, "unauthorized");
    // Probes need no token.
    assert_eq!(http.get("/healthz").await.status, 200);
    assert_eq!(http.get("/readyz").await.status, 200);
    let log = gateway.log.text();
    assert!(
        !log.contains(WRITE) && !log.contains(READ),
        "a token was logged"
    );
}

#[tokio::test]
async fn an_empty_token_setting_stops_the_start() {
    let server = NatsServer::start().await;
    let mut gateway = Gateway::spawn(&server.url, &[], &[("DAGNATS_HTTP_TOKEN", "")]);
    let status = gateway
        .wait_exit(std::time::Duration::from_secs(10))
        .await
        .expect("the gateway refuses to start");
    assert!(!status.success());
    assert!(gateway.log.text().contains("DAGNATS_HTTP_TOKEN is empty"));
}

/// Every address beyond loopback, with `:0` so tests do not clash.
const ANY_ADDRESS: (&str, &str) = ("DAGNATS_HTTP_ADDR", "0.0.0.0:0");

/// Every address beyond loopback on a free port: a gateway that starts
/// is then polled for readiness where it listens (`:0` cannot be).
fn any_address_port() -> String {
    format!("0.0.0.0:{}", dagnats_leases_testkit::free_port())
}

#[tokio::test]
async fn a_non_loopback_address_without_a_write_token_refuses_to_start() {
    let server = NatsServer::start().await;
    let cases: [&[(&str, &str)]; 3] = [
        &[ANY_ADDRESS],
        // A read token leaves writes open.
        &[ANY_ADDRESS, ("DAGNATS_HTTP_READ_TOKEN", READ)],
        &[ANY_ADDRESS, ("DAGNATS_HTTP_INSECURE", "0")],
    ];
    for env in cases {
        let mut gateway = Gateway::spawn(&server.url, &[], env);
        let status = gateway
            .wait_exit(std::time::Duration::from_secs(10))
            .await
            .expect("the gateway refuses to start");
        assert!(!status.success(), "{env:?}: {status}");
        let log = gateway.log.text();
        for setting in ["DAGNATS_HTTP_TOKEN", "--http-token", "--http-insecure"] {
            assert!(log.contains(setting), "{env:?}: names {setting}: {log}");
        }
        assert!(!log.contains("HTTP listening"), "{env:?}: {log}");
    }
}

#[tokio::test]
async fn a_non_loopback_address_with_a_write_token_starts_and_asks_for_it() {
    let addr = any_address_port();
    let (_server, _gateway, http) =
        gateway_with(&[("DAGNATS_HTTP_ADDR", &addr), ("DAGNATS_HTTP_TOKEN", WRITE)]).await;
    let missing = http.post("/v1/leases/k/acquire", acquire_body()).await;
    assert_error(&missing, 401, "unauthorized");
    let ok = http
        .with_token(WRITE)
        .post("/v1/leases/k/acquire", acquire_body())
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[tokio::test]
async fn http_insecure_serves_a_non_loopback_address_without_a_token() {
    let server = NatsServer::start().await;
    type Way<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let (first, second) = (any_address_port(), any_address_port());
    let ways: [Way; 2] = [
        (&["--http-insecure"], &[("DAGNATS_HTTP_ADDR", &first)]),
        (
            &[],
            &[
                ("DAGNATS_HTTP_ADDR", &second),
                ("DAGNATS_HTTP_INSECURE", "1"),
            ],
        ),
    ];
    for (i, (args, env)) in ways.into_iter().enumerate() {
        let gateway = Gateway::start_with(&server.url, args, env).await;
        let http = Http::of(&gateway).await;
        let key = format!("/v1/leases/open-{i}/acquire");
        let ok = http.post(&key, acquire_body()).await;
        assert_eq!(ok.status, 200, "{args:?} {env:?}: {}", ok.body);
    }
}

#[tokio::test]
async fn healthz_and_readyz_answer_200_when_ready() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let health = http.get("/healthz").await;
    assert_eq!((health.status, health.body), (200, json!({"status": "ok"})));
    let ready = http.get("/readyz").await;
    assert_eq!(
        (ready.status, ready.body),
        (200, json!({"status": "ready"}))
    );
}

#[tokio::test]
async fn metrics_count_both_fronts_by_op_and_kind() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    http.post("/v1/leases/k/acquire", acquire_body()).await;
    http.post(
        "/v1/leases/k/renew",
        json!({"holder": "h", "revision": 999, "ttl_ms": 1000}),
    )
    .await;
    s.call("owner", json!({"key": "k"})).await;
    http.post(
        "/v1/leases/k/forward",
        json!({"payload": "", "timeout_ms": 500}),
    )
    .await;
    let _events = http
        .request(Method::GET, "/v1/events")
        .send()
        .await
        .unwrap();
    let resp = http.request(Method::GET, "/metrics").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = resp.text().await.unwrap();
    for line in [
        r#"dagnats_requests_total{front="http",op="acquire",kind="ok"} 1"#,
        r#"dagnats_requests_total{front="http",op="renew",kind="lost"} 1"#,
        r#"dagnats_requests_total{front="nats",op="owner",kind="ok"} 1"#,
        r#"dagnats_requests_total{front="http",op="forward",kind="owner_unavailable"} 1"#,
        r#"dagnats_forward_attempts_total{outcome="no_responders"} 3"#,
        "dagnats_sse_clients 1",
        "dagnats_nats_connected 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert!(
        text.contains(
            r#"dagnats_request_duration_seconds_bucket{front="nats",op="owner",le="0.1"}"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let reply = http.get("/v1/leases/k").await;
    assert!(!reply.headers["x-request-id"].is_empty());
    let mine = http
        .request(Method::GET, "/nowhere")
        .header("x-request-id", "trace-me")
        .send()
        .await
        .unwrap();
    assert_eq!(mine.headers()["x-request-id"], "trace-me");
}

#[tokio::test]
async fn json_is_gzipped_for_clients_that_accept_it() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    for i in 0..20 {
        http.post(&format!("/v1/leases/key-{i}/acquire"), acquire_body())
            .await;
    }
    let resp = http
        .request(Method::GET, "/v1/leases")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-encoding"], "gzip");
}

/// `GET /v1/leases` as a page served from `origin` sends it.
async fn get_leases_from(http: &Http, origin: &str) -> reqwest::Response {
    http.request(Method::GET, "/v1/leases")
        .header("origin", origin)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn cors_headers_only_when_origins_are_configured() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let plain = get_leases_from(&http, "https://ops.example").await;
    assert!(plain.headers().get("access-control-allow-origin").is_none());

    let (_server, _gateway, http) =
        gateway_with(&[("DAGNATS_HTTP_CORS_ORIGINS", "https://ops.example")]).await;
    let allowed = get_leases_from(&http, "https://ops.example").await;
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://ops.example"
    );
    let other = get_leases_from(&http, "https://elsewhere.example").await;
    assert!(other.headers().get("access-control-allow-origin").is_none());
}
