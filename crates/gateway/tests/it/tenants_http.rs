//! Authorization on the HTTP front, with the policy of docs/operations.md:
//! a token is a principal; a missing or unknown one stays `unauthorized`,
//! a known one without the right is `forbidden`, and lists and event
//! streams show only what it may read (docs/protocol.md, Authorization).

use crate::common::sse::{next, open};
use crate::common::tenants::{ADMIN_TOKEN, DASHBOARD_TOKEN, Tenants};
use crate::common::{Http, assert_error};
use serde_json::json;

const TTL: u64 = 30_000;

#[tokio::test]
async fn a_missing_or_unknown_token_stays_unauthorized() {
    let t = Tenants::start().await;
    let http = Http::of(&t.gateways[0]).await;
    for path in ["/v1/leases", "/v1/leases/team-a-x", "/v1/events/recent"] {
        assert_error(&http.get(path).await, 401, "unauthorized");
        assert_error(
            &http.with_token("nobody's").get(path).await,
            401,
            "unauthorized",
        );
    }
    let acquire = json!({"holder": "h", "ttl_ms": TTL});
    let reply = http.post("/v1/leases/team-a-x/acquire", acquire).await;
    assert_error(&reply, 401, "unauthorized");
}

#[tokio::test]
async fn a_read_only_tokens_acquire_is_forbidden() {
    let t = Tenants::start().await;
    let dashboard = Http::of(&t.gateways[0]).await.with_token(DASHBOARD_TOKEN);
    let acquire = json!({"holder": "h", "ttl_ms": TTL});
    let reply = dashboard.post("/v1/leases/team-a-x/acquire", acquire).await;
    assert_error(&reply, 403, "forbidden");
    assert_eq!(t.record("team-a-x").await, None);
    let reply = dashboard.get("/v1/leases/team-b-x").await;
    assert_error(&reply, 403, "forbidden");
    let reply = dashboard.get("/v1/leases/team-a-x").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn an_admin_token_over_http_revokes_a_tenants_lease() {
    let t = Tenants::start().await;
    let grant = t.hold("alice", "team-a-leader", "a1").await;
    let http = Http::of(&t.gateways[0]).await;
    let revoke = |token: &str| {
        http.with_token(token)
            .request(reqwest::Method::DELETE, "/v1/leases/team-a-leader")
    };
    let refused = http.send(revoke(DASHBOARD_TOKEN)).await;
    assert_error(&refused, 403, "forbidden");
    let revoked = http.send(revoke(ADMIN_TOKEN)).await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(revoked.body["holder"], "a1");
    assert!(revoked.body["revision"].as_u64() > grant["revision"].as_u64());
    let (owner, _) = t
        .call("alice", "owner", json!({"key": "team-a-leader"}))
        .await;
    assert_eq!(owner["held"], false, "{owner}");
}

#[tokio::test]
async fn a_list_shows_only_what_the_principal_may_read_and_its_pages_never_name_a_hidden_key() {
    let t = Tenants::start().await;
    // Hidden keys sort before and after the visible ones;
    // `team-a` itself is under no prefix of the dashboard's.
    for (user, key, holder) in [
        ("ops", "team-a", "o1"),
        ("alice", "team-a-1", "a1"),
        ("bob", "team-b-0", "b1"),
        ("alice", "team-a-2", "a1"),
        ("alice", "team-a-3", "a1"),
        ("bob", "team-b-9", "b1"),
    ] {
        t.hold(user, key, holder).await;
    }
    let keys = |list: &serde_json::Value| -> Vec<String> {
        list["leases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["key"].as_str().unwrap().to_string())
            .collect()
    };
    let dashboard = Http::of(&t.gateways[0]).await.with_token(DASHBOARD_TOKEN);
    let all = dashboard.get("/v1/leases").await;
    assert_eq!(
        keys(&all.body),
        ["team-a-1", "team-a-2", "team-a-3"],
        "{}",
        all.body
    );
    assert_eq!(all.body["next"], serde_json::Value::Null);
    // Pages of 2: full, and `next` is a key the principal may read.
    let first = dashboard.get("/v1/leases?limit=2").await.body;
    assert_eq!(keys(&first), ["team-a-1", "team-a-2"], "{first}");
    assert_eq!(first["next"], "team-a-2");
    let rest = dashboard
        .get("/v1/leases?limit=2&after=team-a-2")
        .await
        .body;
    assert_eq!(keys(&rest), ["team-a-3"], "{rest}");
    assert_eq!(rest["next"], serde_json::Value::Null, "{rest}");
    // Over NATS the same: bob sees team-b only, carol too, alice team-a only.
    for (user, expected) in [
        ("bob", vec!["team-b-0", "team-b-9"]),
        ("carol", vec!["team-b-0", "team-b-9"]),
        ("alice", vec!["team-a-1", "team-a-2", "team-a-3"]),
    ] {
        let (list, code) = t.call(user, "list", json!({"limit": 1})).await;
        assert_eq!(code, None, "{list}");
        assert_eq!(keys(&list), expected[..1], "{user}: {list}");
        assert_eq!(list["next"], expected[0], "{user}: {list}");
        let (all, _) = t.call(user, "list", json!({})).await;
        assert_eq!(keys(&all), expected, "{user}: {all}");
    }
}

#[tokio::test]
async fn an_event_stream_shows_only_what_the_principal_may_read() {
    let t = Tenants::start().await;
    let dashboard = Http::of(&t.gateways[0]).await.with_token(DASHBOARD_TOKEN);
    let reply = dashboard.get("/v1/events?key=team-b-x").await;
    assert_error(&reply, 403, "forbidden");
    let mut events = open(&dashboard, "/v1/events", None).await;
    t.hold("bob", "team-b-x", "b1").await;
    let seen = t.hold("alice", "team-a-x", "a1").await;
    let (name, id, data) = next(&mut events).await;
    assert_eq!(
        (name.as_str(), data["key"].as_str()),
        ("acquired", Some("team-a-x"))
    );
    assert_eq!(
        Some(id),
        seen["revision"].as_u64(),
        "team-b-x's event came first and was not shown"
    );
    // Resuming shows the current state of readable keys only.
    let mut resumed = open(&dashboard, "/v1/events", Some(0)).await;
    let (_, _, data) = next(&mut resumed).await;
    assert_eq!(data["key"], "team-a-x", "{data}");
    let recent = dashboard.get("/v1/events/recent").await;
    let recent_keys: Vec<_> = recent.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(recent_keys, ["team-a-x"], "{}", recent.body);
}

#[tokio::test]
async fn under_a_policy_the_read_token_setting_reads_every_key_and_holds_none() {
    let t = Tenants::start().await;
    let a = t.hold("alice", "team-a-x", "a1").await;
    let b = t.hold("bob", "team-b-x", "b1").await;
    let read_token = "operators-read-token";
    let gateway = t.gateway(&[("DAGNATS_HTTP_READ_TOKEN", read_token)]).await;
    let reader = Http::of(&gateway).await.with_token(read_token);
    let list = reader.get("/v1/leases").await;
    assert_eq!(list.status, 200, "{}", list.body);
    let keys: Vec<_> = list.body["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["key"].clone(), l["revision"].clone()))
        .collect();
    assert_eq!(
        keys,
        [
            (json!("team-a-x"), a["revision"].clone()),
            (json!("team-b-x"), b["revision"].clone())
        ],
        "{}",
        list.body
    );
    for (key, holder) in [("team-a-x", "a1"), ("team-b-x", "b1")] {
        let owner = reader.get(&format!("/v1/leases/{key}")).await;
        assert_eq!(owner.status, 200, "{}", owner.body);
        assert_eq!(owner.body["holder"], holder, "{}", owner.body);
    }
    let before = t.record("team-a-x").await;
    let acquire = json!({"holder": "r1", "ttl_ms": TTL});
    let reply = reader.post("/v1/leases/team-a-y/acquire", acquire).await;
    assert_error(&reply, 403, "forbidden");
    let revoke = reader.request(reqwest::Method::DELETE, "/v1/leases/team-a-x");
    assert_error(&reader.send(revoke).await, 403, "forbidden");
    assert_eq!(t.record("team-a-y").await, None);
    assert_eq!(t.record("team-a-x").await, before);
}
