//! The fault run's history file is what the checker reads: a history
//! written and read back gets the same verdicts, and a committed example
//! file with a known violation is caught from disk.

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::checker::{Kind, Op, Outcome, check};
use crate::common::fault_report::{Property, Tally, verdicts};
use crate::common::history_file::{self, FaultSpan, History};
use crate::made::{
    acquire, at, granted, held, owner, processed, release, released, renew, transfer,
};

/// Every call and outcome kind, with two violations: holder-b is granted
/// while holder-a is entitled (two owners), and owner-processed forward
/// under a fence below its tenure (stale forward).
fn every_kind() -> History {
    let ops = vec![
        at("k", 0, 10, acquire("holder-a", granted(3))),
        at("k", 1000, 1010, renew("holder-a", 3, granted(4))),
        at("k", 1100, 1100, processed("holder-a", 2)),
        at("k", 1200, 1210, owner(held("holder-a", 4))),
        at("k", 1300, 1310, acquire("holder-b", granted(5))),
        at("k", 1400, 7400, release("holder-b", 5, Outcome::Unknown)),
        at("k", 8000, 8010, renew("holder-a", 4, Outcome::Lost)),
        at("j", 0, 10, transfer("holder-c", 1, "holder-d", granted(6))),
        at("j", 20, 30, release("holder-d", 6, released(8))),
        at("j", 40, 50, owner(Outcome::Free)),
    ];
    let faults = vec![FaultSpan {
        kind: "kill".into(),
        target: "n2 (stream leader)".into(),
        start: Duration::from_millis(500),
        end: Duration::from_nanos(2_345_678_901),
    }];
    History { ops, faults }
}

fn kinds(ops: &[Op]) -> Vec<Kind> {
    let mut kinds: Vec<Kind> = check(ops).iter().map(|v| v.kind).collect();
    kinds.sort_by_key(|k| format!("{k:?}"));
    kinds
}

#[test]
fn a_history_written_and_read_back_gets_the_same_verdicts() {
    let history = every_kind();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs/7/history.jsonl");
    history_file::write(&path, &history).unwrap();
    let again = history_file::read(&path).unwrap();

    assert_eq!(
        kinds(&history.ops),
        vec![Kind::StaleForward, Kind::TwoOwners]
    );
    assert_eq!(kinds(&again.ops), kinds(&history.ops));
    assert_eq!(
        verdicts(&again.ops, &check(&again.ops)),
        verdicts(&history.ops, &check(&history.ops))
    );
    assert_eq!(again.faults, history.faults);
    // Written in invoke order, every field kept: writing it again gives
    // the same text.
    let mut sorted = history.clone();
    sorted.ops.sort_by_key(|op| (op.start, op.end));
    assert_eq!(format!("{:?}", again.ops), format!("{:?}", sorted.ops));
    assert_eq!(
        history_file::to_jsonl(&again),
        std::fs::read_to_string(&path).unwrap()
    );
}

#[test]
fn the_committed_example_history_is_read_from_disk_and_shows_two_owners() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/two-owners.jsonl");
    let history = history_file::read(&path).unwrap();

    assert_eq!(history.ops.len(), 5);
    assert_eq!(
        history.faults,
        vec![FaultSpan {
            kind: "pause".into(),
            target: "n1 (stream leader)".into(),
            start: Duration::from_millis(40),
            end: Duration::from_secs(2),
        }]
    );
    let violations = check(&history.ops);
    assert_eq!(
        violations
            .iter()
            .map(|v| (v.kind, v.key.as_str()))
            .collect::<Vec<_>>(),
        vec![(Kind::TwoOwners, "shard-0")]
    );
    let verdicts = verdicts(&history.ops, &violations);
    let failed: Vec<Property> = verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(|v| v.property)
        .collect();
    assert_eq!(failed, vec![Property::OneEntitledHolder]);
    let one_owner = verdicts
        .iter()
        .find(|v| v.property == Property::OneEntitledHolder)
        .unwrap();
    assert_eq!(
        one_owner.looked_at,
        Tally {
            ok: 2,
            fail: 1,
            indeterminate: 1
        }
    );
}

#[test]
fn a_line_the_checker_cannot_read_is_an_error_naming_it() {
    let text = "{\"type\":\"op\",\"op\":\"acquire\",\"key\":\"k\"}\n";
    let err = history_file::from_jsonl(text).unwrap_err();
    assert_eq!(err, "line 1: no string field \"process\"");
}

/// Re-checks a saved run: `FAULT_HISTORY=target/fault-runs/7/history.jsonl
/// cargo test -p dagnats-leases --test faults a_saved_history -- --ignored --nocapture`
/// (a relative path from the workspace root) prints the properties'
/// verdicts and fails on any violation.
#[test]
#[ignore = "re-checks the history file FAULT_HISTORY names"]
fn a_saved_history_has_no_violation() {
    let path = std::env::var("FAULT_HISTORY").expect("FAULT_HISTORY names a history.jsonl");
    // Tests run in the crate's directory; a relative path is the
    // workspace root's, where `target/` is.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let history = history_file::read(&root.join(&path)).unwrap();
    let violations = check(&history.ops);
    let setting = common::fault_report::Setting {
        configuration: vec![("history".into(), path)],
        ..Default::default()
    };
    println!(
        "{}",
        common::fault_report::render(&setting, &history.ops, &history.faults, &violations)
    );
    assert!(violations.is_empty(), "{} violations", violations.len());
}
