//! Authorization on the NATS front, against a real nats-server with the
//! accounts of docs/operations.md (a gateways' account and two tenants
//! importing the lease API with `share: true`) and the policy that goes
//! with it (docs/protocol.md, Authorization).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::records::write_lease;
use crate::common::tenants::{
    Tenants, assert_forbidden, call_with, example_policy_without, shared_policy,
};
use crate::common::{Http, eventually};
use dagnats_leases_client::{KeeperOptions, LeaseClient, LeaseKeeper, serve_inbox};
use dagnats_leases_testkit::accounts;
use futures::StreamExt;
use serde_json::{Value, json};

const TTL: u64 = 30_000;

fn acquire(key: &str, holder: &str) -> Value {
    json!({"key": key, "holder": holder, "ttl_ms": TTL})
}

fn fenced(key: &str, holder: &str, revision: &Value) -> Value {
    json!({"key": key, "holder": holder, "revision": revision, "ttl_ms": TTL})
}

fn transfer(key: &str, holder: &str, revision: &Value, to: &str) -> Value {
    let mut body = fenced(key, holder, revision);
    body["to"] = json!(to);
    body
}

#[tokio::test]
async fn a_tenant_acquires_renews_transfers_and_releases_its_own_keys() {
    let t = Tenants::start().await;
    let got = t.hold("alice", "team-a-leader", "a1").await;
    let renew = fenced("team-a-leader", "a1", &got["revision"]);
    let (renewed, code) = t.call("alice", "renew", renew).await;
    assert_eq!((renewed["granted"].clone(), code), (json!(true), None));
    let moved = transfer("team-a-leader", "a1", &renewed["revision"], "a2");
    let (moved, code) = t.call("alice", "transfer", moved).await;
    assert_eq!((moved["holder"].clone(), code), (json!("a2"), None));
    let release = fenced("team-a-leader", "a2", &moved["revision"]);
    let (released, code) = t.call("alice", "release", release).await;
    assert_eq!((released["released"].clone(), code), (json!(true), None));
    assert_eq!(
        t.record("team-a-leader").await.unwrap().1["principal"],
        "team-a"
    );
}

#[tokio::test]
async fn another_tenants_every_operation_on_those_keys_is_forbidden_and_changes_nothing() {
    let t = Tenants::start().await;
    let got = t.hold("alice", "team-a-leader", "a1").await;
    let before = t.record("team-a-leader").await.expect("a record");
    let revision = &got["revision"];
    let calls = [
        ("acquire", acquire("team-a-leader", "b1")),
        ("acquire", acquire("team-a-leader", "a1")),
        ("owner", json!({"key": "team-a-leader"})),
        ("renew", fenced("team-a-leader", "a1", revision)),
        ("release", fenced("team-a-leader", "a1", revision)),
        ("transfer", transfer("team-a-leader", "a1", revision, "b1")),
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
    let got = t.hold("alice", "team-a-leader", "a1").await;
    let before = t.record("team-a-leader").await;
    let renew = fenced("team-a-leader", "a1", &got["revision"]);
    for forged in [
        r#"{"acc":"TEAM_A","user":"alice"}"#,
        r#"{"acc":"LEASES","user":"ops"}"#,
    ] {
        let reply = call_with(t.client("bob"), "renew", renew.clone(), Some(forged)).await;
        assert_forbidden(&format!("bob claiming {forged}"), &reply);
    }
    assert_eq!(t.record("team-a-leader").await, before);
    // Alice, claiming to be bob, still touches her own keys only.
    let claim_bob = r#"{"acc":"TEAM_B","user":"bob"}"#;
    let team_b = acquire("team-b-leader", "a1");
    let reply = call_with(t.client("alice"), "acquire", team_b, Some(claim_bob)).await;
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
    t.hold("bob", "team-b-job", "b1").await;
    let (owner, code) = t.call("carol", "owner", json!({"key": "team-b-job"})).await;
    assert_eq!((owner["holder"].clone(), code), (json!("b1"), None));
}

#[tokio::test]
async fn the_local_principal_is_a_request_without_request_info() {
    let t = Tenants::start().await;
    let got = t.hold("bob", "team-b-job", "b1").await;
    // `ops` is in the gateways' account: no header, the `local` admin.
    let (owner, code) = t.call("ops", "owner", json!({"key": "team-b-job"})).await;
    assert_eq!(
        (owner["revision"].clone(), code),
        (got["revision"].clone(), None)
    );
    let release = fenced("team-b-job", "b1", &got["revision"]);
    let (released, code) = t.call("ops", "release", release).await;
    assert_eq!(code, None, "an admin releases another's lease: {released}");
    assert_eq!(released["released"], true, "{released}");
}

#[tokio::test]
async fn a_nats_request_no_principal_matches_is_forbidden() {
    let policy = example_policy_without(&["ops", "team-b-audit"]);
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

#[tokio::test]
async fn a_tenure_is_bound_to_its_principal_even_on_keys_another_may_hold() {
    let t = Tenants::with_policy(&shared_policy(), 1).await;
    let got = t.hold("alice", "shared-lock", "a1").await;
    let before = t.record("shared-lock").await;
    let revision = &got["revision"];
    for (op, body) in [
        ("renew", fenced("shared-lock", "a1", revision)),
        ("release", fenced("shared-lock", "a1", revision)),
        ("transfer", transfer("shared-lock", "a1", revision, "b1")),
    ] {
        let reply = t.call("bob", op, body).await;
        assert_forbidden(&format!("bob {op} of alice's tenure"), &reply);
    }
    let (again, code) = t.call("bob", "acquire", acquire("shared-lock", "a1")).await;
    assert_eq!(code, None, "{again}");
    assert_eq!(again["granted"], false, "not bob's tenure: {again}");
    assert_eq!(t.record("shared-lock").await, before);
    // Through a renew and a transfer the tenure stays alice's.
    let (renewed, _) = t
        .call("alice", "renew", fenced("shared-lock", "a1", revision))
        .await;
    let moved = transfer("shared-lock", "a1", &renewed["revision"], "a2");
    let (moved, code) = t.call("alice", "transfer", moved).await;
    assert_eq!(code, None, "{moved}");
    assert_eq!(
        t.record("shared-lock").await.unwrap().1["principal"],
        "team-a"
    );
    let reply = t
        .call(
            "bob",
            "renew",
            fenced("shared-lock", "a2", &moved["revision"]),
        )
        .await;
    assert_forbidden("bob renewing the transferred tenure", &reply);
}

#[tokio::test]
async fn an_admin_names_the_principal_of_a_transfers_new_tenure() {
    let t = Tenants::with_policy(&shared_policy(), 1).await;
    let got = t.hold("alice", "shared-lock", "a1").await;
    let mut handed = transfer("shared-lock", "a1", &got["revision"], "b1");
    handed["to_principal"] = json!("team-b");
    let reply = t.call("alice", "transfer", handed.clone()).await;
    assert_forbidden("alice naming team-b", &reply);
    let (moved, code) = t.call("ops", "transfer", handed).await;
    assert_eq!(code, None, "{moved}");
    assert_eq!(
        t.record("shared-lock").await.unwrap().1["principal"],
        "team-b"
    );
    let renew = fenced("shared-lock", "b1", &moved["revision"]);
    let (renewed, code) = t.call("bob", "renew", renew).await;
    assert_eq!((renewed["granted"].clone(), code), (json!(true), None));
}

#[tokio::test]
async fn a_record_written_before_policies_is_renewed_by_any_principal_allowed_hold() {
    let t = Tenants::with_policy(&shared_policy(), 1).await;
    let now = time::OffsetDateTime::now_utc();
    let revision = write_lease(t.client("ops"), "shared-old", "h", TTL, now, 30).await;
    let reply = t
        .call(
            "carol",
            "renew",
            fenced("shared-old", "h", &json!(revision)),
        )
        .await;
    assert_forbidden("carol has no hold on shared-", &reply);
    let (renewed, code) = t
        .call("bob", "renew", fenced("shared-old", "h", &json!(revision)))
        .await;
    assert_eq!((renewed["granted"].clone(), code), (json!(true), None));
    let (record_revision, record) = t.record("shared-old").await.unwrap();
    assert_eq!(json!(record_revision), renewed["revision"]);
    assert_eq!(record.get("principal"), None, "it stays nobody's");
}

/// The change events `client` receives on `dagnats.lease.changed.>` until
/// one of revision `last`: (key, revision) each.
async fn events_until(sub: &mut async_nats::Subscriber, last: u64) -> Vec<(String, u64)> {
    let mut seen = Vec::new();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("an event within 10 s")
            .expect("the subscription is open");
        let headers = msg.headers.as_ref().expect("an event has headers");
        let revision: u64 = headers
            .get("Nats-Sequence")
            .unwrap()
            .as_str()
            .parse()
            .unwrap();
        let key = msg.subject.as_str().rsplit('.').next().unwrap().to_string();
        seen.push((key, revision));
        if revision == last {
            return seen;
        }
    }
}

fn revision(grant: &Value) -> u64 {
    grant["revision"].as_u64().unwrap()
}

#[tokio::test]
async fn each_tenant_receives_the_change_events_of_its_own_keys_only() {
    let t = Tenants::start().await;
    let mut alice = t
        .client("alice")
        .subscribe("dagnats.lease.changed.>")
        .await
        .unwrap();
    let mut bob = t
        .client("bob")
        .subscribe("dagnats.lease.changed.>")
        .await
        .unwrap();
    for user in ["alice", "bob"] {
        crate::common::settle(t.client(user)).await;
    }
    // One gateway republishes in order: a tenant's own later event would
    // come after any other tenant's event it was wrongly shown.
    let b1 = t.hold("bob", "team-b-x", "b1").await;
    let a1 = t.hold("alice", "team-a-x", "a1").await;
    let b2 = t.hold("bob", "team-b-y", "b1").await;
    assert_eq!(
        events_until(&mut alice, revision(&a1)).await,
        [("team-a-x".to_string(), revision(&a1))]
    );
    assert_eq!(
        events_until(&mut bob, revision(&b2)).await,
        [
            ("team-b-x".to_string(), revision(&b1)),
            ("team-b-y".to_string(), revision(&b2))
        ]
    );
}

#[tokio::test]
async fn each_change_event_is_republished_once_whatever_the_number_of_gateways() {
    let t = Tenants::with_policy(&accounts::example("policy.toml"), 2).await;
    // Every copy any gateway republishes for team A, seen in their account.
    let mut copies = t
        .client("ops")
        .subscribe("dagnats.tenant.TEAM_A.lease.changed.>")
        .await
        .unwrap();
    crate::common::settle(t.client("ops")).await;
    let mut grant = t.hold("alice", "team-a-x", "a1").await;
    let mut written = vec![("team-a-x".to_string(), revision(&grant))];
    for _ in 0..20 {
        let renew = fenced("team-a-x", "a1", &grant["revision"]);
        grant = t.call("alice", "renew", renew).await.0;
        written.push(("team-a-x".to_string(), revision(&grant)));
    }
    let sentinel = t.hold("alice", "team-a-sentinel", "a1").await;
    written.push(("team-a-sentinel".to_string(), revision(&sentinel)));
    let mut seen = events_until(&mut copies, revision(&sentinel)).await;
    seen.sort_by_key(|(_, revision)| *revision);
    assert_eq!(seen, written, "each write once, none twice");
}

#[tokio::test]
async fn a_tenants_waiting_keeper_is_woken_by_its_own_keys_events() {
    let t = Tenants::start().await;
    let held = t.hold("alice", "team-a-job", "a1").await;
    // A long TTL: the keeper's fallback would wait about a minute.
    let keeper = LeaseKeeper::start(
        LeaseClient::new(t.client("alice").clone()),
        KeeperOptions {
            key: "team-a-job".into(),
            holder: "a2".into(),
            ttl: Duration::from_secs(60),
            wait: true,
        },
    );
    let mut ownership = keeper.watch();
    eventually(
        "the keeper to try once",
        Duration::from_secs(10),
        || async {
            let (owner, _) = t.call("alice", "owner", json!({"key": "team-a-job"})).await;
            (owner["holder"] == "a1").then_some(())
        },
    )
    .await;
    crate::common::settle(t.client("alice")).await;
    let release = fenced("team-a-job", "a1", &held["revision"]);
    let (released, _) = t.call("alice", "release", release).await;
    assert_eq!(released["released"], true, "{released}");
    tokio::time::timeout(
        Duration::from_secs(10),
        ownership.wait_for(|o| o.fence().is_some()),
    )
    .await
    .expect("the release's event wakes the keeper well before its fallback")
    .unwrap();
    keeper.shutdown().await;
}

#[tokio::test]
async fn a_forward_reaches_a_holder_in_another_account_under_the_owners_rejection_rules() {
    let t = Tenants::start().await;
    let held = t.hold("alice", "team-a-svc", "a1").await;
    let tenure = revision(&held);
    let owner = Arc::new(AtomicBool::new(true));
    let acting = owner.clone();
    tokio::spawn(serve_inbox(
        t.client("alice").clone(),
        "a1",
        move |key| (key == "team-a-svc" && acting.load(Ordering::SeqCst)).then_some(tenure),
        |req| async move { format!("a1 at {}", req.fence).into() },
    ));
    // A subscriber on the same inbox in the gateways' account is never
    // asked: the forward goes to team A's account.
    let mut wrong = t
        .client("ops")
        .subscribe("dagnats.lease.inbox.>")
        .await
        .unwrap();
    crate::common::settle(t.client("ops")).await;
    let forward = json!({"key": "team-a-svc", "payload": "aGk=", "timeout_ms": 2_000});
    let reply = eventually("the owner's answer", Duration::from_secs(10), || async {
        let (reply, code) = t.call("alice", "forward", forward.clone()).await;
        (code.is_none()).then_some(reply)
    })
    .await;
    assert_eq!(reply["holder"], "a1", "{reply}");
    assert_eq!(reply["revision"], tenure, "{reply}");
    use base64::Engine;
    let payload = base64::engine::general_purpose::STANDARD
        .decode(reply["payload"].as_str().unwrap())
        .unwrap();
    assert_eq!(payload, format!("a1 at {tenure}").as_bytes());
    // Not acting as owner: the owner rejects it, every attempt.
    owner.store(false, Ordering::SeqCst);
    let (rejected, code) = t.call("alice", "forward", forward.clone()).await;
    assert_eq!(rejected["kind"], "owner_rejected", "{rejected}");
    assert_eq!(code.as_deref(), Some("409"));
    // Nobody on the holder's inbox: owner_unavailable.
    let other = t.hold("alice", "team-a-nobody", "a9").await;
    let forward = json!({"key": "team-a-nobody", "payload": "aGk=", "timeout_ms": 2_000});
    let (unavailable, _) = t.call("alice", "forward", forward).await;
    assert_eq!(unavailable["kind"], "owner_unavailable", "{unavailable}");
    assert_eq!(unavailable["revision"], other["revision"]);
    crate::common::settle(t.client("ops")).await;
    assert!(
        futures::poll!(wrong.next()).is_pending(),
        "nothing reached the gateways' own account's inboxes"
    );
}

#[tokio::test]
async fn forbidden_is_counted_by_principal_and_operation_and_logged_without_a_token() {
    let t = Tenants::start().await;
    let got = t.hold("alice", "team-a-x", "a1").await;
    for _ in 0..2 {
        let reply = t
            .call("bob", "renew", fenced("team-a-x", "a1", &got["revision"]))
            .await;
        assert_forbidden("bob renew", &reply);
    }
    let http = Http::of(&t.gateways[0]).await;
    let token = crate::common::tenants::DASHBOARD_TOKEN;
    let reply = http
        .with_token(token)
        .post(
            "/v1/leases/team-a-x/acquire",
            json!({"holder": "h", "ttl_ms": TTL}),
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    let metric = |labels: &str| {
        let http = http.clone();
        let series = format!("dagnats_forbidden_total{{{labels}}}");
        async move { http.metric(&series).await }
    };
    assert_eq!(metric("principal=\"team-b\",op=\"renew\"").await, 2);
    assert_eq!(
        metric("principal=\"team-a-dashboard\",op=\"acquire\"").await,
        1
    );
    let log = &t.gateways[0].log;
    let line = log
        .wait_for("principal=\"team-b\"", Duration::from_secs(5))
        .await
        .expect("a log line names the principal");
    assert!(
        line.contains("forbidden") && line.contains("op=\"renew\"") && line.contains("team-a-x"),
        "{line}"
    );
    log.wait_for("principal=\"team-a-dashboard\"", Duration::from_secs(5))
        .await
        .expect("the HTTP refusal is logged too");
    assert!(!log.text().contains(token), "no token is ever logged");
}

#[tokio::test]
async fn without_a_policy_nothing_is_checked_and_records_name_no_principal() {
    let t = Tenants::without_policy().await;
    let got = t.hold("alice", "team-a-leader", "a1").await;
    assert_eq!(
        t.record("team-a-leader").await.unwrap().1.get("principal"),
        None
    );
    // Anyone who reaches the lease API may renew and read it, as before.
    let renew = fenced("team-a-leader", "a1", &got["revision"]);
    let (renewed, code) = t.call("bob", "renew", renew).await;
    assert_eq!((renewed["granted"].clone(), code), (json!(true), None));
    let (list, code) = t.call("carol", "list", json!({})).await;
    assert_eq!(code, None, "{list}");
    assert_eq!(list["leases"][0]["key"], "team-a-leader", "{list}");
    // Nobody republishes for tenants: no policy names their accounts.
    let mut copies = t.client("ops").subscribe("dagnats.tenant.>").await.unwrap();
    let mut changes = t
        .client("ops")
        .subscribe("dagnats.lease.changed.>")
        .await
        .unwrap();
    crate::common::settle(t.client("ops")).await;
    let last = t.hold("alice", "team-a-other", "a1").await;
    assert_eq!(
        events_until(&mut changes, revision(&last)).await,
        [("team-a-other".to_string(), revision(&last))]
    );
    crate::common::settle(t.client("ops")).await;
    assert!(
        futures::poll!(copies.next()).is_pending(),
        "no tenant copies"
    );
}

/// The keys of a history page, newest tenure first.
fn history_keys(page: &Value) -> Vec<&str> {
    let tenures = page["tenures"].as_array();
    let tenures = tenures.unwrap_or_else(|| panic!("a page of tenures: {page}"));
    tenures.iter().map(|t| t["key"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_history_read_shows_only_what_the_principal_may_read() {
    let t = Tenants::start().await;
    t.hold("alice", "team-a-h", "a1").await;
    t.hold("bob", "team-b-h", "b1").await;
    // The history is written behind the bucket: wait until both are in.
    eventually(
        "both tenures in the history",
        Duration::from_secs(10),
        || async {
            let (page, _) = t.call("ops", "history", json!({})).await;
            (history_keys(&page) == ["team-b-h", "team-a-h"]).then_some(())
        },
    )
    .await;
    let reply = t.call("bob", "history", json!({"key": "team-a-h"})).await;
    assert_forbidden("bob's history of team-a-h", &reply);
    let reply = t.call("alice", "history", json!({"key": "team-b-h"})).await;
    assert_forbidden("alice's history of team-b-h", &reply);
    for (user, own) in [
        ("alice", "team-a-h"),
        ("bob", "team-b-h"),
        ("carol", "team-b-h"),
    ] {
        for query in [json!({}), json!({"prefix": "team-"}), json!({"key": own})] {
            let (page, code) = t.call(user, "history", query.clone()).await;
            assert_eq!(code, None, "{user} {query}: {page}");
            assert_eq!(history_keys(&page), [own], "{user} {query}: {page}");
        }
    }
}
