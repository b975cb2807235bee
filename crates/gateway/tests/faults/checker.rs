//! The history checker catches each kind of violation in a hand-made
//! history, and passes a clean one: a checker that never fails cannot pass.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common;
use crate::common::checker::{Kind, Op, Outcome, Recorded, check, check_tenures};
use crate::made::{
    acquire, at, granted, granted_lasting, held, owner, processed, release, released, renew,
    transfer,
};

/// Two tenures on `k` (release, then takeover), an expiry and takeover on
/// `k2`, reads, forwards, and calls with unknown outcomes.
fn clean() -> Vec<Op> {
    vec![
        at("k", 0, 10, acquire("a", granted(1))),
        at("k", 1000, 1010, renew("a", 1, granted(2))),
        at("k", 1020, 1030, owner(held("a", 2))),
        at("k", 1040, 1050, acquire("b", held("a", 2))),
        at("k", 1100, 1100, processed("a", 2)),
        at("k", 1500, 5500, renew("a", 2, Outcome::Unknown)),
        at("k", 2000, 2010, release("a", 2, released(3))),
        at("k", 2020, 2030, owner(Outcome::Free)),
        at("k", 2040, 2050, acquire("b", granted(4))),
        at("k", 2100, 2100, processed("b", 4)),
        at("k2", 3000, 3010, acquire("c", granted(5))),
        // c stops renewing; the server expires the key (marker 6).
        at("k2", 6500, 6510, renew("c", 5, Outcome::Lost)),
        at("k2", 7000, 7010, acquire("d", granted(7))),
        at("k2", 7100, 7110, owner(held("d", 7))),
    ]
}

fn kinds(history: &[Op]) -> BTreeSet<String> {
    check(history)
        .iter()
        .map(|v| format!("{:?}", v.kind))
        .collect()
}

fn assert_only(history: Vec<Op>, kind: Kind) {
    let found = kinds(&history);
    assert_eq!(
        found,
        BTreeSet::from([format!("{kind:?}")]),
        "{:#?}",
        check(&history)
    );
}

fn with(extra: Vec<Op>) -> Vec<Op> {
    let mut history = clean();
    history.extend(extra);
    history
}

#[test]
fn a_clean_history_has_no_violation() {
    let violations = check(&clean());
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn an_idempotent_acquire_does_not_extend_entitlement() {
    // a's second acquire returns the same lease, expiring 1 s after that
    // request started: b taking the key after it is fine.
    let history = vec![
        at("k", 0, 10, acquire("a", granted(1))),
        at(
            "k",
            2000,
            2010,
            acquire("a", granted_lasting(1, Duration::from_millis(1000))),
        ),
        at("k", 3500, 3510, acquire("b", granted(3))),
    ];
    assert!(check(&history).is_empty(), "{:#?}", check(&history));
}

#[test]
fn an_acquire_that_finds_the_holders_own_lease_continues_its_entitlement() {
    // a renews to 12, asks acquire again and gets 12 back, then releases:
    // its one entitlement ends at the release, so b may take the key.
    let history = vec![
        at("k3", 0, 10, acquire("a", granted(10))),
        at("k3", 1000, 1010, renew("a", 10, granted(12))),
        at(
            "k3",
            2000,
            2010,
            acquire("a", granted_lasting(12, Duration::from_millis(2000))),
        ),
        at("k3", 2500, 2510, release("a", 12, released(13))),
        at("k3", 2600, 2610, acquire("b", granted(14))),
    ];
    assert!(check(&history).is_empty(), "{:#?}", check(&history));
}

/// a's tenure of k3 at fence 10, released (11).
fn released_k3() -> Vec<Op> {
    vec![
        at("k3", 0, 10, acquire("a", granted(10))),
        at("k3", 100, 110, release("a", 10, released(11))),
    ]
}

#[test]
fn a_later_tenure_with_a_lower_fence_is_caught() {
    let mut history = released_k3();
    history.push(at("k3", 200, 210, acquire("b", granted(9))));
    assert_only(history, Kind::FenceNotIncreasing);
}

#[test]
fn two_holders_entitled_at_once_are_caught() {
    assert_only(
        vec![
            at("k3", 0, 10, acquire("a", granted(10))),
            at("k3", 1000, 1010, acquire("b", granted(11))),
        ],
        Kind::TwoOwners,
    );
}

#[test]
fn a_read_older_than_a_completed_renew_is_caught() {
    assert_only(
        with(vec![at("k", 1020, 1030, owner(held("a", 1)))]),
        Kind::StaleRead,
    );
}

#[test]
fn a_free_read_of_a_live_unreleased_lease_is_caught() {
    assert_only(
        with(vec![at("k2", 3100, 3110, owner(Outcome::Free))]),
        Kind::StaleRead,
    );
}

#[test]
fn a_list_that_leaves_out_a_live_lease_or_shows_it_older_is_caught() {
    // A list reads every key at once: as one owner read of each.
    let keys = ["k".to_string(), "k2".to_string()];
    let list = |at_ms: u64, listed: &[(&str, &str, u64)]| {
        let listed: Vec<_> = listed
            .iter()
            .map(|(k, h, r)| (k.to_string(), h.to_string(), *r))
            .collect();
        let span = (ms(at_ms), ms(at_ms + 10));
        common::checker::list_reads(&keys, span, &listed)
    };
    // At 1020 k is held at 2 and k2 is free: the whole truth.
    assert!(check(&with(list(1020, &[("k", "a", 2)]))).is_empty());
    // k shown at 1 after its renew to 2 completed.
    assert_only(with(list(1020, &[("k", "a", 1)])), Kind::StaleRead);
    // At 3100 b holds k at 4 and c holds k2 at 5: a list without k2.
    assert_only(with(list(3100, &[("k", "b", 4)])), Kind::StaleRead);
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_revision_acknowledged_twice_is_a_lost_write() {
    // The stream handed out sequence 5 again after losing the first write.
    assert_only(
        with(vec![at("k3", 9000, 9010, acquire("e", granted(5)))]),
        Kind::LostWrite,
    );
}

#[test]
fn a_batch_that_hands_out_revisions_one_off_is_caught() {
    // Renews of k4 and k5 went out in one atomic batch and landed at 21
    // and 22, but their callers were told 22 and 23 (the commit's sequence
    // taken as the first's). The next write, alone, lands at 23 and is
    // told so: 23 is acknowledged twice, and k4 reads older than its renew.
    let history = vec![
        at("k4", 0, 10, acquire("a", granted(19))),
        at("k5", 0, 10, acquire("b", granted(20))),
        at("k4", 1000, 1010, renew("a", 19, granted(22))),
        at("k5", 1000, 1010, renew("b", 20, granted(23))),
        at("k6", 1100, 1110, acquire("c", granted(23))),
        at("k4", 1200, 1210, owner(held("a", 21))),
    ];
    let expected = [Kind::LostWrite, Kind::StaleRead].map(|kind| format!("{kind:?}"));
    assert_eq!(
        kinds(&history),
        BTreeSet::from(expected),
        "{:#?}",
        check(&history)
    );
}

#[test]
fn a_forward_processed_after_entitlement_ended_is_caught() {
    assert_only(
        vec![at("k", 2005, 2005, processed("a", 2))],
        Kind::StaleForward,
    );
}

#[test]
fn a_forward_processed_under_a_fence_of_an_earlier_tenure_is_caught() {
    let mut history = released_k3();
    history.push(at("k3", 200, 210, acquire("a", granted(12))));
    history.push(at("k3", 300, 300, processed("a", 10)));
    assert_only(history, Kind::StaleForward);
}

/// a hands k4 to b; b renews and serves a forward; a's late renew is lost.
fn handed_over() -> Vec<Op> {
    vec![
        at("k4", 0, 10, acquire("a", granted(20))),
        at("k4", 1000, 1010, renew("a", 20, granted(21))),
        at("k4", 1500, 1510, transfer("a", 21, "b", granted(22))),
        at("k4", 1520, 1530, owner(held("b", 22))),
        at("k4", 1600, 1600, processed("b", 22)),
        at("k4", 2500, 2510, renew("b", 22, granted(23))),
        at("k4", 2600, 2610, renew("a", 21, Outcome::Lost)),
        at("k4", 2700, 2700, processed("b", 23)),
    ]
}

#[test]
fn a_transfer_ends_the_senders_tenure_and_starts_the_receivers() {
    let violations = check(&handed_over());
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn a_sender_still_acting_after_its_transfer_is_two_owners() {
    // a's renew landing after its own transfer (it should have stopped):
    // a and b both entitled.
    assert_only(
        vec![
            at("k4", 0, 10, acquire("a", granted(20))),
            at("k4", 1500, 1510, transfer("a", 20, "b", granted(22))),
            at("k4", 1700, 1710, renew("a", 20, granted(23))),
            at("k4", 1800, 1800, processed("b", 22)),
        ],
        Kind::TwoOwners,
    );
}

#[test]
fn a_transfer_granted_while_another_holder_is_entitled_is_two_owners() {
    // c holds k5; a transfer from a (who holds nothing) to b is granted.
    assert_only(
        vec![
            at("k5", 0, 10, acquire("c", granted(30))),
            at("k5", 500, 510, transfer("a", 29, "b", granted(31))),
        ],
        Kind::TwoOwners,
    );
}

/// b asks for k8 while a hands it to b; b's acquire, started first and
/// answered last, finds the transferred record: one tenure, which ends
/// when b hands the key on to c.
fn handed_on() -> Vec<Op> {
    vec![
        at("k8", 0, 10, acquire("a", granted(50))),
        at("k8", 1000, 2100, acquire("b", granted(51))),
        at("k8", 1020, 1023, transfer("a", 50, "b", granted(51))),
        at("k8", 3100, 3105, transfer("b", 51, "c", granted(52))),
    ]
}

#[test]
fn a_receivers_acquire_answered_with_the_transferred_lease_ends_with_its_next_transfer() {
    let mut history = handed_on();
    history.push(at("k8", 3200, 3200, processed("c", 52)));
    let violations = check(&history);
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn a_receiver_still_acting_after_handing_on_a_transferred_lease_is_two_owners() {
    // b renews after handing k8 on: b and c at once.
    let mut history = handed_on();
    history.push(at("k8", 3300, 3310, renew("b", 51, granted(53))));
    assert_only(history, Kind::TwoOwners);
}

#[test]
fn a_forward_processed_by_the_sender_after_its_transfer_is_caught() {
    let mut history = handed_over();
    history.push(at("k4", 1505, 1505, processed("a", 21)));
    assert_only(history, Kind::StaleForward);
}

#[test]
fn a_transfer_with_a_lower_fence_than_the_renew_before_it_is_caught() {
    assert_only(
        vec![
            at("k6", 0, 10, acquire("a", granted(40))),
            at("k6", 1000, 1010, renew("a", 40, granted(41))),
            at("k6", 1500, 1510, transfer("a", 41, "b", granted(39))),
        ],
        Kind::FenceNotIncreasing,
    );
}

mod shard_groups {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::common::shard_checker::{Kind, Line, Member, check};

    const TTL: Duration = Duration::from_secs(2);
    const END: Duration = Duration::from_secs(60);

    fn line(ms: u64, owned: &[(u32, u64)]) -> Line {
        Line {
            at: Duration::from_millis(ms),
            owned: owned.iter().copied().collect::<BTreeMap<_, _>>(),
        }
    }

    fn member(name: &str, lines: Vec<Line>, halts: &[u64]) -> Member {
        Member {
            name: name.into(),
            lines,
            halts: halts.iter().map(|ms| Duration::from_millis(*ms)).collect(),
        }
    }

    fn kinds(members: &[Member]) -> Vec<Kind> {
        check(members, TTL, END)
            .into_iter()
            .map(|v| v.kind)
            .collect()
    }

    #[test]
    fn a_clean_handover_passes() {
        // a drops shard 0 at 1000 ms (hands it over), b prints it after.
        let a = member(
            "a",
            vec![line(0, &[(0, 5), (1, 6)]), line(1000, &[(1, 6)])],
            &[],
        );
        let b = member("b", vec![line(1001, &[(0, 9)])], &[]);
        assert_eq!(kinds(&[a, b]), vec![]);
    }

    #[test]
    fn a_takeover_after_a_crash_waits_out_the_ttl_from_the_last_line() {
        // a last printed at 500 ms and was killed at 800 ms: entitled until
        // 2500 ms; b printing at 2600 ms is clean, at 2400 ms is not.
        let a = || member("a", vec![line(500, &[(3, 7)])], &[800]);
        let late = member("b", vec![line(2600, &[(3, 8)])], &[]);
        assert_eq!(kinds(&[a(), late]), vec![]);
        let early = member("b", vec![line(2400, &[(3, 8)])], &[]);
        assert_eq!(kinds(&[a(), early]), vec![Kind::TwoOwners]);
    }

    #[test]
    fn an_overlap_is_caught() {
        let a = member("a", vec![line(0, &[(2, 5)]), line(3000, &[])], &[]);
        let b = member("b", vec![line(1000, &[(2, 9)])], &[]);
        assert_eq!(kinds(&[a, b]), vec![Kind::TwoOwners]);
    }

    #[test]
    fn a_fence_going_backwards_is_caught() {
        let a = member("a", vec![line(0, &[(4, 9)]), line(1000, &[])], &[]);
        let b = member("b", vec![line(2000, &[(4, 7)])], &[]);
        assert_eq!(kinds(&[a, b]), vec![Kind::FenceWentBack]);
    }
}

fn recorded(key: &str, holder: &str, tenure: u64, end: Option<u64>) -> Recorded {
    Recorded {
        key: key.into(),
        holder: holder.into(),
        tenure,
        end_revision: end,
    }
}

/// a acquires k at 1, renews at 2, hands it to b at 3; b holds it at the end.
fn tenures_ops() -> Vec<Op> {
    vec![
        at("k", 0, 10, acquire("a", granted(1))),
        at("k", 20, 30, renew("a", 1, granted(2))),
        at("k", 40, 50, transfer("a", 2, "b", granted(3))),
    ]
}

fn tenure_kinds(recorded: &[Recorded]) -> Vec<String> {
    let held = [("k".to_string(), "b".to_string(), 3)];
    check_tenures(&tenures_ops(), recorded, &held)
        .iter()
        .map(|v| format!("{:?}: {}", v.kind, v.detail))
        .collect()
}

#[test]
fn a_history_that_agrees_with_the_run_has_no_violation() {
    let clean = [recorded("k", "a", 1, Some(3)), recorded("k", "b", 3, None)];
    assert_eq!(tenure_kinds(&clean), Vec::<String>::new());
    let first_missed = [recorded("k", "b", 3, None)];
    assert_eq!(
        tenure_kinds(&first_missed),
        Vec::<String>::new(),
        "a tenure the history may miss"
    );
}

#[test]
fn a_tenure_recorded_twice_is_caught() {
    let twice = [
        recorded("k", "a", 1, Some(3)),
        recorded("k", "a", 1, Some(3)),
        recorded("k", "b", 3, None),
    ];
    let found = tenure_kinds(&twice);
    assert!(
        found.len() == 1 && found[0].contains("recorded twice"),
        "{found:?}"
    );
}

#[test]
fn two_tenures_of_a_key_overlapping_are_caught() {
    let overlapping = [recorded("k", "a", 1, None), recorded("k", "b", 3, None)];
    let found = tenure_kinds(&overlapping);
    assert!(
        found.len() == 1 && found[0].contains("overlaps"),
        "{found:?}"
    );
    let ends_late = [recorded("k", "a", 1, Some(4)), recorded("k", "b", 3, None)];
    assert_eq!(tenure_kinds(&ends_late).len(), 1);
}

#[test]
fn a_tenure_of_another_holder_or_at_a_renews_revision_is_caught() {
    let wrong_holder = [recorded("k", "c", 1, Some(3)), recorded("k", "b", 3, None)];
    let found = tenure_kinds(&wrong_holder);
    assert!(
        found.len() == 1 && found[0].contains("granted to a"),
        "{found:?}"
    );
    let at_a_renew = [recorded("k", "a", 2, Some(3)), recorded("k", "b", 3, None)];
    let found = tenure_kinds(&at_a_renew);
    assert!(
        found.len() == 1 && found[0].contains("starts at the revision"),
        "{found:?}"
    );
}

#[test]
fn a_history_without_the_tenure_that_holds_the_key_at_the_end_is_caught() {
    let missing = [recorded("k", "a", 1, Some(3))];
    let found = tenure_kinds(&missing);
    assert!(
        found.len() == 1 && found[0].contains("holds it at 3"),
        "{found:?}"
    );
    assert!(found[0].starts_with("HistoryContradicts"), "{found:?}");
}
