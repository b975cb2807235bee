//! `GET /v1/events`: Server-Sent Events of every change, from one NATS
//! subscription per gateway; filters, resume, heartbeats, slow clients.

use std::time::Duration;

use crate::common;
use crate::common::sse::{next, open};
use crate::common::{Gateway, Http, NatsServer, assert_error, wait_tombstone_gone};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn setup() -> (NatsServer, Gateway, async_nats::Client, Http) {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let client = common::client(&server.url).await;
    let http = Http::of(&gateway).await;
    (server, gateway, client, http)
}

/// Every lease here has holder "h".
async fn acquire(http: &Http, key: &str, ttl_ms: u64) -> Value {
    http.acquire(key, "h", ttl_ms).await.body
}

async fn renew(http: &Http, lease: &Value) -> Value {
    let key = lease["key"].as_str().unwrap();
    http.renew(key, "h", &lease["revision"], 15000).await.body
}

async fn release(http: &Http, lease: &Value) -> Value {
    let key = lease["key"].as_str().unwrap();
    http.release(key, "h", &lease["revision"]).await.body
}

/// A grant without `granted`: the lease, as events carry it.
fn lease_of(grant: &Value) -> Value {
    let mut lease = grant.clone();
    lease.as_object_mut().unwrap().remove("granted");
    lease
}

fn rev(v: &Value) -> u64 {
    v["revision"].as_u64().unwrap()
}

/// The event a grant (`acquired`, `renewed`) makes, as [`next`] reads it.
fn granted(name: &str, grant: &Value) -> (String, u64, Value) {
    (name.into(), rev(grant), lease_of(grant))
}

/// The `released` event of `key` that a release reply `x` makes.
fn released(key: &str, x: &Value) -> (String, u64, Value) {
    let data = json!({"key": key, "revision": rev(x), "holder": "h"});
    ("released".into(), rev(x), data)
}

#[tokio::test]
async fn changes_arrive_in_order_named_with_the_revision_as_id() {
    let (_server, _gateway, _client, http) = setup().await;
    let mut events = open(&http, "/v1/events", None).await;
    let a = acquire(&http, "k", 15000).await;
    let r = renew(&http, &a).await;
    let x = release(&http, &r).await;
    assert_eq!(next(&mut events).await, granted("acquired", &a));
    assert_eq!(next(&mut events).await, granted("renewed", &r));
    assert_eq!(next(&mut events).await, released("k", &x));
}

#[tokio::test]
async fn a_transfer_is_an_acquired_event_with_the_new_holders_lease_and_the_previous_holder() {
    let (_server, _gateway, _client, http) = setup().await;
    let mut events = open(&http, "/v1/events?ownership=true", None).await;
    let a = acquire(&http, "k", 15000).await;
    let moved = http.transfer("k", "h", rev(&a), "h2", 15000).await.body;
    assert_eq!(moved["holder"], "h2", "{moved}");
    assert_eq!(next(&mut events).await, granted("acquired", &a));
    let (name, id, mut data) = granted("acquired", &moved);
    data["previous_holder"] = json!("h");
    assert_eq!(next(&mut events).await, (name, id, data));
}

#[tokio::test]
async fn an_expired_lease_is_an_expired_event_naming_the_last_holder() {
    let (_server, _gateway, _client, http) = setup().await;
    let mut events = open(&http, "/v1/events", None).await;
    let a = acquire(&http, "k", 1000).await;
    assert_eq!(next(&mut events).await.0, "acquired");
    let (name, id, data) = next(&mut events).await;
    assert_eq!(name, "expired");
    assert!(id > rev(&a));
    assert_eq!(data, json!({"key": "k", "revision": id, "holder": "h"}));
}

#[tokio::test]
async fn a_released_key_never_shows_as_expired() {
    let (_server, _gateway, client, http) = setup().await;
    let mut events = open(&http, "/v1/events", None).await;
    let a = acquire(&http, "k", 1000).await;
    release(&http, &a).await;
    assert_eq!(next(&mut events).await.0, "acquired");
    assert_eq!(next(&mut events).await.0, "released");
    // Once the server has removed the tombstone (its TTL is the lease's),
    // a marker would have been written; the next event must be our own.
    wait_tombstone_gone(&client, "k").await;
    let sentinel = acquire(&http, "sentinel", 15000).await;
    assert_eq!(next(&mut events).await, granted("acquired", &sentinel));
}

#[tokio::test]
async fn the_key_filter_keeps_one_key() {
    let (_server, _gateway, _client, http) = setup().await;
    let mut events = open(&http, "/v1/events?key=b", None).await;
    acquire(&http, "a", 15000).await;
    let b = acquire(&http, "b", 15000).await;
    assert_eq!(next(&mut events).await, granted("acquired", &b));
}

#[tokio::test]
async fn the_ownership_filter_drops_renewals() {
    let (_server, _gateway, _client, http) = setup().await;
    let mut events = open(&http, "/v1/events?ownership=true", None).await;
    let a = acquire(&http, "k", 15000).await;
    let r = renew(&http, &a).await;
    let x = release(&http, &r).await;
    assert_eq!(next(&mut events).await.1, rev(&a));
    assert_eq!(next(&mut events).await, released("k", &x));
}

#[tokio::test]
async fn a_bad_filter_or_last_event_id_is_400_invalid() {
    let (_server, _gateway, _client, http) = setup().await;
    common::assert_error(&http.get("/v1/events?key=a.b").await, 400, "invalid");
    common::assert_error(
        &http.get("/v1/events?ownership=maybe").await,
        400,
        "invalid",
    );
    let req = http
        .request(reqwest::Method::GET, "/v1/events")
        .header("Last-Event-ID", "seven");
    common::assert_error(&http.send(req).await, 400, "invalid");
}

#[tokio::test]
async fn last_event_id_resumes_with_the_current_state_then_live() {
    let (_server, _gateway, _client, http) = setup().await;
    let a = acquire(&http, "a", 15000).await;
    let b = acquire(&http, "b", 15000).await;
    let b2 = renew(&http, &b).await;
    let c = acquire(&http, "c", 15000).await;
    // The client saw up to `a`: it missed b (now renewed) and c.
    let mut events = open(&http, "/v1/events", Some(rev(&a))).await;
    assert_eq!(next(&mut events).await, granted("renewed", &b2));
    assert_eq!(next(&mut events).await, granted("acquired", &c));
    let x = release(&http, &a).await;
    assert_eq!(next(&mut events).await, released("a", &x));
}

#[tokio::test]
async fn heartbeats_keep_an_idle_stream_alive_uncompressed() {
    let server = NatsServer::start().await;
    // Once the bucket is ready: before, events answer 503 like every call.
    let gateway =
        Gateway::start_with(&server.url, &[], &[("DAGNATS_SSE_HEARTBEAT_MS", "200")]).await;
    let http = Http::of(&gateway).await;
    // Browsers accept gzip; a compressed stream would sit in the encoder.
    let resp = http
        .request(reqwest::Method::GET, "/v1/events")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .expect("a heartbeat within 5 s")
        .unwrap()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&chunk), ": heartbeat\n\n");
}

#[tokio::test]
async fn a_slow_client_is_dropped_not_buffered() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start_with(&server.url, &[], &[("DAGNATS_SSE_BUFFER", "16")]).await;
    let addr = gateway
        .http_url()
        .await
        .trim_start_matches("http://")
        .to_string();
    // A client that reads nothing after the headers, with a tiny window.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(1024).unwrap();
    let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
    stream
        .write_all(format!("GET /v1/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // Changes of ~450 bytes each, far more than the socket buffers and the
    // 16-change buffer hold.
    let client = common::client(&server.url).await;
    let holder = "h".repeat(128);
    for batch in 0..20 {
        let calls = (0..100).map(|i| {
            let key = format!("{:0>128}", batch * 100 + i);
            common::call(
                &client,
                "acquire",
                json!({"key": key, "holder": holder, "ttl_ms": 60000}),
            )
        });
        futures::future::join_all(calls).await;
        if gateway.log.text().contains("too slow: dropped") {
            break;
        }
    }
    gateway
        .log
        .wait_for("too slow: dropped", Duration::from_secs(10))
        .await
        .expect("the slow client is dropped");
}

#[tokio::test]
async fn a_client_watching_one_key_is_not_dropped_by_a_burst_on_other_keys() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start_with(&server.url, &[], &[("DAGNATS_SSE_BUFFER", "16")]).await;
    let http = Http::of(&gateway).await;
    let mut quiet = open(&http, "/v1/events?key=quiet", None).await;
    // 1,000 changes to other keys: far more than the 16 a client may have
    // waiting, written as fast as the gateway takes them.
    let client = common::client(&server.url).await;
    for batch in 0..10 {
        let calls = (0..100).map(|i| {
            let key = format!("other{}", batch * 100 + i);
            common::call(
                &client,
                "acquire",
                json!({"key": key, "holder": "h", "ttl_ms": 60000}),
            )
        });
        for grant in futures::future::join_all(calls).await {
            assert_eq!(grant["granted"], true, "{grant}");
        }
    }
    let q = acquire(&http, "quiet", 15000).await;
    assert_eq!(next(&mut quiet).await, granted("acquired", &q));
    assert!(!gateway.log.text().contains("too slow"));
}

/// The `dagnats_sse_clients` gauge: clients registered for changes.
async fn sse_clients(http: &Http) -> u64 {
    let resp = http.request(reqwest::Method::GET, "/metrics").send().await;
    let text = resp.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("dagnats_sse_clients "))
        .expect("the gauge is rendered")
        .parse()
        .expect("a count")
}

#[tokio::test]
async fn clients_are_unregistered_when_they_disconnect() {
    let (_server, _gateway, _client, http) = setup().await;
    let clients = [
        open(&http, "/v1/events", None).await,
        open(&http, "/v1/events?ownership=true", None).await,
        open(&http, "/v1/events?key=a", None).await,
        open(&http, "/v1/events?key=a&ownership=true", None).await,
        open(&http, "/v1/events?key=b", None).await,
    ];
    assert_eq!(sse_clients(&http).await, 5);
    drop(clients);
    common::eventually(
        "every client unregistered",
        Duration::from_secs(10),
        || async { (sse_clients(&http).await == 0).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn an_open_event_stream_ends_at_shutdown_and_the_gateway_exits_0() {
    let server = NatsServer::start().await;
    let gateway = Gateway::start(&server.url).await;
    let http = Http::of(&gateway).await;
    let resp = http
        .request(reqwest::Method::GET, "/v1/events")
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let started = std::time::Instant::now();
    let status = gateway.terminate().await;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // The stream was ended, not cut: the body completes cleanly.
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = body.next().await {
            chunk.expect("the stream ends cleanly");
        }
    })
    .await;
    assert!(rest.is_ok(), "the event stream stayed open after shutdown");
}

#[tokio::test]
async fn events_on_an_old_server_answer_501_unsupported() {
    let server = NatsServer::old().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway
        .log
        .wait_for("older than 2.11", Duration::from_secs(15))
        .await
        .expect("gateway notices the old server");
    let http = Http::of(&gateway).await;
    for path in ["/v1/events", "/v1/events/recent"] {
        assert_error(&http.get(path).await, 501, "unsupported");
    }
}

#[tokio::test]
async fn events_with_jetstream_down_answer_503_unavailable_until_it_is_back() {
    let mut server = NatsServer::without_jetstream().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway.wait_serving().await;
    let http = Http::of(&gateway).await;
    for path in ["/v1/events", "/v1/events/recent"] {
        assert_error(&http.get(path).await, 503, "unavailable");
    }
    server.restart_with(common::ServerOptions::default()).await;
    gateway.wait_bucket_ready().await;
    common::eventually("events to be served", Duration::from_secs(20), || async {
        let recent = http.get("/v1/events/recent").await;
        (recent.status == 200).then_some(())
    })
    .await;
    let mut events = open(&http, "/v1/events", None).await;
    let grant = acquire(&http, "back", 15000).await;
    assert_eq!(next(&mut events).await, granted("acquired", &grant));
}

#[tokio::test]
async fn a_resume_skips_a_corrupt_record_and_sends_every_other_lease() {
    let (_server, _gateway, client, http) = setup().await;
    let a = acquire(&http, "a", 15000).await;
    common::records::write_corrupt(&client, "b").await;
    let c = acquire(&http, "c", 15000).await;
    let mut events = open(&http, "/v1/events", Some(rev(&a) - 1)).await;
    assert_eq!(next(&mut events).await, granted("acquired", &a));
    assert_eq!(next(&mut events).await, granted("acquired", &c));
    let x = release(&http, &a).await;
    assert_eq!(next(&mut events).await, released("a", &x));
}
