//! The rules of tenures under a policy, over the in-memory fakes: a tenure
//! belongs to the principal that acquired it, kept through renews and
//! transfers, and another non-admin principal is `forbidden` to renew,
//! release or transfer it, even at the right holder and fence. Each rule
//! also has its test against a real nats-server (`tests/tenants.rs`).

use std::sync::Arc;

use serde_json::json;
use time::OffsetDateTime;

use super::fakes::{self, FakeRecords, request};
use super::{Caller, LeaseCore};
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::record::Entry;

fn core() -> (LeaseCore, Arc<FakeRecords>) {
    let (core, records, _) = fakes::core(1 << 20);
    (core, records)
}

fn principal(name: &str) -> Caller {
    Caller::Principal {
        name: name.into(),
        admin: false,
    }
}

fn admin(name: &str) -> Caller {
    Caller::Principal {
        name: name.into(),
        admin: true,
    }
}

fn fenced(holder: &str, revision: u64) -> serde_json::Value {
    json!({"key": "k", "holder": holder, "revision": revision, "ttl_ms": 10_000})
}

/// The principal of the record `key` holds now.
fn owner_of(records: &FakeRecords) -> Option<String> {
    match records.entry("k") {
        Some(Entry::Held { record, .. }) => record.principal,
        other => panic!("not held: {other:?}"),
    }
}

async fn acquired_by(core: &LeaseCore, caller: &Caller) -> u64 {
    let req = json!({"key": "k", "holder": "h", "ttl_ms": 10_000});
    let grant = core.acquire(request(req), caller).await.unwrap();
    assert!(grant.granted);
    grant.lease.revision
}

#[tokio::test]
async fn a_tenure_belongs_to_the_principal_that_acquired_it_through_its_renews() {
    let (core, records) = core();
    let team_a = principal("team-a");
    let revision = acquired_by(&core, &team_a).await;
    assert_eq!(owner_of(&records).as_deref(), Some("team-a"));
    let renewed = core.renew(request(fenced("h", revision)), &team_a).await;
    assert!(renewed.is_ok(), "{renewed:?}");
    assert_eq!(owner_of(&records).as_deref(), Some("team-a"));
}

#[tokio::test]
async fn another_principals_renew_release_and_transfer_are_forbidden_at_the_right_fence() {
    let (core, records) = core();
    let revision = acquired_by(&core, &principal("team-a")).await;
    let before = records.entry("k");
    let team_b = principal("team-b");
    let renew = core.renew(request(fenced("h", revision)), &team_b).await;
    assert_eq!(renew.unwrap_err().kind(), Kind::Forbidden);
    let release = core.release(request(fenced("h", revision)), &team_b).await;
    assert_eq!(release.unwrap_err().kind(), Kind::Forbidden);
    let mut transfer = fenced("h", revision);
    transfer["to"] = json!("g");
    let moved = core.transfer(request(transfer), &team_b).await;
    assert_eq!(moved.unwrap_err().kind(), Kind::Forbidden);
    assert_eq!(records.entry("k"), before, "nothing was written");
}

#[tokio::test]
async fn the_check_holds_when_the_gateway_must_read_the_record_first() {
    let (core, records) = core();
    let revision = acquired_by(&core, &principal("team-a")).await;
    // Another gateway's core: it knows nothing of the key, so it reads.
    let (_, _, hop) = fakes::core(1 << 20);
    let other = LeaseCore::new(records.clone(), hop);
    let renew = other
        .renew(request(fenced("h", revision)), &principal("team-b"))
        .await;
    assert_eq!(renew.unwrap_err().kind(), Kind::Forbidden);
    let renew = other
        .renew(request(fenced("h", revision)), &principal("team-a"))
        .await;
    assert!(renew.is_ok(), "{renew:?}");
}

#[tokio::test]
async fn a_wrong_fence_is_lost_whoever_asks() {
    let (core, _) = core();
    let revision = acquired_by(&core, &principal("team-a")).await;
    let renew = core
        .renew(request(fenced("h", revision + 7)), &principal("team-b"))
        .await;
    assert_eq!(renew.unwrap_err().kind(), Kind::Lost);
}

#[tokio::test]
async fn a_retry_of_a_landed_renew_is_not_another_principals_to_repeat() {
    let (core, _) = core();
    let team_a = principal("team-a");
    let revision = acquired_by(&core, &team_a).await;
    core.renew(request(fenced("h", revision)), &team_a)
        .await
        .unwrap();
    let again = core.renew(request(fenced("h", revision)), &team_a).await;
    assert!(again.is_ok(), "the holder's own retry: {again:?}");
    let replayed = core
        .renew(request(fenced("h", revision)), &principal("team-b"))
        .await;
    assert_eq!(replayed.unwrap_err().kind(), Kind::Forbidden);
}

#[tokio::test]
async fn a_retry_of_a_landed_release_is_not_another_principals_to_repeat() {
    let (core, _) = core();
    let team_a = principal("team-a");
    let revision = acquired_by(&core, &team_a).await;
    core.release(request(fenced("h", revision)), &team_a)
        .await
        .unwrap();
    let replayed = core
        .release(request(fenced("h", revision)), &principal("team-b"))
        .await;
    assert_eq!(replayed.unwrap_err().kind(), Kind::Forbidden);
    let again = core.release(request(fenced("h", revision)), &team_a).await;
    assert!(again.is_ok(), "the holder's own retry: {again:?}");
}

#[tokio::test]
async fn an_admin_releases_a_tenure_another_principal_holds() {
    let (core, records) = core();
    let revision = acquired_by(&core, &principal("team-a")).await;
    let released = core
        .release(request(fenced("h", revision)), &admin("ops"))
        .await;
    assert!(released.is_ok(), "{released:?}");
    let Some(Entry::Free {
        released: Some(tombstone),
        ..
    }) = records.entry("k")
    else {
        panic!("a tombstone")
    };
    assert_eq!(tombstone.principal.as_deref(), Some("team-a"));
}

#[tokio::test]
async fn a_transfers_new_tenure_belongs_to_the_caller_unless_an_admin_names_another() {
    let (core, records) = core();
    let team_a = principal("team-a");
    let revision = acquired_by(&core, &team_a).await;
    let mut transfer = fenced("h", revision);
    transfer["to"] = json!("g");
    let moved = core.transfer(request(transfer), &team_a).await.unwrap();
    assert_eq!(owner_of(&records).as_deref(), Some("team-a"));
    let mut by_admin = fenced("g", moved.lease.revision);
    by_admin["to"] = json!("f");
    core.transfer(request(by_admin.clone()), &admin("ops"))
        .await
        .unwrap();
    assert_eq!(owner_of(&records).as_deref(), Some("ops"), "the caller's");
    let revision = match records.entry("k") {
        Some(Entry::Held { seq, .. }) => seq,
        other => panic!("{other:?}"),
    };
    let mut named = fenced("f", revision);
    named["to"] = json!("e");
    named["to_principal"] = json!("team-b");
    core.transfer(request(named), &admin("ops")).await.unwrap();
    assert_eq!(owner_of(&records).as_deref(), Some("team-b"));
}

#[tokio::test]
async fn a_record_written_without_a_principal_is_renewed_by_any_principal() {
    let (core, records) = core();
    let revision = records.hold("k", "h", 10_000, OffsetDateTime::now_utc());
    let renewed = core
        .renew(request(fenced("h", revision)), &principal("team-b"))
        .await;
    assert!(renewed.is_ok(), "{renewed:?}");
    assert_eq!(owner_of(&records), None, "it stays nobody's");
}

#[tokio::test]
async fn an_acquire_by_another_principal_with_the_holders_id_is_not_granted() {
    let (core, _) = core();
    let revision = acquired_by(&core, &principal("team-a")).await;
    let req = json!({"key": "k", "holder": "h", "ttl_ms": 10_000});
    let grant = core
        .acquire(request(req.clone()), &principal("team-b"))
        .await
        .unwrap();
    assert!(!grant.granted);
    assert_eq!(grant.lease.revision, revision);
    let own = core.acquire(request(req), &principal("team-a")).await;
    assert!(own.unwrap().granted, "the owner asking again");
}

#[tokio::test]
async fn a_forward_names_the_principal_the_holders_tenure_belongs_to() {
    let (core, _, hop) = fakes::core(1 << 20);
    acquired_by(&core, &principal("team-a")).await;
    hop.answer([super::ports::HopOutcome::Replied("ok".into())]);
    let req = json!({"key": "k", "payload": "aGk=", "timeout_ms": 1_000});
    core.forward(request(req)).await.unwrap();
    let sent = hop.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].holder.as_str(), sent[0].principal.as_deref()),
        ("h", Some("team-a"))
    );
}

#[tokio::test]
async fn without_a_policy_records_name_no_principal() {
    let (core, records) = core();
    let revision = acquired_by(&core, &Caller::Anyone).await;
    assert_eq!(owner_of(&records), None);
    core.renew(request(fenced("h", revision)), &Caller::Anyone)
        .await
        .unwrap();
    assert_eq!(owner_of(&records), None);
}
