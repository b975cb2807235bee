//! The fault run's report, in the form etcd's robustness tests and Jepsen
//! give theirs: versions and configuration, workload, each fault with its
//! start and end, and per safety property the verdict with the counts of
//! ok, failed and indeterminate operations it looked at. Everything in it
//! comes from the run's data (or a history read back from its file).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::checker::{Call, Kind, Op, Violation};
use super::history_file::{FaultSpan, op_name, outcome_class};

/// The six properties the report gives a verdict on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Property {
    FencesIncrease,
    OneEntitledHolder,
    ReadsSeeWrites,
    NoWriteLost,
    NoStaleForward,
    HistoryAgrees,
}

impl Property {
    pub const ALL: [Property; 6] = [
        Property::FencesIncrease,
        Property::OneEntitledHolder,
        Property::ReadsSeeWrites,
        Property::NoWriteLost,
        Property::NoStaleForward,
        Property::HistoryAgrees,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Property::FencesIncrease => "fences strictly increase",
            Property::OneEntitledHolder => "at most one entitled holder",
            Property::ReadsSeeWrites => "reads see acknowledged writes",
            Property::NoWriteLost => "no acknowledged write lost",
            Property::NoStaleForward => "forward never processed by a stale tenure",
            Property::HistoryAgrees => "the tenure history agrees with the run",
        }
    }

    /// The checker's violation kind that breaks this property.
    pub fn of(kind: Kind) -> Property {
        match kind {
            Kind::FenceNotIncreasing => Property::FencesIncrease,
            Kind::TwoOwners => Property::OneEntitledHolder,
            Kind::StaleRead => Property::ReadsSeeWrites,
            Kind::LostWrite => Property::NoWriteLost,
            Kind::StaleForward => Property::NoStaleForward,
            Kind::HistoryContradicts => Property::HistoryAgrees,
        }
    }

    /// Whether the checker looks at `op` for this property: writes for
    /// fences, lost writes and entitlement; reads and the writes they must
    /// see for freshness; processed forwards and the entitlements they
    /// must fall in for forwards.
    pub fn looks_at(self, op: &Op) -> bool {
        let write = matches!(
            op.call,
            Call::Acquire { .. }
                | Call::Renew { .. }
                | Call::Release { .. }
                | Call::Transfer { .. }
        );
        match self {
            Property::FencesIncrease
            | Property::OneEntitledHolder
            | Property::NoWriteLost
            | Property::HistoryAgrees => write,
            Property::ReadsSeeWrites => write || matches!(op.call, Call::Owner { .. }),
            Property::NoStaleForward => write || matches!(op.call, Call::Processed { .. }),
        }
    }
}

/// Counts of operations by Jepsen outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub ok: usize,
    pub fail: usize,
    pub indeterminate: usize,
}

impl Tally {
    pub fn of<'a>(ops: impl IntoIterator<Item = &'a Op>) -> Tally {
        let mut tally = Tally::default();
        for op in ops {
            match outcome_class(op) {
                "ok" => tally.ok += 1,
                "fail" => tally.fail += 1,
                _ => tally.indeterminate += 1,
            }
        }
        tally
    }
}

/// One property's line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub property: Property,
    pub pass: bool,
    pub violations: usize,
    pub looked_at: Tally,
}

/// Each property's verdict on `history` given the checker's `violations`.
pub fn verdicts(history: &[Op], violations: &[Violation]) -> Vec<Verdict> {
    Property::ALL
        .iter()
        .map(|&property| {
            let violations = violations
                .iter()
                .filter(|v| Property::of(v.kind) == property)
                .count();
            Verdict {
                property,
                pass: violations == 0,
                violations,
                looked_at: Tally::of(history.iter().filter(|op| property.looks_at(op))),
            }
        })
        .collect()
}

/// What the report says about the run besides the history: name, value
/// pairs for versions and configuration, and for the clients.
#[derive(Debug, Clone, Default)]
pub struct Setting {
    pub configuration: Vec<(String, String)>,
    pub clients: Vec<(String, String)>,
    /// Calls not in the history (forwards are recorded by the owners that
    /// process them), by outcome label.
    pub unrecorded: BTreeMap<String, usize>,
}

/// The report as Markdown.
pub fn render(
    setting: &Setting,
    history: &[Op],
    faults: &[FaultSpan],
    violations: &[Violation],
) -> String {
    let mut out = String::from("# Fault run report\n\n## Versions and configuration\n\n");
    for (name, value) in &setting.configuration {
        let _ = writeln!(out, "- {name}: {value}");
    }
    out.push_str("\n## Workload\n\n");
    for (name, value) in &setting.clients {
        let _ = writeln!(out, "- {name}: {value}");
    }
    if !setting.clients.is_empty() {
        out.push('\n');
    }
    out.push_str("| op | ok | fail | indeterminate |\n| --- | --- | --- | --- |\n");
    let mut by_kind: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in history {
        by_kind.entry(op_name(op)).or_default().push(op);
    }
    for (name, ops) in &by_kind {
        let t = Tally::of(ops.iter().copied());
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} |",
            t.ok, t.fail, t.indeterminate
        );
    }
    if !setting.unrecorded.is_empty() {
        out.push_str(
            "\nCalls not in the history (an owner's processing of one is `processed`):\n\n",
        );
        for (label, n) in &setting.unrecorded {
            let _ = writeln!(out, "- {label}: {n}");
        }
    }
    let _ = writeln!(out, "\n## Faults ({})\n", faults.len());
    out.push_str("| kind | target | start (s) | end (s) |\n| --- | --- | --- | --- |\n");
    for f in faults {
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} | {:.3} |",
            f.kind,
            f.target,
            f.start.as_secs_f64(),
            f.end.as_secs_f64()
        );
    }
    out.push_str("\n## Properties\n\n");
    out.push_str(
        "| property | verdict | violations | ok | fail | indeterminate |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for v in verdicts(history, violations) {
        let t = v.looked_at;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            v.property.title(),
            if v.pass { "pass" } else { "FAIL" },
            v.violations,
            t.ok,
            t.fail,
            t.indeterminate
        );
    }
    if !violations.is_empty() {
        out.push_str("\n## Violations\n\n");
        for v in violations.iter().take(50) {
            let _ = writeln!(out, "- {v}");
        }
    }
    out
}
