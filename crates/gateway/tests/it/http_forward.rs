//! `POST /v1/leases/{key}/forward`: JSON mode returns the NATS body, raw
//! mode the owner's bytes with `Dagnats-Lease-Holder` and
//! `Dagnats-Lease-Fence`; failures carry the owner last tried.

use std::time::{Duration, Instant};

use crate::common;
use crate::common::owner::{Answer, Owner};
use crate::common::takeover::{KEY, Takeover};
use crate::common::{Gateway, Http, HttpReply, NatsServer, Setup, assert_error};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::Method;
use serde_json::{Value, json};

async fn acquire(http: &Http, key: &str, holder: &str) -> Value {
    let a = http.acquire(key, holder, 30000).await;
    assert_eq!(a.body["granted"], true, "{}", a.body);
    a.body
}

async fn setup() -> (Setup, Http) {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    (s, http)
}

/// A raw forward of `body` with `query`.
async fn raw(http: &Http, key: &str, query: &str, body: Vec<u8>) -> reqwest::Response {
    http.request(Method::POST, &format!("/v1/leases/{key}/forward{query}"))
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// A JSON forward of an empty payload to the owner of `k`, within 2 s.
async fn forward_empty(http: &Http) -> HttpReply {
    let body = json!({"payload": "", "timeout_ms": 2000});
    http.post("/v1/leases/k/forward", body).await
}

fn assert_owner(reply: &HttpReply, holder: &str, lease: &Value) {
    assert_eq!(reply.body["holder"], holder, "{}", reply.body);
    assert_eq!(reply.body["revision"], lease["revision"], "{}", reply.body);
}

#[tokio::test]
async fn json_forward_gives_the_same_body_as_nats() {
    let (s, http) = setup().await;
    let lease = acquire(&http, "k", "h1").await;
    let _owner = Owner::start(&s.client, "h1", Answer::Echo).await;
    let request = json!({"payload": STANDARD.encode("ping"), "timeout_ms": 2000});
    let via_http = http.post("/v1/leases/k/forward", request.clone()).await;
    assert_eq!(via_http.status, 200);
    let mut nats_request = request;
    nats_request["key"] = json!("k");
    let via_nats = s.call("forward", nats_request).await;
    assert_eq!(via_http.body, via_nats);
    let payload = STANDARD
        .decode(via_http.body["payload"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        payload,
        format!("echo:{}:ping", lease["revision"]).into_bytes()
    );
}

#[tokio::test]
async fn raw_forward_returns_the_owners_bytes_with_holder_and_fence_headers() {
    let (s, http) = setup().await;
    let lease = acquire(&http, "k", "h1").await;
    let _owner = Owner::start(&s.client, "h1", Answer::Echo).await;
    let resp = raw(&http, "k", "", b"\x00raw\xff".to_vec()).await;
    assert_eq!(resp.status(), 200);
    let fence = lease["revision"].to_string();
    assert_eq!(resp.headers()["dagnats-lease-holder"], "h1");
    assert_eq!(resp.headers()["dagnats-lease-fence"], fence.as_str());
    assert!(
        !resp.headers().contains_key("owner-secret"),
        "owner reply headers are not relayed"
    );
    let mut expected = format!("echo:{fence}:").into_bytes();
    expected.extend_from_slice(b"\x00raw\xff");
    assert_eq!(resp.bytes().await.unwrap().to_vec(), expected);
}

#[tokio::test]
async fn raw_forward_takes_its_timeout_from_the_query() {
    let (s, http) = setup().await;
    let lease = acquire(&http, "k", "h1").await;
    let owner = Owner::start(&s.client, "h1", Answer::Silent).await;
    let started = Instant::now();
    let resp = raw(&http, "k", "?timeout_ms=300", b"x".to_vec()).await;
    let reply = common::HttpReply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.json().await.unwrap(),
    };
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_error(&reply, 504, "owner_timeout");
    assert_owner(&reply, "h1", &lease);
    assert_eq!(owner.received(), 1);
}

#[tokio::test]
async fn a_bad_raw_timeout_is_400_invalid() {
    let (_s, http) = setup().await;
    acquire(&http, "k", "h1").await;
    for query in ["?timeout_ms=50", "?timeout_ms=abc", "?timeout_ms=30001"] {
        let resp = raw(&http, "k", query, b"x".to_vec()).await;
        assert_eq!(resp.status(), 400, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["kind"], "invalid", "{query}");
    }
}

#[tokio::test]
async fn forward_of_a_free_key_is_404_not_held() {
    let (_s, http) = setup().await;
    let reply = http
        .post("/v1/leases/nobody/forward", json!({"payload": ""}))
        .await;
    assert_error(&reply, 404, "not_held");
}

#[tokio::test]
async fn no_responder_is_502_owner_unavailable() {
    let (_s, http) = setup().await;
    let lease = acquire(&http, "k", "gone").await;
    let reply = forward_empty(&http).await;
    assert_error(&reply, 502, "owner_unavailable");
    assert_owner(&reply, "gone", &lease);
}

/// As over NATS (tests/forward.rs): the re-read after no responders leads
/// to the holder that took the key over in between.
#[tokio::test]
async fn no_responder_then_the_new_owner_succeeds_with_200() {
    let t = Takeover::start().await;
    let http = Http::of(&t.gateway).await;
    let reply = http
        .post(
            &format!("/v1/leases/{KEY}/forward"),
            Takeover::forward_body(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    t.assert_the_new_owner_answered(&reply.body);
}

#[tokio::test]
async fn stale_rejects_are_409_owner_rejected() {
    let (s, http) = setup().await;
    let lease = acquire(&http, "k", "h1").await;
    let owner = Owner::start(&s.client, "h1", Answer::Reject).await;
    let reply = forward_empty(&http).await;
    assert_error(&reply, 409, "owner_rejected");
    assert_owner(&reply, "h1", &lease);
    assert_eq!(owner.received(), 3);
}

#[tokio::test]
async fn a_payload_that_is_not_base64_is_400_invalid() {
    let (_s, http) = setup().await;
    let reply = http
        .post("/v1/leases/k/forward", json!({"payload": "%%%"}))
        .await;
    assert_error(&reply, 400, "invalid");
}

/// A server whose max_payload is 4096 bytes, and a gateway on it.
async fn small_server() -> (Setup, Http, tempfile::TempDir) {
    let (s, config) = Setup::with_max_payload(4096).await;
    let http = Http::of(&s.gateway).await;
    (s, http, config)
}

#[tokio::test]
async fn a_raw_body_over_max_payload_is_413_payload_too_large() {
    let (s, http, _config) = small_server().await;
    let lease = acquire(&http, "k", "h1").await;
    let owner = Owner::start(&s.client, "h1", Answer::Echo).await;
    let resp = raw(&http, "k", "", vec![b'x'; 5000]).await;
    let reply = common::HttpReply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.json().await.unwrap(),
    };
    assert_error(&reply, 413, "payload_too_large");
    assert_owner(&reply, "h1", &lease);
    assert_eq!(owner.received(), 0);
}

#[tokio::test]
async fn an_owner_reply_too_large_once_base64_encoded_is_502_reply_too_large() {
    let (s, http, _config) = small_server().await;
    let lease = acquire(&http, "k", "big").await;
    let _owner = Owner::start(&s.client, "big", Answer::Bytes(3500)).await;
    let reply = forward_empty(&http).await;
    assert_error(&reply, 502, "reply_too_large");
    assert_owner(&reply, "big", &lease);
}

#[tokio::test]
async fn a_raw_forward_returns_a_reply_that_would_be_too_large_in_base64() {
    let (s, http, _config) = small_server().await;
    let lease = acquire(&http, "k", "big").await;
    let _owner = Owner::start(&s.client, "big", Answer::Bytes(3500)).await;
    // 3500 bytes fit the owner hop (4096); only base64 would not fit.
    let resp = raw(&http, "k", "?timeout_ms=2000", b"x".to_vec()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["dagnats-lease-fence"],
        lease["revision"].to_string().as_str()
    );
    assert_eq!(resp.bytes().await.unwrap().to_vec(), vec![b'x'; 3500]);
}

#[tokio::test]
async fn a_forward_still_running_when_the_shutdown_grace_ends_answers_500_internal() {
    let server = NatsServer::start().await;
    let env = [("DAGNATS_SHUTDOWN_GRACE_MS", "200")];
    let gateway = Gateway::start_with(&server.url, &[], &env).await;
    let http = Http::of(&gateway).await;
    let c = common::client(&server.url).await;
    acquire(&http, "k", "mute").await;
    let owner = Owner::start(&c, "mute", Answer::Silent).await;
    let pending = tokio::spawn({
        let http = http.clone();
        async move {
            let body = json!({"payload": "", "timeout_ms": 30000});
            http.post("/v1/leases/k/forward", body).await
        }
    });
    owner.until_received(1).await;
    let status = gateway.terminate().await;
    assert!(status.success(), "exit status {status}");
    // Below the forward's own 30 s: only the grace can answer first.
    let reply = tokio::time::timeout(Duration::from_secs(20), pending)
        .await
        .expect("answered before the forward's own timeout")
        .unwrap();
    assert_error(&reply, 500, "internal");
    let error = reply.body["error"].as_str().unwrap();
    assert!(error.contains("the gateway is stopping"), "{}", reply.body);
}
