//! What one change of the bucket means for the tenure history: which
//! records to write, in order. Pure logic over what the history knows of
//! one key ([`KeyHistory`]), so every rule has a unit test.
//!
//! Changes arrive in the bucket's order, each at most once per key and
//! revision that matters: one at or below what the history already holds
//! writes nothing, which makes a redelivery or a restart harmless. The
//! bucket keeps one message per key, so a reader that fell behind may find
//! a key's later write instead of the ones it missed; the rules below say
//! what is recorded then (docs/protocol.md, Tenure history).

use std::time::Duration;

use time::OffsetDateTime;

use super::stored::{LastWrite, Stored};
use dagnats_leases_wire::history::{Tenure, TenureEnd};

/// One change of a key: the revision the bucket gave it, the server's
/// timestamp of it, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) revision: u64,
    pub(crate) at: OffsetDateTime,
    pub(crate) seen: Seen,
}

/// What a change of a key says, in the history's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// An acquire, or with `from` a transfer from that holder, started a
    /// tenure at the change's revision. `replaced` is the revision the
    /// write expected (0: the key had no message).
    Started {
        holder: String,
        acquired_at: OffsetDateTime,
        last: LastWrite,
        from: Option<String>,
        replaced: u64,
    },
    /// A renew of tenure `tenure` (`None`: a record written before the
    /// history existed, which does not say).
    Renewed {
        tenure: Option<u64>,
        holder: String,
        acquired_at: OffsetDateTime,
        renewals: u64,
        last: LastWrite,
    },
    /// The key was freed, ending its tenure as `end`; a release's or a
    /// revoke's tombstone tells which tenure it ended.
    Freed { end: TenureEnd, told: Option<Told> },
}

/// What a tombstone says of the tenure it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Told {
    pub(crate) holder: String,
    /// `None` on a tombstone written before the history existed.
    pub(crate) tenure: Option<u64>,
    pub(crate) acquired_at: Option<OffsetDateTime>,
    pub(crate) renewals: u64,
}

/// A record to write, and whether it starts a tenure of another holder
/// than the key's last one (a hand-over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Written {
    pub(crate) stored: Stored,
    pub(crate) handover: bool,
}

/// What the history knows of one key: its open tenure, if any, and the
/// last revision of it already reflected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyHistory {
    open: Option<Open>,
    seen: u64,
    last_holder: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Open {
    tenure: Tenure,
    last: LastWrite,
    /// The server's time of the change whose record of it was written
    /// last: a record older than the history's refresh interval is
    /// written again, so it never ages out while the tenure lasts.
    recorded_at: OffsetDateTime,
}

impl KeyHistory {
    /// Where the history goes on from: the key's last record (and the
    /// server's time of that record), or none.
    pub(crate) fn resume(last: Option<(Stored, OffsetDateTime)>) -> Self {
        let Some((stored, recorded_at)) = last else {
            return KeyHistory::default();
        };
        let last_holder = Some(stored.tenure.holder.clone());
        let seen = stored.seen;
        let open = match stored.is_open() {
            true => Some(Open {
                tenure: stored.tenure,
                last: stored.last,
                recorded_at,
            }),
            false => None,
        };
        KeyHistory {
            open,
            seen,
            last_holder,
        }
    }

    /// The tenure the history holds open for the key, if any.
    #[cfg(test)]
    pub(crate) fn open(&self) -> Option<&Tenure> {
        self.open.as_ref().map(|open| &open.tenure)
    }

    /// The records `change` of `key` makes, in order; none for a change
    /// already reflected. An open tenure's record older than `refresh` is
    /// written again with its renewals so far.
    pub(crate) fn apply(&mut self, key: &str, change: Change, refresh: Duration) -> Vec<Written> {
        if change.revision <= self.seen {
            return Vec::new();
        }
        let (revision, at) = (change.revision, change.at);
        let mut out = Vec::new();
        match change.seen {
            Seen::Started {
                holder,
                acquired_at,
                last,
                from,
                replaced,
            } => {
                if let Some(open) = self.open.take() {
                    let ended = match from {
                        Some(from) if from == open.tenure.holder => {
                            open.close(TenureEnd::Transferred, revision, at, revision)
                        }
                        // The write that ended it was replaced before the
                        // history read it: the one this acquire expected.
                        _ => open.missed_end(if replaced > 0 { replaced } else { revision }, at),
                    };
                    out.push(self.written(ended));
                }
                let tenure = opened(key, holder, revision, acquired_at, 0);
                out.push(self.start(tenure, last, revision, at));
            }
            Seen::Renewed {
                tenure,
                holder,
                acquired_at,
                renewals,
                last,
            } => {
                let tenure = tenure.or_else(|| {
                    self.open
                        .as_ref()
                        .filter(|open| {
                            open.tenure.holder == holder && open.tenure.acquired_at == acquired_at
                        })
                        .map(|open| open.tenure.tenure)
                });
                match &mut self.open {
                    Some(open) if Some(open.tenure.tenure) == tenure => {
                        open.tenure.renewals = open.tenure.renewals.max(renewals);
                        open.last = last;
                        if at - open.recorded_at >= refresh {
                            open.recorded_at = at;
                            let again = Stored::new(open.tenure.clone(), revision, open.last);
                            out.push(Written {
                                stored: again,
                                handover: false,
                            });
                        }
                    }
                    _ => {
                        // Its start was replaced before the history read it.
                        let tenure = tenure.unwrap_or(revision);
                        if let Some(open) = self.open.take() {
                            out.push(self.written(open.missed_end(tenure, at)));
                        }
                        let started = opened(key, holder, tenure, acquired_at, renewals);
                        out.push(self.start(started, last, revision, at));
                    }
                }
            }
            Seen::Freed { end, told } => {
                let open = self.open.take();
                let later = |open: &Open| {
                    told.as_ref()
                        .and_then(|told| told.tenure)
                        .is_some_and(|t| t > open.tenure.tenure)
                };
                match open {
                    Some(mut open) if !later(&open) => {
                        if let Some(told) = &told {
                            open.tenure.renewals = open.tenure.renewals.max(told.renewals);
                        }
                        out.push(self.written(open.close(end, revision, at, revision)));
                    }
                    open => {
                        let told = told.filter(|told| told.tenure.is_some());
                        if let Some(open) = open {
                            let next = told.as_ref().and_then(|t| t.tenure).unwrap_or(revision);
                            out.push(self.written(open.missed_end(next, at)));
                        }
                        if let Some(told) = told {
                            // Only its end reached the history: recorded whole.
                            let tenure = told.tenure.unwrap_or(revision);
                            let acquired_at = told.acquired_at.unwrap_or(at);
                            let whole = Open {
                                tenure: opened(
                                    key,
                                    told.holder,
                                    tenure,
                                    acquired_at,
                                    told.renewals,
                                ),
                                last: LastWrite {
                                    ttl_ms: 0,
                                    written_at: acquired_at,
                                },
                                recorded_at: at,
                            };
                            out.push(self.written(whole.close(end, revision, at, revision)));
                        }
                    }
                }
            }
        }
        self.seen = revision;
        out
    }

    /// Ends the open tenure, if any, whose key the bucket no longer has
    /// any message of (its end was gone before the history read it): at
    /// `now`, with `revision` the bucket's last revision.
    pub(crate) fn settle(&mut self, revision: u64, now: OffsetDateTime) -> Option<Written> {
        let open = self.open.take()?;
        self.seen = self.seen.max(revision);
        Some(self.written(open.missed_end(revision, now)))
    }

    fn start(
        &mut self,
        tenure: Tenure,
        last: LastWrite,
        revision: u64,
        at: OffsetDateTime,
    ) -> Written {
        let handover = self
            .last_holder
            .as_ref()
            .is_some_and(|holder| *holder != tenure.holder);
        self.last_holder = Some(tenure.holder.clone());
        self.open = Some(Open {
            tenure: tenure.clone(),
            last,
            recorded_at: at,
        });
        Written {
            stored: Stored::new(tenure, revision, last),
            handover,
        }
    }

    fn written(&mut self, ended: Stored) -> Written {
        self.last_holder = Some(ended.tenure.holder.clone());
        Written {
            stored: ended,
            handover: false,
        }
    }
}

impl Open {
    /// The record of its end, `end` at `at` by the write at `end_revision`,
    /// as of the change at `seen`.
    fn close(self, end: TenureEnd, end_revision: u64, at: OffsetDateTime, seen: u64) -> Stored {
        let tenure = Tenure {
            ended_at: Some(at),
            end: Some(end),
            end_revision: Some(end_revision),
            ..self.tenure
        };
        Stored::new(tenure, seen, self.last)
    }

    /// The record of an end the history never read, learned from a later
    /// change at `at`: `expired` when the lease of its last write seen was
    /// due by then (at that moment), else `released` (at `at`, the latest
    /// it can have been). `next` is the revision of the end when the later
    /// change names it, else the first revision known to follow it.
    fn missed_end(self, next: u64, at: OffsetDateTime) -> Stored {
        let due = self.last.due();
        let (end, ended_at) = if at >= due {
            (TenureEnd::Expired, due)
        } else {
            (TenureEnd::Released, at)
        };
        self.close(end, next, ended_at, next)
    }
}

/// The records of `written` (one key's, in order) worth writing: each
/// tenure's last, in the order of the last records, keeping whether any of
/// a tenure's records was a hand-over. A writer with several changes of a
/// key at hand writes a tenure that started and ended among them once.
pub(crate) fn coalesce(written: Vec<Written>) -> Vec<Written> {
    let mut kept: Vec<Written> = Vec::with_capacity(written.len());
    for record in written {
        let same = |kept: &Written| kept.stored.tenure.tenure == record.stored.tenure.tenure;
        let handover = match kept.iter().position(same) {
            Some(at) => kept.remove(at).handover,
            None => false,
        };
        kept.push(Written {
            handover: handover || record.handover,
            ..record
        });
    }
    kept
}

fn opened(
    key: &str,
    holder: String,
    tenure: u64,
    acquired_at: OffsetDateTime,
    renewals: u64,
) -> Tenure {
    Tenure {
        key: key.to_string(),
        holder,
        tenure,
        acquired_at,
        ended_at: None,
        end: None,
        end_revision: None,
        renewals,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-10-18 12:00 UTC);
    const DAY: Duration = Duration::from_secs(86_400);

    fn at(secs: u64) -> OffsetDateTime {
        T0 + Duration::from_secs(secs)
    }

    fn last(written: u64) -> LastWrite {
        LastWrite {
            ttl_ms: 10_000,
            written_at: at(written),
        }
    }

    fn started(revision: u64, secs: u64, holder: &str) -> Change {
        Change {
            revision,
            at: at(secs),
            seen: Seen::Started {
                holder: holder.into(),
                acquired_at: at(secs),
                last: last(secs),
                from: None,
                replaced: 0,
            },
        }
    }

    fn renewed(revision: u64, secs: u64, holder: &str, tenure: u64, since: u64, n: u64) -> Change {
        Change {
            revision,
            at: at(secs),
            seen: Seen::Renewed {
                tenure: Some(tenure),
                holder: holder.into(),
                acquired_at: at(since),
                renewals: n,
                last: last(secs),
            },
        }
    }

    fn freed(revision: u64, secs: u64, end: TenureEnd, told: Option<Told>) -> Change {
        Change {
            revision,
            at: at(secs),
            seen: Seen::Freed { end, told },
        }
    }

    fn told(holder: &str, tenure: u64, since: u64, renewals: u64) -> Option<Told> {
        Some(Told {
            holder: holder.into(),
            tenure: Some(tenure),
            acquired_at: Some(at(since)),
            renewals,
        })
    }

    fn tenures(written: &[Written]) -> Vec<&Tenure> {
        written.iter().map(|w| &w.stored.tenure).collect()
    }

    #[test]
    fn acquire_renew_twice_release_is_one_tenure_released_with_two_renewals() {
        let mut key = KeyHistory::default();
        let opened = key.apply("k", started(3, 0, "a"), DAY);
        assert_eq!(opened.len(), 1);
        assert!(opened[0].stored.is_open());
        assert!(key.apply("k", renewed(4, 3, "a", 3, 0, 1), DAY).is_empty());
        assert!(key.apply("k", renewed(5, 6, "a", 3, 0, 2), DAY).is_empty());
        let ended = key.apply(
            "k",
            freed(6, 7, TenureEnd::Released, told("a", 3, 0, 2)),
            DAY,
        );
        assert_eq!(
            tenures(&ended),
            [&Tenure {
                key: "k".into(),
                holder: "a".into(),
                tenure: 3,
                acquired_at: at(0),
                ended_at: Some(at(7)),
                end: Some(TenureEnd::Released),
                end_revision: Some(6),
                renewals: 2,
            }]
        );
        assert_eq!(ended[0].stored.seen, 6);
        assert_eq!(key.open(), None);
    }

    #[test]
    fn a_change_already_reflected_writes_nothing() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        assert!(key.apply("k", started(3, 0, "a"), DAY).is_empty());
        let ended = key.apply("k", freed(6, 7, TenureEnd::Expired, None), DAY);
        let mut resumed = KeyHistory::resume(Some((ended[0].stored.clone(), at(7))));
        assert!(
            resumed
                .apply("k", freed(6, 7, TenureEnd::Expired, None), DAY)
                .is_empty()
        );
        assert!(
            resumed
                .apply("k", renewed(5, 6, "a", 3, 0, 2), DAY)
                .is_empty()
        );
    }

    #[test]
    fn a_transfer_ends_one_tenure_transferred_and_starts_the_next_at_its_revision() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        key.apply("k", renewed(4, 3, "a", 3, 0, 1), DAY);
        let moved = Change {
            revision: 5,
            at: at(4),
            seen: Seen::Started {
                holder: "b".into(),
                acquired_at: at(4),
                last: last(4),
                from: Some("a".into()),
                replaced: 4,
            },
        };
        let written = key.apply("k", moved, DAY);
        let [ended, next] = tenures(&written)[..] else {
            panic!("{written:?}")
        };
        assert_eq!(
            (
                ended.end,
                ended.end_revision,
                ended.ended_at,
                ended.renewals
            ),
            (Some(TenureEnd::Transferred), Some(5), Some(at(4)), 1)
        );
        assert_eq!(
            (next.holder.as_str(), next.tenure, next.end),
            ("b", 5, None)
        );
        assert_eq!(next.acquired_at, at(4));
        assert!(written[1].handover, "a to b is a hand-over");
    }

    #[test]
    fn an_expiry_marker_ends_the_open_tenure_expired_at_the_marker() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let written = key.apply("k", freed(4, 10, TenureEnd::Expired, None), DAY);
        let ended = tenures(&written)[0];
        assert_eq!(
            (ended.end, ended.ended_at, ended.end_revision),
            (Some(TenureEnd::Expired), Some(at(10)), Some(4))
        );
    }

    #[test]
    fn a_revoke_ends_the_tenure_revoked() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let written = key.apply(
            "k",
            freed(4, 2, TenureEnd::Revoked, told("a", 3, 0, 0)),
            DAY,
        );
        assert_eq!(tenures(&written)[0].end, Some(TenureEnd::Revoked));
    }

    #[test]
    fn a_marker_with_no_open_tenure_writes_nothing() {
        let mut key = KeyHistory::default();
        assert!(
            key.apply("k", freed(4, 10, TenureEnd::Expired, None), DAY)
                .is_empty()
        );
    }

    #[test]
    fn a_tenure_only_its_tombstone_reached_is_recorded_whole() {
        let mut key = KeyHistory::default();
        let written = key.apply(
            "k",
            freed(9, 5, TenureEnd::Released, told("a", 7, 1, 3)),
            DAY,
        );
        assert_eq!(
            tenures(&written),
            [&Tenure {
                key: "k".into(),
                holder: "a".into(),
                tenure: 7,
                acquired_at: at(1),
                ended_at: Some(at(5)),
                end: Some(TenureEnd::Released),
                end_revision: Some(9),
                renewals: 3,
            }]
        );
    }

    #[test]
    fn a_release_replaced_before_it_was_read_ends_the_tenure_at_the_revision_the_next_acquire_expected()
     {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let next = Change {
            revision: 6,
            at: at(2),
            seen: Seen::Started {
                holder: "b".into(),
                acquired_at: at(2),
                last: last(2),
                from: None,
                replaced: 5,
            },
        };
        let written = key.apply("k", next, DAY);
        let [ended, opened] = tenures(&written)[..] else {
            panic!("{written:?}")
        };
        assert_eq!(
            (ended.end, ended.end_revision, ended.ended_at),
            (Some(TenureEnd::Released), Some(5), Some(at(2)))
        );
        assert_eq!((opened.tenure, opened.holder.as_str()), (6, "b"));
    }

    #[test]
    fn an_expiry_replaced_before_it_was_read_ends_the_tenure_expired_when_its_lease_was_due() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let written = key.apply("k", started(5, 30, "b"), DAY);
        let ended = tenures(&written)[0];
        assert_eq!(
            (ended.end, ended.ended_at, ended.end_revision),
            (Some(TenureEnd::Expired), Some(at(10)), Some(5))
        );
    }

    #[test]
    fn a_renew_of_a_tenure_whose_start_was_missed_opens_it_with_its_renewals() {
        let mut key = KeyHistory::default();
        let written = key.apply("k", renewed(8, 9, "a", 5, 3, 4), DAY);
        let open = tenures(&written)[0];
        assert_eq!(
            (open.tenure, open.renewals, open.acquired_at),
            (5, 4, at(3))
        );
        assert_eq!(open.end, None);
    }

    #[test]
    fn an_open_record_is_written_again_once_it_is_older_than_the_refresh_interval() {
        let mut key = KeyHistory::default();
        let refresh = Duration::from_secs(5);
        key.apply("k", started(3, 0, "a"), refresh);
        assert!(
            key.apply("k", renewed(4, 3, "a", 3, 0, 1), refresh)
                .is_empty()
        );
        let again = key.apply("k", renewed(5, 6, "a", 3, 0, 2), refresh);
        assert_eq!(tenures(&again)[0].renewals, 2);
        assert!(
            key.apply("k", renewed(6, 9, "a", 3, 0, 3), refresh)
                .is_empty()
        );
    }

    #[test]
    fn a_renew_record_from_before_the_history_belongs_to_the_open_tenure_of_its_holder() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let legacy = Change {
            revision: 4,
            at: at(3),
            seen: Seen::Renewed {
                tenure: None,
                holder: "a".into(),
                acquired_at: at(0),
                renewals: 0,
                last: last(3),
            },
        };
        assert!(key.apply("k", legacy, DAY).is_empty());
        assert_eq!(key.open().map(|t| t.tenure), Some(3));
    }

    #[test]
    fn settling_a_key_with_no_message_left_ends_its_tenure_expired_when_due() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let settled = key.settle(40, at(100)).unwrap();
        assert_eq!(
            (
                settled.stored.tenure.end,
                settled.stored.tenure.ended_at,
                settled.stored.tenure.end_revision
            ),
            (Some(TenureEnd::Expired), Some(at(10)), Some(40))
        );
        assert_eq!(key.settle(41, at(101)), None);
    }

    #[test]
    fn a_tenure_that_starts_and_ends_among_the_changes_at_hand_is_written_once() {
        let mut key = KeyHistory::default();
        key.apply("k", started(3, 0, "a"), DAY);
        let mut written = key.apply(
            "k",
            freed(4, 1, TenureEnd::Released, told("a", 3, 0, 0)),
            DAY,
        );
        written.extend(key.apply("k", started(5, 2, "b"), DAY));
        written.extend(key.apply("k", renewed(6, 3, "b", 5, 2, 1), DAY));
        written.extend(key.apply(
            "k",
            freed(7, 4, TenureEnd::Released, told("b", 5, 2, 1)),
            DAY,
        ));
        written.extend(key.apply("k", started(8, 5, "c"), DAY));
        let kept = coalesce(written);
        let summary: Vec<_> = kept
            .iter()
            .map(|w| (w.stored.tenure.tenure, w.stored.tenure.end, w.handover))
            .collect();
        assert_eq!(
            summary,
            [
                (3, Some(TenureEnd::Released), false),
                (5, Some(TenureEnd::Released), true),
                (8, None, true),
            ],
            "b's start, a hand-over, is kept in its end"
        );
    }

    #[test]
    fn only_a_new_holder_is_a_hand_over() {
        let mut key = KeyHistory::default();
        assert!(!key.apply("k", started(3, 0, "a"), DAY)[0].handover);
        key.apply(
            "k",
            freed(4, 1, TenureEnd::Released, told("a", 3, 0, 0)),
            DAY,
        );
        assert!(!key.apply("k", started(5, 2, "a"), DAY)[0].handover);
        key.apply(
            "k",
            freed(6, 3, TenureEnd::Released, told("a", 5, 2, 0)),
            DAY,
        );
        assert!(key.apply("k", started(7, 4, "b"), DAY)[0].handover);
    }
}
