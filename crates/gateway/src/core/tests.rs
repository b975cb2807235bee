//! The decision rules of acquire, renew, release and revoke, over the
//! in-memory fakes (`core/fakes.rs`). Each rule also has its test against a
//! real nats-server in `crates/gateway/tests/leases.rs`.

use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use futures::TryFutureExt;
use futures::future::BoxFuture;

use super::LeaseCore;
use super::fencing::EXPIRY_MARGIN;
use super::lease_core::MAX_ROUNDS;
use crate::core::budget::CALL_BUDGET;
use crate::core::fakes::{self, FakeRecords, WriteScript, request};
use crate::core::{Caller, LeaseError};
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::record::Entry;
use dagnats_leases_wire::reply::{FreeKey, Grant, Owner, Released};

fn core() -> (LeaseCore, std::sync::Arc<FakeRecords>) {
    let (core, records, _) = fakes::core(1 << 20);
    (core, records)
}

async fn acquire(core: &LeaseCore, holder: &str) -> Result<Grant, LeaseError> {
    let req = json!({"key": "k", "holder": holder, "ttl_ms": 10_000});
    core.acquire(request(req), &Caller::Anyone).await
}

async fn renew(core: &LeaseCore, holder: &str, revision: u64) -> Result<Grant, LeaseError> {
    let req = json!({"key": "k", "holder": holder, "revision": revision, "ttl_ms": 20_000});
    core.renew(request(req), &Caller::Anyone).await
}

async fn release(core: &LeaseCore, holder: &str, revision: u64) -> Result<Released, LeaseError> {
    let req = json!({"key": "k", "holder": holder, "revision": revision});
    core.release(request(req), &Caller::Anyone).await
}

fn kind<T: std::fmt::Debug>(result: Result<T, LeaseError>) -> Kind {
    result.expect_err("the call fails").kind()
}

fn released(holder: &str, revision: u64) -> Released {
    Released {
        released: true,
        held: false,
        key: "k".into(),
        holder: holder.into(),
        revision,
    }
}

#[tokio::test]
async fn acquiring_a_free_key_grants_it_at_a_new_revision() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    assert!(grant.granted);
    assert_eq!(grant.lease.key, "k");
    assert_eq!(grant.lease.holder, "a");
    assert_eq!(grant.lease.revision, 1);
    assert_eq!(grant.lease.ttl_ms, 10_000);
    assert_eq!(
        grant.lease.expires_at - grant.lease.acquired_at,
        Duration::from_secs(10)
    );
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Held {
            seq: 1,
            renewed: false,
            ..
        })
    ));
    assert_eq!(records.ttl_secs("k"), Some(10));
}

#[tokio::test]
async fn the_holder_acquiring_again_gets_its_lease_back_unchanged() {
    let (core, records) = core();
    let first = acquire(&core, "a").await.unwrap();
    let again = acquire(&core, "a").await.unwrap();
    assert!(again.granted);
    // The same lease on the wire: same revision, acquired_at and expiry
    // (the TTL is not extended).
    let wire = |grant: &Grant| serde_json::to_value(&grant.lease).expect("a lease serializes");
    assert_eq!(wire(&again), wire(&first));
    assert_eq!(again.lease.revision, 1);
    assert_eq!(records.writes(), 1);
}

#[tokio::test]
async fn another_holder_acquiring_a_held_key_gets_the_current_lease_not_granted() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    let refused = acquire(&core, "b").await.unwrap();
    assert!(!refused.granted);
    assert_eq!(refused.lease.holder, "a");
    assert_eq!(refused.lease.revision, 1);
    assert_eq!(records.writes(), 1);
}

#[tokio::test]
async fn an_expired_key_is_acquired_over_its_marker() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    let marker = records.expire("k");
    let grant = acquire(&core, "b").await.unwrap();
    assert!(grant.granted);
    assert_eq!(grant.lease.holder, "b");
    assert_eq!(grant.lease.revision, marker + 1);
}

#[tokio::test]
async fn acquiring_a_key_never_seen_is_one_write_and_no_read() {
    let (core, records) = core();
    assert!(acquire(&core, "a").await.unwrap().granted);
    assert_eq!((records.reads(), records.writes()), (0, 1));
}

#[tokio::test]
async fn acquiring_a_key_released_here_is_one_write_and_no_read() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    release(&core, "a", 1).await.unwrap();
    let (reads, writes) = (records.reads(), records.writes());
    let grant = acquire(&core, "b").await.unwrap();
    assert!(grant.granted);
    assert_eq!(
        (grant.lease.holder.as_str(), grant.lease.revision),
        ("b", 3)
    );
    assert_eq!((records.reads(), records.writes()), (reads, writes + 1));
}

#[tokio::test]
async fn acquiring_a_key_whose_expiry_was_seen_is_one_write_and_no_read() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    let marker = records.expire("k");
    core.observe("k", marker, None, None);
    let (reads, writes) = (records.reads(), records.writes());
    let grant = acquire(&core, "b").await.unwrap();
    assert_eq!((grant.granted, grant.lease.revision), (true, marker + 1));
    assert_eq!((records.reads(), records.writes()), (reads, writes + 1));
}

#[tokio::test]
async fn acquiring_a_key_believed_free_but_taken_since_names_the_holder() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    release(&core, "a", 1).await.unwrap();
    // Another gateway's acquire this one has not heard of.
    let written_at = OffsetDateTime::now_utc();
    let taken = records.hold("k", "b", 10_000, written_at);
    let (reads, writes) = (records.reads(), records.writes());
    let refused = acquire(&core, "c").await.unwrap();
    assert!(!refused.granted);
    assert_eq!(
        (refused.lease.holder.as_str(), refused.lease.revision),
        ("b", taken)
    );
    assert_eq!(
        refused.lease.expires_at,
        written_at + Duration::from_secs(10)
    );
    // The create that conflicted, then the read that answers.
    assert_eq!((records.reads(), records.writes()), (reads + 1, writes + 1));
}

#[tokio::test]
async fn the_holder_acquiring_a_key_this_gateway_never_saw_gets_its_lease_back_unchanged() {
    let (core, records) = core();
    let written_at = OffsetDateTime::now_utc();
    let held = records.hold("k", "a", 10_000, written_at);
    let again = acquire(&core, "a").await.unwrap();
    assert!(again.granted);
    assert_eq!(again.lease.revision, held);
    assert_eq!(again.lease.acquired_at, written_at);
    assert_eq!(again.lease.expires_at, written_at + Duration::from_secs(10));
    assert!(matches!(records.entry("k"), Some(Entry::Held { seq, .. }) if seq == held));
}

#[tokio::test]
async fn acquiring_a_key_believed_free_whose_marker_was_replaced_reads_and_creates() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    release(&core, "a", 1).await.unwrap();
    // Expired since, unseen here: the release (2) is no longer the last.
    let marker = records.expire("k");
    let grant = acquire(&core, "b").await.unwrap();
    assert_eq!((grant.granted, grant.lease.revision), (true, marker + 1));
}

#[tokio::test]
async fn a_renew_at_the_current_revision_carries_the_new_fence_and_keeps_acquired_at() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    let renewed = renew(&core, "a", grant.lease.revision).await.unwrap();
    assert!(renewed.granted);
    assert_eq!(renewed.lease.revision, 2);
    assert_eq!(renewed.lease.ttl_ms, 20_000);
    assert_eq!(renewed.lease.acquired_at, grant.lease.acquired_at);
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Held {
            seq: 2,
            renewed: true,
            ..
        })
    ));
    assert_eq!(records.ttl_secs("k"), Some(20));
}

#[tokio::test]
async fn a_renew_at_a_revision_this_gateway_wrote_is_one_write_and_no_read() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    let reads = records.reads();
    renew(&core, "a", grant.lease.revision).await.unwrap();
    assert_eq!(records.reads(), reads);
    assert_eq!(records.writes(), 2);
}

#[tokio::test]
async fn a_renew_at_a_stale_revision_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    renew(&core, "a", 1).await.unwrap();
    renew(&core, "a", 2).await.unwrap();
    assert_eq!(kind(renew(&core, "a", 1).await), Kind::Lost);
    assert_eq!(kind(renew(&core, "a", 99).await), Kind::Lost);
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Held { seq: 3, .. })
    ));
}

#[tokio::test]
async fn a_renew_by_another_holder_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    assert_eq!(kind(renew(&core, "b", 1).await), Kind::Lost);
    // Also when this gateway did not write the lease and must read it.
    let (fresh, records_b) = self::core();
    records_b.hold("k", "a", 10_000, OffsetDateTime::now_utc());
    assert_eq!(kind(renew(&fresh, "b", 1).await), Kind::Lost);
    assert_eq!(records.writes(), 1);
    assert_eq!(records_b.writes(), 0);
}

#[tokio::test]
async fn a_renew_after_expiry_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    records.expire("k");
    assert_eq!(kind(renew(&core, "a", 1).await), Kind::Lost);
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Free {
            seq: 2,
            released: None
        })
    ));
}

#[tokio::test]
async fn a_renew_whose_reply_was_lost_answers_the_same_when_retried() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    records.script(WriteScript::LoseNextReply);
    assert_eq!(kind(renew(&core, "a", 1).await), Kind::Unavailable);
    // It landed: revision 2 is the renew's own write.
    let Some(Entry::Held {
        seq: 2,
        renewed: true,
        record,
        ..
    }) = records.entry("k")
    else {
        panic!("the renew landed");
    };
    for _ in 0..2 {
        let retried = renew(&core, "a", 1).await.unwrap();
        assert!(retried.granted);
        assert_eq!(retried.lease.revision, 2);
        assert_eq!(retried.lease.holder, "a");
        assert_eq!(retried.lease.acquired_at, record.acquired_at);
    }
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Held { seq: 2, .. })
    ));
}

#[tokio::test]
async fn a_renew_too_close_to_expiry_is_lost_before_it_is_sent() {
    let (core, records) = core();
    // Due to expire within the margin.
    let written_at = OffsetDateTime::now_utc() - Duration::from_millis(1_000) + EXPIRY_MARGIN / 2;
    let revision = records.hold("k", "a", 1_000, written_at);
    assert_eq!(kind(renew(&core, "a", revision).await), Kind::Lost);
    assert_eq!(records.writes(), 0);
}

#[tokio::test]
async fn a_renew_acknowledged_after_the_lease_was_due_is_lost() {
    let (core, records) = core();
    // Due 1 s past the margin: in time when sent, too late when acknowledged.
    let now = OffsetDateTime::now_utc();
    let written_at = now - Duration::from_millis(1_000) + EXPIRY_MARGIN + Duration::from_secs(1);
    let revision = records.hold("k", "a", 1_000, written_at);
    let due = written_at + Duration::from_millis(1_000);
    records.ack_not_before(due - EXPIRY_MARGIN);
    assert_eq!(kind(renew(&core, "a", revision).await), Kind::Lost);
    // The write landed, and was taken back at its own revision: nothing
    // stays held in the name of a holder told it lost the lease.
    assert_eq!(records.writes(), 2);
    let Some(Entry::Free {
        released: Some(tombstone),
        ..
    }) = records.entry("k")
    else {
        panic!("the renewed record is purged: {:?}", records.entry("k"));
    };
    assert_eq!(
        (tombstone.holder.as_str(), tombstone.prev),
        ("a", revision + 1)
    );
    assert!(tombstone.revoked, "not a release by the holder");
    // Not before the lease it renewed was due: until then its holder is
    // entitled by its last grant, and nobody else may take the key.
    assert!(
        tombstone.released_at >= due,
        "{} < {due}",
        tombstone.released_at
    );
}

#[tokio::test]
async fn a_late_renew_is_withdrawn_even_when_the_call_budget_runs_out_first() {
    // Acknowledged at 4.4 s, inside the margin of a lease due at 4.6 s: the
    // withdrawal waits for 4.6 s, past the 4.5 s budget that answers the
    // call. It must finish anyway, or the late record would stay.
    let (core, records) = core();
    let due = OffsetDateTime::now_utc() + Duration::from_millis(4_600);
    let revision = records.hold("k", "a", 1_000, due - Duration::from_millis(1_000));
    // Read once, so the renew's one round trip is its write.
    core.owner(request(json!({"key": "k"}))).await.unwrap();
    records.round_trip(Duration::from_millis(4_400));
    let err = renew(&core, "a", revision).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        (Kind::Unavailable, OVER_BUDGET)
    );
    records.round_trip(Duration::ZERO);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while !matches!(records.entry("k"), Some(Entry::Free { .. })) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            records.entry("k")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some(Entry::Free {
        released: Some(tombstone),
        ..
    }) = records.entry("k")
    else {
        unreachable!()
    };
    assert_eq!(
        (tombstone.holder.as_str(), tombstone.prev),
        ("a", revision + 1)
    );
    assert!(tombstone.released_at >= due);
}

#[tokio::test]
async fn a_retry_of_a_renew_refused_as_too_late_is_lost_too() {
    let (core, records) = core();
    let now = OffsetDateTime::now_utc();
    let written_at = now - Duration::from_millis(1_000) + EXPIRY_MARGIN + Duration::from_secs(1);
    let revision = records.hold("k", "a", 1_000, written_at);
    records.ack_not_before(written_at + Duration::from_millis(1_000) - EXPIRY_MARGIN);
    assert_eq!(kind(renew(&core, "a", revision).await), Kind::Lost);
    assert_eq!(kind(renew(&core, "a", revision).await), Kind::Lost);
    assert_eq!(kind(release(&core, "a", revision).await), Kind::Lost);
    let other = acquire(&core, "b").await.unwrap();
    assert!(other.granted, "the key is free");
}

#[tokio::test]
async fn a_release_past_the_lease_expiry_is_lost() {
    let (core, records) = core();
    // Past its expiry; the server has not expired it yet.
    let written_at = OffsetDateTime::now_utc() - Duration::from_secs(2);
    let revision = records.hold("k", "a", 1_000, written_at);
    assert_eq!(kind(release(&core, "a", revision).await), Kind::Lost);
    assert_eq!(records.writes(), 0);
}

#[tokio::test]
async fn an_acquire_of_an_overdue_lease_is_a_new_tenure_over_the_expiry_marker() {
    let (core, records) = core();
    let written_at = OffsetDateTime::now_utc() - Duration::from_secs(2);
    let stale = records.hold("k", "a", 1_000, written_at);
    let expiring = records.clone();
    let marker = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        expiring.expire("k")
    });
    let before = OffsetDateTime::now_utc();
    let grant = acquire(&core, "a").await.unwrap();
    let marker = marker.await.unwrap();
    assert!(grant.granted);
    assert!(marker > stale);
    assert_eq!(grant.lease.revision, marker + 1, "written over the marker");
    assert!(grant.lease.acquired_at >= before, "a new tenure");
    assert!(grant.lease.expires_at > before);
    // The key was never seen here, so the first write is a create that
    // expects no message and is refused; the second lands over the marker.
    assert_eq!(records.writes(), 2);
}

#[tokio::test]
async fn an_acquire_of_an_overdue_lease_the_server_never_frees_is_unavailable() {
    let (core, records) = core();
    let written_at = OffsetDateTime::now_utc() - Duration::from_secs(2);
    let overdue = records.hold("k", "a", 1_000, written_at);
    assert_eq!(kind(acquire(&core, "b").await), Kind::Unavailable);
    // One create that expects no message (the key was never seen here),
    // refused; nothing expecting the overdue record's revision.
    assert_eq!(records.writes(), 1);
    let last = records.entry("k").expect("the overdue record");
    assert!(
        matches!(last, Entry::Held { seq, .. } if seq == overdue),
        "the overdue record is still the key's last, untouched: {last:?}"
    );
}

#[tokio::test]
async fn a_renew_that_conflicts_every_round_is_unavailable() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    records.script(WriteScript::AlwaysConflict);
    let err = renew(&core, "a", 1).await.unwrap_err();
    assert_eq!(err.kind(), Kind::Unavailable);
    assert_eq!(err.to_string(), "k changed on every attempt; retry later");
    // The acquire, the attempt at the known revision, then MAX_ROUNDS reads and writes.
    assert_eq!(records.writes(), 1 + 1 + MAX_ROUNDS);
}

#[tokio::test]
async fn an_acquire_that_conflicts_every_round_is_unavailable() {
    let (core, records) = core();
    records.script(WriteScript::AlwaysConflict);
    let err = acquire(&core, "a").await.unwrap_err();
    assert_eq!(err.kind(), Kind::Unavailable);
    assert_eq!(err.to_string(), "k changed on every attempt; retry later");
    assert_eq!(records.writes(), MAX_ROUNDS);
}

const OVER_BUDGET: &str = "the call did not finish within 4500 ms: JetStream is slow or electing a leader; it may have taken effect; retry later";

#[tokio::test(start_paused = true)]
async fn a_call_whose_round_trips_add_up_past_the_budget_answers_unavailable_when_it_runs_out() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    // Every compare-and-set loses and each round trip takes 1 s, each well
    // within the store's own timeout: the rounds would take 1 + 4 x 2 s.
    records.script(WriteScript::AlwaysConflict);
    records.round_trip(Duration::from_secs(1));
    let started = tokio::time::Instant::now();
    let err = renew(&core, "a", 1).await.unwrap_err();
    assert_eq!(started.elapsed(), CALL_BUDGET);
    assert_eq!(
        (err.kind(), err.to_string().as_str()),
        (Kind::Unavailable, OVER_BUDGET)
    );
    // The acquire, then writes sent at 0, 2 and 4 s; none after the budget.
    assert_eq!(records.writes(), 1 + 3);
}

#[tokio::test(start_paused = true)]
async fn every_key_call_answers_unavailable_when_the_budget_runs_out() {
    let (core, records) = core();
    let held = acquire(&core, "a").await.unwrap().lease.revision;
    records.round_trip(CALL_BUDGET + Duration::from_secs(1));
    let key = json!({"key": "k"});
    let fenced = json!({"key": "k", "holder": "a", "revision": held, "ttl_ms": 10_000, "to": "b"});
    let calls: [(&str, BoxFuture<'_, Result<(), LeaseError>>); 6] = [
        (
            "acquire",
            Box::pin(async { acquire(&core, "b").await.map(drop) }),
        ),
        (
            "renew",
            Box::pin(async { renew(&core, "a", held).await.map(drop) }),
        ),
        (
            "release",
            Box::pin(async { release(&core, "a", held).await.map(drop) }),
        ),
        (
            "transfer",
            Box::pin(core.transfer(request(fenced), &Caller::Anyone).map_ok(drop)),
        ),
        (
            "owner",
            Box::pin(core.owner(request(key.clone())).map_ok(drop)),
        ),
        ("revoke", Box::pin(core.revoke(request(key)).map_ok(drop))),
    ];
    for (op, call) in calls {
        let started = tokio::time::Instant::now();
        let err = call.await.expect_err(op);
        assert_eq!(started.elapsed(), CALL_BUDGET, "{op}");
        assert_eq!(
            (err.kind(), err.to_string().as_str()),
            (Kind::Unavailable, OVER_BUDGET),
            "{op}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_call_that_finishes_within_the_budget_is_answered_in_full() {
    let (core, records) = core();
    // A read and a write of 2 s each: 4 s in all.
    records.round_trip(Duration::from_secs(2));
    let grant = acquire(&core, "a").await.unwrap();
    assert!(grant.granted);
    assert_eq!(records.writes(), 1);
}

#[tokio::test]
async fn a_release_frees_the_key_with_a_tombstone_at_a_new_revision() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    assert_eq!(release(&core, "a", 1).await.unwrap(), released("a", 2));
    let Some(Entry::Free {
        seq: 2,
        released: Some(tombstone),
    }) = records.entry("k")
    else {
        panic!("a tombstone at revision 2");
    };
    assert_eq!((tombstone.holder.as_str(), tombstone.prev), ("a", 1));
    assert!(!tombstone.revoked);
    // The tombstone lives as long as the lease it ends.
    assert_eq!(records.ttl_secs("k"), Some(10));
}

#[tokio::test]
async fn a_release_at_a_stale_revision_or_by_another_holder_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    renew(&core, "a", 1).await.unwrap();
    renew(&core, "a", 2).await.unwrap();
    assert_eq!(kind(release(&core, "a", 1).await), Kind::Lost);
    assert_eq!(kind(release(&core, "b", 3).await), Kind::Lost);
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Held { seq: 3, .. })
    ));
}

#[tokio::test]
async fn a_release_after_expiry_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    records.expire("k");
    assert_eq!(kind(release(&core, "a", 1).await), Kind::Lost);
}

#[tokio::test]
async fn a_release_whose_reply_was_lost_answers_released_when_retried() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    records.script(WriteScript::LoseNextReply);
    assert_eq!(kind(release(&core, "a", 1).await), Kind::Unavailable);
    for _ in 0..2 {
        assert_eq!(release(&core, "a", 1).await.unwrap(), released("a", 2));
    }
    assert!(matches!(
        records.entry("k"),
        Some(Entry::Free { seq: 2, .. })
    ));
}

#[tokio::test]
async fn a_release_by_a_holder_whose_lease_was_revoked_is_lost() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    let revoked = core.revoke(request(json!({"key": "k"}))).await.unwrap();
    assert_eq!(revoked, released("a", 2));
    assert_eq!(kind(release(&core, "a", 1).await), Kind::Lost);
    let Some(Entry::Free {
        released: Some(tombstone),
        ..
    }) = records.entry("k")
    else {
        panic!("a tombstone");
    };
    assert!(tombstone.revoked);
}

#[tokio::test]
async fn revoking_a_free_key_is_not_held() {
    let (core, _) = core();
    let err = core.revoke(request(json!({"key": "k"}))).await.unwrap_err();
    assert_eq!(err.kind(), Kind::NotHeld);
}

#[tokio::test]
async fn revoke_clears_a_corrupt_record_with_a_higher_fence() {
    let (core, records) = core();
    let bad = records.corrupt("k");
    let revoked = core.revoke(request(json!({"key": "k"}))).await.unwrap();
    assert!(revoked.revision > bad);
    assert_eq!(revoked, released("", revoked.revision));
    assert!(matches!(records.entry("k"), Some(Entry::Free { seq, .. }) if seq == revoked.revision));
    assert!(acquire(&core, "a").await.unwrap().lease.revision > revoked.revision);
}

#[tokio::test]
async fn a_change_event_tells_the_bucket_the_revision_it_reached() {
    let (core, records) = core();
    core.observe("k", 41, None, None);
    core.observe("j", 7, None, None);
    assert_eq!(records.saw_revision(), 41);
}

async fn owner(core: &LeaseCore) -> Owner {
    core.owner(request(json!({"key": "k"}))).await.unwrap()
}

#[tokio::test]
async fn an_owner_read_of_a_key_this_gateway_knows_is_one_check_and_no_read() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    let reads = records.reads();
    assert_eq!(owner(&core).await, Owner::Held(grant.lease.clone()));
    assert_eq!((records.reads(), records.barriers()), (reads, 1));
    let released = release(&core, "a", grant.lease.revision).await.unwrap();
    let free = Owner::Free(FreeKey {
        held: false,
        key: "k".into(),
    });
    assert_eq!(owner(&core).await, free, "freed at {}", released.revision);
    assert_eq!((records.reads(), records.barriers()), (reads, 2));
}

#[tokio::test]
async fn an_owner_read_whose_known_revision_is_stale_reads_the_key() {
    let (core, records) = core();
    acquire(&core, "a").await.unwrap();
    // Another gateway's write this one never heard of.
    let seq = records.hold("k", "b", 5_000, OffsetDateTime::now_utc());
    let reads = records.reads();
    let Owner::Held(lease) = owner(&core).await else {
        panic!("k is held")
    };
    assert_eq!((lease.holder.as_str(), lease.revision), ("b", seq));
    assert_eq!((records.reads(), records.barriers()), (reads + 1, 1));
}

#[tokio::test]
async fn an_owner_read_of_a_key_never_seen_reads_it() {
    let (core, records) = core();
    records.hold("k", "b", 5_000, OffsetDateTime::now_utc());
    let Owner::Held(lease) = owner(&core).await else {
        panic!("k is held")
    };
    assert_eq!(lease.holder, "b");
    assert_eq!((records.reads(), records.barriers()), (1, 0));
}

#[tokio::test]
async fn a_key_read_to_have_no_message_left_is_forgotten_so_its_next_owner_read_is_one_read() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    release(&core, "a", grant.lease.revision).await.unwrap();
    records.vanish("k");
    let free = Owner::Free(FreeKey {
        held: false,
        key: "k".into(),
    });
    assert_eq!(owner(&core).await, free);
    assert_eq!(records.barriers(), 1, "the known free revision was checked");
    let reads = records.reads();
    assert_eq!(owner(&core).await, free);
    assert_eq!((records.reads(), records.barriers()), (reads + 1, 1));
}

#[tokio::test]
async fn a_renew_that_waited_past_its_send_by_unsent_is_lost_and_the_lease_stays_as_it_was() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    records.script(WriteScript::NotSentInTime);
    let before = records.entry("k");
    assert_eq!(
        kind(renew(&core, "a", grant.lease.revision).await),
        Kind::Lost
    );
    assert_eq!(
        records.entry("k"),
        before,
        "nothing written, nothing to undo"
    );
    let req = json!({"key": "k", "holder": "a", "revision": grant.lease.revision, "to": "b", "ttl_ms": 10_000});
    assert_eq!(
        kind(core.transfer(request(req), &Caller::Anyone).await),
        Kind::Lost
    );
    assert_eq!(records.entry("k"), before);
}

#[tokio::test]
async fn a_write_no_stream_takes_is_unavailable_names_an_election_and_asks_for_a_bucket_check() {
    let (core, records) = core();
    let grant = acquire(&core, "a").await.unwrap();
    let before = records.entry("k");
    records.script(WriteScript::NoListener);
    let err = renew(&core, "a", grant.lease.revision).await.unwrap_err();
    assert_eq!(err.kind(), Kind::Unavailable);
    assert_eq!(
        err.to_string(),
        "leases are unavailable: no stream took the write: the leases stream is electing a \
         leader, or the bucket is gone (the gateway is checking it); retry later"
    );
    assert_eq!(records.repairs(), 1, "one check of the bucket");
    assert_eq!(records.entry("k"), before, "nothing written");
}

/// The relay hands a gateway's own change events the record the gateway
/// wrote (`core/written.rs`) instead of parsing it, so that record must be
/// the one its bytes parse to, to the nanosecond.
#[test]
fn a_written_lease_record_is_the_one_its_bytes_parse_to() {
    use dagnats_leases_wire::names::HEADER_EVENT;
    use dagnats_leases_wire::record::decode_entry;
    let at = time::macros::datetime!(2026-10-18 12:00:15.250_999_999 UTC);
    let holder = dagnats_leases_wire::request::HolderId::try_from("h".to_string()).unwrap();
    let ttl = dagnats_leases_wire::request::Ttl::try_from(3_000).unwrap();
    let written = at + Duration::from_nanos(1_500_001);
    let record = super::records::lease_record(&holder, ttl, (at, written), 7, Some("team-a"));
    let body = serde_json::to_vec(&record).unwrap();
    let header = |name: &str| (name == HEADER_EVENT).then_some("renewed");
    let Ok(Entry::Held { record: parsed, .. }) = decode_entry(8, at, header, &body) else {
        panic!("a renew's record reads back")
    };
    assert_eq!(parsed, record);
}
