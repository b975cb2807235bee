//! Authorization on the NATS front, against a real nats-server with the
//! accounts of docs/operations.md (a gateways' account and two tenants
//! importing the lease API with `share: true`) and the policy that goes
//! with it (docs/protocol.md, Authorization).

use crate::common::tenants::{Tenants, assert_forbidden, call_with};
use serde_json::{Value, json};

const TTL: u64 = 30_000;

fn acquire(key: &str, holder: &str) -> Value {
    json!({"key": key, "holder": holder, "ttl_ms": TTL})
}

fn fenced(key: &str, holder: &str, revision: &Value) -> Value {
    json!({"key": key, "holder": holder, "revision": revision, "ttl_ms": TTL})
}

#[tokio::test]
async fn a_tenant_acquires_renews_transfers_and_releases_its_own_keys() {
    let t = Tenants::start().await;
    let (got, code) = t
        .call("alice", "acquire", acquire("team-a-leader", "a1"))
        .await;
    assert_eq!((got["granted"].clone(), code), (json!(true), None), "{got}");
    let (renewed, _) = t
        .call(
            "alice",
            "renew",
            fenced("team-a-leader", "a1", &got["revision"]),
        )
        .await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    let mut transfer = fenced("team-a-leader", "a1", &renewed["revision"]);
    transfer["to"] = json!("a2");
    let (moved, _) = t.call("alice", "transfer", transfer).await;
    assert_eq!(moved["holder"], "a2", "{moved}");
    let (released, code) = t
        .call(
            "alice",
            "release",
            fenced("team-a-leader", "a2", &moved["revision"]),
        )
        .await;
    assert_eq!(
        (released["released"].clone(), code),
        (json!(true), None),
        "{released}"
    );
}

#[tokio::test]
async fn another_tenants_every_operation_on_those_keys_is_forbidden_and_changes_nothing() {
    let t = Tenants::start().await;
    let (got, _) = t
        .call("alice", "acquire", acquire("team-a-leader", "a1"))
        .await;
    assert_eq!(got["granted"], true, "{got}");
    let before = t.record("team-a-leader").await.expect("a record");
    let revision = &got["revision"];
    let mut transfer = fenced("team-a-leader", "a1", revision);
    transfer["to"] = json!("b1");
    let calls = [
        ("acquire", acquire("team-a-leader", "b1")),
        ("acquire", acquire("team-a-leader", "a1")),
        ("owner", json!({"key": "team-a-leader"})),
        ("renew", fenced("team-a-leader", "a1", revision)),
        ("release", fenced("team-a-leader", "a1", revision)),
        ("transfer", transfer),
        (
            "forward",
            json!({"key": "team-a-leader", "payload": "aGk=", "timeout_ms": 500}),
        ),
    ];
    for user in ["bob", "carol"] {
        for (op, body) in &calls {
            let reply = t.call(user, op, body.clone()).await;
            assert_forbidden(&format!("{user} {op}"), &reply);
        }
    }
    assert_eq!(
        t.record("team-a-leader").await,
        Some(before),
        "the record and its fence are exactly as before"
    );
}

#[tokio::test]
async fn a_forged_request_info_header_does_not_change_who_a_tenant_is() {
    let t = Tenants::start().await;
    let (got, _) = t
        .call("alice", "acquire", acquire("team-a-leader", "a1"))
        .await;
    let before = t.record("team-a-leader").await;
    let forged = r#"{"acc":"TEAM_A","user":"alice"}"#;
    let renew = fenced("team-a-leader", "a1", &got["revision"]);
    let reply = call_with(t.client("bob"), "renew", renew, Some(forged)).await;
    assert_forbidden("bob claiming to be alice", &reply);
    let as_ops = r#"{"acc":"LEASES","user":"ops"}"#;
    let reply = call_with(
        t.client("bob"),
        "release",
        fenced("team-a-leader", "a1", &got["revision"]),
        Some(as_ops),
    )
    .await;
    assert_forbidden("bob claiming to be the gateways' own account", &reply);
    assert_eq!(t.record("team-a-leader").await, before);
    // And alice, claiming to be bob, still holds her own keys only.
    let claim_bob = r#"{"acc":"TEAM_B","user":"bob"}"#;
    let reply = call_with(
        t.client("alice"),
        "acquire",
        acquire("team-b-leader", "a1"),
        Some(claim_bob),
    )
    .await;
    assert_forbidden("alice claiming to be bob", &reply);
    assert_eq!(t.record("team-b-leader").await, None);
}

#[tokio::test]
async fn a_read_only_principals_acquire_is_forbidden_and_its_reads_are_answered() {
    let t = Tenants::start().await;
    let reply = t
        .call("carol", "acquire", acquire("team-b-job", "c1"))
        .await;
    assert_forbidden("carol acquire", &reply);
    assert_eq!(t.record("team-b-job").await, None);
    let (got, _) = t.call("bob", "acquire", acquire("team-b-job", "b1")).await;
    assert_eq!(got["granted"], true, "{got}");
    let (owner, code) = t.call("carol", "owner", json!({"key": "team-b-job"})).await;
    assert_eq!(code, None, "{owner}");
    assert_eq!(owner["holder"], "b1", "{owner}");
}

#[tokio::test]
async fn the_local_principal_is_a_request_without_request_info() {
    let t = Tenants::start().await;
    let (got, _) = t.call("bob", "acquire", acquire("team-b-job", "b1")).await;
    // `ops` is in the gateways' account: no header, the `local` admin.
    let (owner, code) = t.call("ops", "owner", json!({"key": "team-b-job"})).await;
    assert_eq!(
        (owner["revision"].clone(), code),
        (got["revision"].clone(), None)
    );
    let (released, code) = t
        .call(
            "ops",
            "release",
            fenced("team-b-job", "b1", &got["revision"]),
        )
        .await;
    assert_eq!(
        code, None,
        "an admin releases a lease another principal holds: {released}"
    );
    assert_eq!(released["released"], true, "{released}");
}

#[tokio::test]
async fn a_nats_request_no_principal_matches_is_forbidden() {
    // The doc's policy without its `local` principal and without carol.
    let policy = crate::common::tenants::example_policy_without(&["ops", "team-b-audit"]);
    let t = Tenants::with_policy(&policy, 1).await;
    for user in ["ops", "carol"] {
        let reply = t.call(user, "owner", json!({"key": "team-b-job"})).await;
        assert_forbidden(user, &reply);
        let reply = t.call(user, "list", json!({})).await;
        assert_forbidden(user, &reply);
    }
    let (owner, code) = t.call("bob", "owner", json!({"key": "team-b-job"})).await;
    assert_eq!((owner["held"].clone(), code), (json!(false), None));
}
