//! The HTTP lease API: the same bodies as NATS, and every failure as
//! `{"error", "kind"}` with the status of its kind.

use crate::common;
use crate::common::{Gateway, Http, HttpReply, NatsServer, Setup, assert_error};
use futures::StreamExt as _;
use reqwest::Method;
use serde_json::{Value, json};

async fn setup() -> (Setup, Http) {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    (s, http)
}

fn rev(v: &Value) -> u64 {
    v["revision"].as_u64().expect("revision")
}

/// `POST /v1/leases/k/acquire` with a body as given, declared as `content_type`.
async fn acquire_raw(http: &Http, content_type: &str, body: impl Into<reqwest::Body>) -> HttpReply {
    let req = http
        .request(Method::POST, "/v1/leases/k/acquire")
        .header("content-type", content_type)
        .body(body);
    http.send(req).await
}

/// The keys of a list reply, in its order.
fn keys(list: &Value) -> Vec<&str> {
    list["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn http_and_nats_give_identical_bodies_for_the_same_scenario() {
    let (s, http) = setup().await;
    // Acquire over HTTP, then both fronts read the same lease.
    let granted = http.acquire("k", "h1", 15000).await;
    assert_eq!(granted.status, 200);
    let via_nats = s.owner("k").await;
    let via_http = http.get("/v1/leases/k").await;
    assert_eq!(via_http.status, 200);
    assert_eq!(via_http.body, via_nats);
    // A second holder is refused the same way by both.
    let refused_nats = s.acquire("k", "h2", 15000).await;
    let refused_http = http.acquire("k", "h2", 15000).await;
    assert_eq!(refused_http.status, 200);
    assert_eq!(refused_http.body, refused_nats);
    // The same invalid request, the same error body.
    let bad_nats = s.acquire("k", "h2", 1500).await;
    let bad_http = http.acquire("k", "h2", 1500).await;
    assert_error(&bad_http, 400, "invalid");
    assert_eq!(bad_http.body, bad_nats);
    // The same stale renew, the same `lost`.
    let stale = rev(&granted.body) + 100;
    let lost_nats = s.renew("k", "h1", stale, 15000).await;
    let lost_http = http.renew("k", "h1", stale, 15000).await;
    assert_error(&lost_http, 409, "lost");
    assert_eq!(lost_http.body, lost_nats);
}

#[tokio::test]
async fn acquire_renew_release_round_trip_with_the_documented_reply_shapes() {
    let (_s, http) = setup().await;
    let a = http.acquire("leader", "h1", 15000).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.body["granted"], true);
    assert_eq!(a.body["held"], true);
    assert_eq!(a.body["key"], "leader");
    assert_eq!(a.body["holder"], "h1");
    assert_eq!(a.body["ttl_ms"], 15000);
    common::timestamp(&a.body["acquired_at"]);
    common::timestamp(&a.body["expires_at"]);
    let r = http.renew("leader", "h1", rev(&a.body), 30000).await;
    assert_eq!(r.status, 200);
    assert!(rev(&r.body) > rev(&a.body));
    assert_eq!(r.body["acquired_at"], a.body["acquired_at"]);
    assert_eq!(r.body["ttl_ms"], 30000);
    let x = http.release("leader", "h1", rev(&r.body)).await;
    assert_eq!(x.status, 200);
    assert_eq!(
        x.body,
        json!({"released": true, "held": false, "key": "leader", "holder": "h1", "revision": rev(&x.body)})
    );
    assert!(rev(&x.body) > rev(&r.body));
    let owner = http.get("/v1/leases/leader").await;
    assert_eq!(owner.status, 200);
    assert_eq!(owner.body, json!({"held": false, "key": "leader"}));
}

#[tokio::test]
async fn granted_false_is_a_200_naming_the_current_holder() {
    let (_s, http) = setup().await;
    let a = http.acquire("k", "h1", 15000).await;
    let b = http.acquire("k", "h2", 30000).await;
    assert_eq!(b.status, 200);
    assert_eq!(b.body["granted"], false);
    assert_eq!(b.body["holder"], "h1");
    assert_eq!(b.body["revision"], a.body["revision"]);
    assert_eq!(b.body["ttl_ms"], 15000);
}

#[tokio::test]
async fn release_at_a_stale_revision_is_409_lost() {
    let (_s, http) = setup().await;
    let a = http.acquire("k", "h1", 15000).await;
    let x = http.release("k", "h2", rev(&a.body)).await;
    assert_error(&x, 409, "lost");
}

#[tokio::test]
async fn list_returns_every_held_lease_ordered_and_filtered_by_prefix() {
    let (_s, http) = setup().await;
    for key in ["shard-2", "shard-1", "leader"] {
        let a = http.acquire(key, "h", 15000).await;
        assert_eq!(a.status, 200);
    }
    let gone = http.acquire("shard-3", "h", 15000).await;
    http.release("shard-3", "h", rev(&gone.body)).await;
    let all = http.get("/v1/leases").await;
    assert_eq!(all.status, 200);
    assert_eq!(keys(&all.body), ["leader", "shard-1", "shard-2"]);
    let owner = http.get("/v1/leases/leader").await;
    assert_eq!(all.body["leases"][0], owner.body);
    let shards = http.get("/v1/leases?prefix=shard-").await;
    assert_eq!(keys(&shards.body), ["shard-1", "shard-2"]);
    let none = http.get("/v1/leases?prefix=nothing").await;
    assert_eq!(none.body, json!({"leases": [], "next": null}));
}

#[tokio::test]
async fn list_pages_with_after_and_limit_and_names_next_in_the_body() {
    let (_s, http) = setup().await;
    for key in ["k-3", "k-1", "k-4", "k-2", "k-5"] {
        http.acquire(key, "h", 15000).await;
    }
    let first = http.get("/v1/leases?limit=2").await;
    assert_eq!(first.status, 200);
    assert_eq!(keys(&first.body), ["k-1", "k-2"]);
    assert_eq!(first.body["next"], "k-2");
    let second = http.get("/v1/leases?after=k-2&limit=2").await;
    assert_eq!(keys(&second.body), ["k-3", "k-4"]);
    assert_eq!(second.body["next"], "k-4");
    let last = http.get("/v1/leases?after=k-4&limit=2").await;
    assert_eq!(keys(&last.body), ["k-5"]);
    assert_eq!(last.body["next"], Value::Null);
    let filtered = http.get("/v1/leases?prefix=k-&after=k-3").await;
    assert_eq!(keys(&filtered.body), ["k-4", "k-5"]);
}

#[tokio::test]
async fn list_without_a_limit_answers_every_lease_even_past_the_nats_default() {
    let (s, http) = setup().await;
    let s = &s;
    let grants = (0..1005).map(|i| {
        let key = format!("k-{i:04}");
        async move { s.acquire(&key, "h", 15000).await }
    });
    let mut grants = futures::stream::iter(grants).buffer_unordered(100);
    while let Some(grant) = grants.next().await {
        assert_eq!(grant["granted"], true, "{grant}");
    }
    let all = http.get("/v1/leases").await;
    assert_eq!(all.status, 200);
    assert_eq!(keys(&all.body).len(), 1005);
    assert_eq!(all.body["next"], Value::Null);
}

#[tokio::test]
async fn an_invalid_list_limit_or_after_is_400_invalid() {
    let (_s, http) = setup().await;
    for query in [
        "limit=0",
        "limit=5001",
        "limit=1.5",
        "limit=x",
        "limit=",
        "after=",
        "after=a.b",
        "after=%2A",
    ] {
        let reply = http.get(&format!("/v1/leases?{query}")).await;
        assert_error(&reply, 400, "invalid");
    }
    assert_eq!(http.get("/v1/leases?limit=5000").await.status, 200);
}

#[tokio::test]
async fn an_invalid_prefix_is_400_invalid() {
    let (_s, http) = setup().await;
    assert_error(&http.get("/v1/leases?prefix=a.b").await, 400, "invalid");
}

#[tokio::test]
async fn malformed_json_is_400_invalid() {
    let (_s, http) = setup().await;
    let reply = acquire_raw(&http, "application/json", "{nope").await;
    assert_error(&reply, 400, "invalid");
    assert!(reply.body["error"].as_str().unwrap().contains("not JSON"));
}

#[tokio::test]
async fn a_json_array_is_400_invalid() {
    let (_s, http) = setup().await;
    let reply = http.post("/v1/leases/k/acquire", json!(["h", 1000])).await;
    assert_error(&reply, 400, "invalid");
}

#[tokio::test]
async fn a_body_that_is_not_declared_json_is_400_invalid() {
    let (_s, http) = setup().await;
    let reply = acquire_raw(&http, "text/plain", r#"{"holder": "h", "ttl_ms": 1000}"#).await;
    assert_error(&reply, 400, "invalid");
    assert!(
        reply.body["error"]
            .as_str()
            .unwrap()
            .contains("Content-Type")
    );
}

#[tokio::test]
async fn an_invalid_key_in_the_path_is_400_invalid() {
    let (_s, http) = setup().await;
    let acquire = http
        .post(
            "/v1/leases/a.b/acquire",
            json!({"holder": "h", "ttl_ms": 1000}),
        )
        .await;
    assert_error(&acquire, 400, "invalid");
    assert!(
        acquire.body["error"]
            .as_str()
            .unwrap()
            .contains("key must be")
    );
    let long = "k".repeat(129);
    assert_error(
        &http.get(&format!("/v1/leases/{long}")).await,
        400,
        "invalid",
    );
}

#[tokio::test]
async fn the_path_key_wins_over_a_key_in_the_body() {
    let (_s, http) = setup().await;
    let a = http
        .post(
            "/v1/leases/from-path/acquire",
            json!({"key": "from-body", "holder": "h", "ttl_ms": 1000}),
        )
        .await;
    assert_eq!(a.body["key"], "from-path");
}

#[tokio::test]
async fn an_unknown_route_is_404_not_found() {
    let (_s, http) = setup().await;
    assert_error(&http.get("/v2/nothing").await, 404, "not_found");
    assert_error(
        &http.get("/v1/leases/k/acquire/extra").await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn a_wrong_method_is_405_method_not_allowed() {
    let (_s, http) = setup().await;
    assert_error(
        &http.get("/v1/leases/k/acquire").await,
        405,
        "method_not_allowed",
    );
    let put = http.send(http.request(Method::PUT, "/v1/leases/k")).await;
    assert_error(&put, 405, "method_not_allowed");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_body_too_large() {
    let (_s, http) = setup().await;
    let huge = format!(
        r#"{{"holder": "h", "ttl_ms": 1000, "pad": "{}"}}"#,
        "x".repeat(13 << 20)
    );
    let reply = acquire_raw(&http, "application/json", huge).await;
    assert_error(&reply, 413, "body_too_large");
}

#[tokio::test]
async fn a_server_without_jetstream_answers_503_unavailable() {
    let server = NatsServer::without_jetstream().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway.wait_serving().await;
    let http = Http::of(&gateway).await;
    let reply = http.acquire("k", "h", 1000).await;
    assert_error(&reply, 503, "unavailable");
    assert_error(&http.get("/readyz").await, 503, "unavailable");
    assert_eq!(http.get("/healthz").await.status, 200);
}

#[tokio::test]
async fn an_old_server_answers_501_unsupported_and_is_not_ready() {
    let server = NatsServer::old().await;
    let gateway = Gateway::spawn(&server.url, &[], &[]);
    gateway
        .log
        .wait_for("older than 2.11", std::time::Duration::from_secs(15))
        .await
        .expect("gateway notices the old server");
    let http = Http::of(&gateway).await;
    assert_error(&http.get("/v1/leases/k").await, 501, "unsupported");
    assert_error(&http.get("/v1/leases").await, 501, "unsupported");
    assert_error(&http.get("/readyz").await, 503, "unsupported");
}

#[tokio::test]
async fn revoke_frees_a_held_key_with_a_higher_fence_and_names_the_holder() {
    let (s, http) = setup().await;
    let held = s.acquire("stuck", "zombie", 60000).await;
    let revoked = http
        .send(http.request(Method::DELETE, "/v1/leases/stuck"))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let fence = rev(&revoked.body);
    assert!(fence > rev(&held));
    assert_eq!(
        revoked.body,
        json!({"released": true, "held": false, "key": "stuck", "holder": "zombie", "revision": fence})
    );
    assert_eq!(
        s.owner("stuck").await,
        json!({"held": false, "key": "stuck"})
    );
    // The old holder's fence is stale everywhere, and its release is no
    // repeat success: it did not release, it was revoked.
    let renew =
        json!({"key": "stuck", "holder": "zombie", "revision": held["revision"], "ttl_ms": 60000});
    assert_eq!(s.call("renew", renew).await["kind"], "lost");
    let release = json!({"key": "stuck", "holder": "zombie", "revision": held["revision"]});
    assert_eq!(s.call("release", release).await["kind"], "lost");
}

#[tokio::test]
async fn revoke_of_a_free_key_is_404_not_held() {
    let (_s, http) = setup().await;
    let reply = http
        .send(http.request(Method::DELETE, "/v1/leases/free"))
        .await;
    assert_error(&reply, 404, "not_held");
}

#[tokio::test]
async fn revoke_needs_the_write_token() {
    let server = NatsServer::start().await;
    let gateway = Gateway::spawn(
        &server.url,
        &[],
        &[
            ("DAGNATS_HTTP_TOKEN", "w"),
            ("DAGNATS_HTTP_READ_TOKEN", "r"),
        ],
    );
    gateway.wait_serving().await;
    let http = Http::of(&gateway).await;
    for token in [None, Some("r"), Some("wrong")] {
        let api = token.map_or(http.clone(), |t| http.with_token(t));
        let reply = api.send(api.request(Method::DELETE, "/v1/leases/k")).await;
        assert_error(&reply, 401, "unauthorized");
    }
    let writer = http.with_token("w");
    let reply = writer
        .send(writer.request(Method::DELETE, "/v1/leases/k"))
        .await;
    assert_ne!(reply.status, 401, "{}", reply.body);
}

#[tokio::test]
async fn recent_events_list_the_last_changes_oldest_first() {
    let (s, http) = setup().await;
    let a = s.acquire("r", "h", 60000).await;
    let x = s.release("r", "h", &a["revision"]).await;
    let events = common::eventually(
        "both changes",
        std::time::Duration::from_secs(5),
        || async {
            let reply = http.get("/v1/events/recent").await;
            let events = reply.body["events"].as_array().cloned().unwrap_or_default();
            (events.len() == 2).then_some(events)
        },
    )
    .await;
    assert_eq!(events[0]["event"], "acquired");
    assert_eq!(events[0]["revision"], a["revision"]);
    assert_eq!(events[0]["holder"], "h");
    assert_eq!(events[0]["lease"]["revision"], a["revision"]);
    assert_eq!(events[1]["event"], "released");
    assert_eq!(events[1]["revision"], x["revision"]);
    assert_eq!(events[1]["holder"], "h");
    common::timestamp(&events[1]["at"]);
}

#[tokio::test]
async fn a_listing_answers_every_other_lease_and_names_the_corrupt_keys() {
    let (s, http) = setup().await;
    s.acquire("a", "ha", 60000).await;
    common::records::write_corrupt(&s.client, "b").await;
    s.acquire("c", "hc", 60000).await;
    let list = http.get("/v1/leases").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert_eq!(keys(&list.body), ["a", "c"]);
    assert_eq!(list.body["corrupt"], json!(["b"]));
    let owner = http.get("/v1/leases/b").await;
    assert_error(&owner, 500, "internal");
}

#[tokio::test]
async fn a_listing_with_no_corrupt_key_has_no_corrupt_field() {
    let (s, http) = setup().await;
    s.acquire("a", "ha", 60000).await;
    let list = http.get("/v1/leases").await;
    assert_eq!(list.body.get("corrupt"), None, "{}", list.body);
}

#[tokio::test]
async fn revoke_clears_a_corrupt_record_with_a_higher_fence() {
    let (s, http) = setup().await;
    let bad = common::records::write_corrupt(&s.client, "k").await;
    let revoked = http
        .send(http.request(Method::DELETE, "/v1/leases/k"))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let fence = rev(&revoked.body);
    assert!(fence > bad, "{fence} > {bad}");
    assert_eq!(
        revoked.body,
        json!({"released": true, "held": false, "key": "k", "holder": "", "revision": fence})
    );
    assert_eq!(s.owner("k").await, json!({"held": false, "key": "k"}));
    assert_eq!(
        http.get("/v1/leases").await.body,
        json!({"leases": [], "next": null})
    );
    let grant = s.acquire("k", "h", 60000).await;
    assert_eq!(grant["granted"], true, "{grant}");
    assert!(rev(&grant) > fence);
}
