//! A safety checker for recorded lease histories, in the manner of the
//! etcd and ZooKeeper checks: concurrent clients record every operation
//! with its start and end instants and its outcome, and the checker looks
//! for what must never happen, per key:
//!
//! - (a) [`Kind::FenceNotIncreasing`]: a write acknowledged after another
//!   one completed carries a lower or equal fence (successive tenures'
//!   fences strictly increase);
//! - (b) [`Kind::TwoOwners`]: two holders entitled to act as owner at the
//!   same moment;
//! - (c) [`Kind::StaleRead`]: a read that starts after a write completed
//!   sees neither that write nor a later one;
//! - (d) [`Kind::LostWrite`]: one revision acknowledged to two different
//!   writes, i.e. an acknowledged write was lost and its sequence reused
//!   (the revision is the stream sequence, unique across keys);
//! - (e) [`Kind::StaleForward`]: a forwarded request processed by a holder
//!   that was not entitled, or under a fence below its tenure's start;
//! - (f) [`Kind::HistoryContradicts`] ([`check_tenures`]): the tenure
//!   history read after the run records a tenure twice, two tenures of a
//!   key overlapping, a tenure of another holder than the one granted it,
//!   a tenure at a revision that started none (a renew's or a release's),
//!   or leaves out the tenure that holds a key at the end.
//!
//! Entitlement is the conservative rule a holder follows: it starts when
//! the granting reply arrives and runs until the granting request's start
//! plus the TTL (or less, when the reply's `expires_at` says so, as for an
//! idempotent acquire that did not extend the lease); renew extends it, a
//! release ends it when sent, `lost` ends it when heard. A transfer ends
//! the sender's entitlement when sent (it stops acting as owner first,
//! whatever the answer) and, granted, starts the receiver's as an acquire
//! granted to it would: a new tenure from the reply, for the TTL from the
//! request's start. Starting at the
//! reply rather than the request is what a holder can do: it cannot act on
//! a grant it has not heard of, and a request that waits out a leader
//! election may legitimately be granted after the previous lease expired.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// One recorded operation; instants are offsets from the start of the run
/// on the monotonic clock.
#[derive(Debug, Clone)]
pub struct Op {
    pub key: String,
    pub start: Duration,
    pub end: Duration,
    pub call: Call,
}

/// What was asked, and what came back.
#[derive(Debug, Clone)]
pub enum Call {
    Acquire {
        holder: String,
        ttl: Duration,
        outcome: Outcome,
    },
    Renew {
        holder: String,
        revision: u64,
        ttl: Duration,
        outcome: Outcome,
    },
    Release {
        holder: String,
        revision: u64,
        outcome: Outcome,
    },
    /// `holder`, holding at `revision`, hands the key to `to`; a grant is
    /// `to`'s new lease.
    Transfer {
        holder: String,
        revision: u64,
        to: String,
        ttl: Duration,
        outcome: Outcome,
    },
    Owner {
        outcome: Outcome,
    },
    /// The owner `holder` processed a forwarded request under `fence`, at
    /// the instant `start` (= `end`).
    Processed {
        holder: String,
        fence: u64,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acquire or renew granted at `revision`; the reply's `expires_at` is
    /// `lasts` after the request's start (at least the TTL for a fresh
    /// write, less for an idempotent answer about an earlier one).
    Granted { revision: u64, lasts: Duration },
    /// A read through the leader (owner, or a refused acquire): `holder`
    /// holds the key at `revision`.
    Held { holder: String, revision: u64 },
    /// A read through the leader: nobody holds the key.
    Free,
    /// Release acknowledged; `revision` is the tombstone's.
    Released { revision: u64 },
    /// Renew or release answered `lost`.
    Lost,
    /// No answer, or an error: the call may or may not have taken effect.
    Unknown,
}

/// The kinds of violation, one per property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    FenceNotIncreasing,
    TwoOwners,
    StaleRead,
    LostWrite,
    StaleForward,
    HistoryContradicts,
}

/// One violation, with a sentence naming the operations involved.
#[derive(Debug, Clone)]
pub struct Violation {
    pub kind: Kind,
    pub key: String,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} on {}: {}", self.kind, self.key, self.detail)
    }
}

/// A list answer as the reads it makes: one owner read of each of `keys`
/// over the call's span, held as `listed` (key, holder, revision) says,
/// free where the list leaves the key out.
pub fn list_reads(
    keys: &[String],
    (start, end): (Duration, Duration),
    listed: &[(String, String, u64)],
) -> Vec<Op> {
    keys.iter()
        .map(|key| {
            let outcome = match listed.iter().find(|(k, _, _)| k == key) {
                Some((_, holder, revision)) => Outcome::Held {
                    holder: holder.clone(),
                    revision: *revision,
                },
                None => Outcome::Free,
            };
            Op {
                key: key.clone(),
                start,
                end,
                call: Call::Owner { outcome },
            }
        })
        .collect()
}

/// Every violation in `history`; empty means the history is safe.
pub fn check(history: &[Op]) -> Vec<Violation> {
    let mut by_key: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in history {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut violations = unique_revisions(history);
    let mut keys: Vec<_> = by_key.keys().copied().collect();
    keys.sort();
    for key in keys {
        let ops = &by_key[key];
        let writes = acknowledged_writes(ops);
        violations.extend(fences_increase(key, &writes));
        violations.extend(reads_are_fresh(key, ops, &writes));
        let entitled = entitlements(ops);
        violations.extend(one_owner_at_a_time(key, &entitled));
        violations.extend(forwards_are_fenced(key, ops, &entitled));
    }
    violations
}

/// What an acknowledged write wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    Lease,
    Tombstone,
}

/// An acknowledged write.
struct Write<'a> {
    op: &'a Op,
    holder: &'a str,
    revision: u64,
    wrote: Wrote,
    /// Until when the server cannot have expired it (lease writes).
    alive_until: Duration,
}

fn acknowledged_writes<'a>(ops: &[&'a Op]) -> Vec<Write<'a>> {
    let mut writes = Vec::new();
    for op in ops {
        let (holder, ttl, outcome) = match &op.call {
            Call::Acquire {
                holder,
                ttl,
                outcome,
            }
            | Call::Renew {
                holder,
                ttl,
                outcome,
                ..
            }
            // A transfer writes the receiver's lease.
            | Call::Transfer {
                to: holder,
                ttl,
                outcome,
                ..
            } => (holder, *ttl, outcome),
            Call::Release {
                holder, outcome, ..
            } => (holder, Duration::ZERO, outcome),
            _ => continue,
        };
        let (revision, wrote, alive_until) = match outcome {
            Outcome::Granted { revision, lasts } => {
                (*revision, Wrote::Lease, op.start + ttl.min(*lasts))
            }
            Outcome::Released { revision } => (*revision, Wrote::Tombstone, op.start),
            _ => continue,
        };
        writes.push(Write {
            op,
            holder,
            revision,
            wrote,
            alive_until,
        });
    }
    writes
}

/// (d): a revision names one message, so it is acknowledged to one write
/// (or to retries of it, which name the same holder and kind).
fn unique_revisions(history: &[Op]) -> Vec<Violation> {
    let refs: Vec<&Op> = history.iter().collect();
    let mut first: HashMap<u64, (&str, &str, Wrote, &Op)> = HashMap::new();
    let mut violations = Vec::new();
    for w in acknowledged_writes(&refs) {
        match first.get(&w.revision) {
            None => {
                first.insert(w.revision, (&w.op.key, w.holder, w.wrote, w.op));
            }
            Some(&(key, holder, wrote, op)) => {
                if (key, holder, wrote) != (w.op.key.as_str(), w.holder, w.wrote) {
                    violations.push(Violation {
                        kind: Kind::LostWrite,
                        key: w.op.key.clone(),
                        detail: format!(
                            "revision {} acknowledged twice: {op:?} and {:?}",
                            w.revision, w.op
                        ),
                    });
                }
            }
        }
    }
    violations
}

/// (a): a write that starts after another completed gets a higher fence,
/// except a retry answered with the same holder's same revision.
fn fences_increase(key: &str, writes: &[Write]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for before in writes {
        for after in writes {
            let retry = before.holder == after.holder && before.revision == after.revision;
            if before.op.end < after.op.start && after.revision <= before.revision && !retry {
                violations.push(Violation {
                    kind: Kind::FenceNotIncreasing,
                    key: key.into(),
                    detail: format!(
                        "{:?} completed before {:?} started, yet got fence {} >= {}",
                        before.op, after.op, before.revision, after.revision
                    ),
                });
            }
        }
    }
    violations
}

/// (c): a read that starts after a write completed sees it or a later one.
/// A read finding the key free must be explained by a release or expiry.
fn reads_are_fresh(key: &str, ops: &[&Op], writes: &[Write]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for read in ops {
        let outcome = match &read.call {
            Call::Owner { outcome } => outcome,
            Call::Acquire { outcome, .. } if matches!(outcome, Outcome::Held { .. }) => outcome,
            _ => continue,
        };
        for w in writes.iter().filter(|w| w.op.end < read.start) {
            let stale = match outcome {
                Outcome::Held { revision, .. } => *revision < w.revision,
                Outcome::Free => {
                    let released = ops
                        .iter()
                        .any(|op| matches!(op.call, Call::Release { .. }) && op.start < read.end);
                    w.wrote == Wrote::Lease && read.end < w.alive_until && !released
                }
                _ => false,
            };
            if stale {
                violations.push(Violation {
                    kind: Kind::StaleRead,
                    key: key.into(),
                    detail: format!("{read:?} started after {:?} completed", w.op),
                });
            }
        }
    }
    violations
}

/// One stretch of time in which `holder` may act as owner.
#[derive(Debug, Clone)]
struct Entitled<'a> {
    holder: &'a str,
    tenure: u64,
    from: Duration,
    to: Duration,
}

/// Each holder's entitlements, from its own calls (a holder makes one call
/// at a time on a key, so its calls in start order are its story); a
/// transfer is in the stories of both holders it names.
fn entitlements<'a>(ops: &[&'a Op]) -> Vec<Entitled<'a>> {
    let mut by_holder: HashMap<&str, Vec<&Op>> = HashMap::new();
    for op in ops {
        let (holder, receiver) = match &op.call {
            Call::Acquire { holder, .. }
            | Call::Renew { holder, .. }
            | Call::Release { holder, .. } => (holder, None),
            Call::Transfer { holder, to, .. } => (holder, Some(to)),
            _ => continue,
        };
        by_holder.entry(holder).or_default().push(op);
        if let Some(to) = receiver {
            by_holder.entry(to).or_default().push(op);
        }
    }
    let mut all = Vec::new();
    for (holder, mut calls) in by_holder {
        calls.sort_by_key(|op| op.start);
        let mut current: Option<Entitled> = None;
        let mut tenure = None;
        for op in calls {
            match &op.call {
                Call::Acquire {
                    ttl,
                    outcome: Outcome::Granted { revision, lasts },
                    ..
                } => {
                    let until = op.start + (*ttl).min(*lasts);
                    // Granted while still entitled: the holder asked again
                    // and got its own lease back (at its latest revision),
                    // so the entitlement and tenure carry on.
                    let same = current.as_ref().is_some_and(|c| c.to > op.end);
                    if !same {
                        all.extend(current.take());
                        tenure = Some(*revision);
                    }
                    extend(&mut current, holder, *revision, op.end, until);
                }
                Call::Renew {
                    ttl,
                    revision,
                    outcome: Outcome::Granted { lasts, .. },
                    ..
                } => {
                    let until = op.start + (*ttl).min(*lasts);
                    let tenure = *tenure.get_or_insert(*revision);
                    if current.as_ref().is_some_and(|c| c.to <= op.end) {
                        all.extend(current.take());
                    }
                    extend(&mut current, holder, tenure, op.end, until);
                }
                Call::Renew {
                    outcome: Outcome::Lost,
                    ..
                }
                | Call::Release {
                    outcome: Outcome::Lost,
                    ..
                } => end_at(&mut current, op.end),
                Call::Release { .. } => end_at(&mut current, op.start),
                Call::Transfer { holder: from, .. } if from == holder => {
                    end_at(&mut current, op.start)
                }
                Call::Transfer {
                    ttl,
                    outcome: Outcome::Granted { revision, lasts },
                    ..
                } => {
                    // The receiver's own acquire, started before the
                    // transfer and answered after it, may have found the
                    // very record the transfer wrote: one tenure, not two.
                    let same = current.as_ref().is_some_and(|c| c.tenure == *revision);
                    if !same {
                        all.extend(current.take());
                        tenure = Some(*revision);
                    }
                    let until = op.start + (*ttl).min(*lasts);
                    extend(&mut current, holder, *revision, op.end, until);
                }
                _ => {}
            }
        }
        all.extend(current);
    }
    all.retain(|e| e.from < e.to);
    all
}

fn extend<'a>(
    current: &mut Option<Entitled<'a>>,
    holder: &'a str,
    tenure: u64,
    from: Duration,
    until: Duration,
) {
    match current {
        Some(c) => {
            c.from = c.from.min(from);
            c.to = c.to.max(until);
        }
        None => {
            *current = Some(Entitled {
                holder,
                tenure,
                from,
                to: until,
            })
        }
    }
}

fn end_at(current: &mut Option<Entitled>, at: Duration) {
    if let Some(c) = current {
        c.to = c.to.min(at);
    }
}

/// (b): entitlements of different holders never overlap.
fn one_owner_at_a_time(key: &str, entitled: &[Entitled]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (i, a) in entitled.iter().enumerate() {
        for b in &entitled[i + 1..] {
            if a.holder != b.holder && a.from.max(b.from) < a.to.min(b.to) {
                violations.push(Violation {
                    kind: Kind::TwoOwners,
                    key: key.into(),
                    detail: format!("{a:?} overlaps {b:?}"),
                });
            }
        }
    }
    violations
}

/// (e): a processed forward falls in an entitlement of that holder, with a
/// fence no lower than that tenure's start.
fn forwards_are_fenced(key: &str, ops: &[&Op], entitled: &[Entitled]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for op in ops {
        let Call::Processed { holder, fence } = &op.call else {
            continue;
        };
        let during = entitled
            .iter()
            .find(|e| e.holder == holder && e.from <= op.start && op.start < e.to);
        let stale = match during {
            None => true,
            Some(e) => *fence < e.tenure,
        };
        if stale {
            violations.push(Violation {
                kind: Kind::StaleForward,
                key: key.into(),
                detail: format!("{op:?} while entitled as {during:?}"),
            });
        }
    }
    violations
}

/// One tenure as the history recorded it (docs/protocol.md, Tenure
/// history): `end_revision` is `None` while it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub key: String,
    pub holder: String,
    pub tenure: u64,
    pub end_revision: Option<u64>,
}

/// (f): the tenures `recorded` against the operations of `history` and
/// the leases `held` at the end (key, holder, revision), read once the
/// history caught up. A tenure the history may miss (docs/protocol.md,
/// Tenure history: one begun and ended while its writer was behind) is
/// never required; the one holding a key at the end always is.
pub fn check_tenures(
    history: &[Op],
    recorded: &[Recorded],
    held: &[(String, String, u64)],
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut flag = |key: &str, detail: String| {
        violations.push(Violation {
            kind: Kind::HistoryContradicts,
            key: key.into(),
            detail,
        })
    };
    let mut by_key: HashMap<&str, Vec<&Recorded>> = HashMap::new();
    for tenure in recorded {
        by_key.entry(tenure.key.as_str()).or_default().push(tenure);
    }
    for (key, tenures) in &mut by_key {
        tenures.sort_by_key(|t| t.tenure);
        for pair in tenures.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.tenure == b.tenure {
                flag(key, format!("recorded twice: {a:?} and {b:?}"));
            } else if a.end_revision.is_none_or(|end| end > b.tenure) {
                flag(key, format!("{a:?} overlaps {b:?}"));
            }
        }
    }
    let refs: Vec<&Op> = history.iter().collect();
    let writes = acknowledged_writes(&refs);
    for tenure in recorded {
        for w in writes
            .iter()
            .filter(|w| w.op.key == tenure.key && w.revision == tenure.tenure)
        {
            let started = matches!(&w.op.call, Call::Acquire { .. } | Call::Transfer { .. });
            if !started {
                flag(
                    &tenure.key,
                    format!("{tenure:?} starts at the revision of {:?}", w.op),
                );
            } else if w.holder != tenure.holder {
                flag(
                    &tenure.key,
                    format!("{tenure:?} was granted to {} by {:?}", w.holder, w.op),
                );
            }
        }
    }
    for (key, holder, revision) in held {
        let open = by_key.get(key.as_str()).and_then(|tenures| tenures.last());
        let found = open.is_some_and(|t| {
            t.holder == *holder && t.tenure <= *revision && t.end_revision.is_none()
        });
        if !found {
            flag(
                key,
                format!("{holder} holds it at {revision} at the end, the history says {open:?}"),
            );
        }
    }
    violations
}
