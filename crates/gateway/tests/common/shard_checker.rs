//! The safety rule for shard groups, judged from what the members printed:
//! at no instant are two members entitled to one shard, and a shard's
//! fence never goes backwards.
//!
//! Entitlement is judged conservatively from a member's printed lines (a
//! member starts acting on a shard when it prints it): its claim of shard
//! `i` at fence `f` holds from the line that printed it until its next
//! line that drops `i` (or names it at another fence), or, when the
//! process was killed or paused, until the later of that instant and its
//! last printed line plus the lease TTL (it may have renewed since, and
//! a paused process that resumes acts on nothing it has not printed again).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

/// One printed owned set, at the instant it was printed (offset from the
/// start of the run).
#[derive(Debug, Clone)]
pub struct Line {
    pub at: Duration,
    /// Shard -> fence.
    pub owned: BTreeMap<u32, u64>,
}

/// Everything one member process printed, and when it was halted (killed
/// or paused), if it was.
#[derive(Debug, Clone, Default)]
pub struct Member {
    pub name: String,
    pub lines: Vec<Line>,
    /// The instants the process was killed (-9) or stopped (SIGSTOP).
    pub halts: Vec<Duration>,
}

/// The two kinds of violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TwoOwners,
    FenceWentBack,
}

#[derive(Debug, Clone)]
pub struct Violation {
    pub kind: Kind,
    pub shard: u32,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} on shard {}: {}",
            self.kind, self.shard, self.detail
        )
    }
}

/// One stretch in which `member` may act for `shard` under `fence`.
#[derive(Debug, Clone)]
pub struct Claim {
    pub member: String,
    pub shard: u32,
    pub fence: u64,
    pub from: Duration,
    pub to: Duration,
}

/// Every claim in the members' histories; `end` is the end of the run
/// (claims still open then run to it).
pub fn claims(members: &[Member], ttl: Duration, end: Duration) -> Vec<Claim> {
    let mut all = Vec::new();
    for m in members {
        let mut lines = m.lines.clone();
        lines.sort_by_key(|l| l.at);
        let mut halts = m.halts.clone();
        halts.sort();
        // Open claims: shard -> (fence, from).
        let mut open: BTreeMap<u32, (u64, Duration)> = BTreeMap::new();
        let mut last_line: Option<Duration> = None;
        let mut halt = halts.into_iter().peekable();
        let close_all =
            |open: &mut BTreeMap<u32, (u64, Duration)>, to: Duration, all: &mut Vec<Claim>| {
                for (shard, (fence, from)) in std::mem::take(open) {
                    all.push(Claim {
                        member: m.name.clone(),
                        shard,
                        fence,
                        from,
                        to,
                    });
                }
            };
        for line in &lines {
            while let Some(h) = halt.next_if(|h| *h <= line.at) {
                let to = last_line.map_or(h, |l| h.max(l + ttl));
                close_all(&mut open, to, &mut all);
            }
            for (shard, (fence, from)) in open.clone() {
                if line.owned.get(&shard) != Some(&fence) {
                    open.remove(&shard);
                    all.push(Claim {
                        member: m.name.clone(),
                        shard,
                        fence,
                        from,
                        to: line.at,
                    });
                }
            }
            for (shard, fence) in &line.owned {
                open.entry(*shard).or_insert((*fence, line.at));
            }
            last_line = Some(line.at);
        }
        let to = match halt.next() {
            Some(h) => last_line.map_or(h, |l| h.max(l + ttl)),
            None => end,
        };
        close_all(&mut open, to, &mut all);
    }
    all.retain(|c| c.from < c.to);
    all
}

/// Every violation in the members' histories; empty means safe.
pub fn check(members: &[Member], ttl: Duration, end: Duration) -> Vec<Violation> {
    let mut by_shard: HashMap<u32, Vec<Claim>> = HashMap::new();
    for c in claims(members, ttl, end) {
        by_shard.entry(c.shard).or_default().push(c);
    }
    let mut shards: Vec<_> = by_shard.keys().copied().collect();
    shards.sort();
    let mut violations = Vec::new();
    for shard in shards {
        let mut claims = by_shard.remove(&shard).unwrap();
        claims.sort_by_key(|c| c.from);
        for (i, a) in claims.iter().enumerate() {
            for b in &claims[i + 1..] {
                if a.member != b.member && b.from < a.to {
                    violations.push(Violation {
                        kind: Kind::TwoOwners,
                        shard,
                        detail: format!("{a:?} overlaps {b:?}"),
                    });
                }
                if b.from >= a.from && b.fence < a.fence {
                    violations.push(Violation {
                        kind: Kind::FenceWentBack,
                        shard,
                        detail: format!("{a:?} then {b:?}"),
                    });
                }
            }
        }
    }
    violations
}
