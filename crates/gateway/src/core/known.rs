//! What this gateway knows a revision holds, so a renew or release in the
//! common case is one JetStream round trip (the compare-and-set) instead of
//! a read and a write, and so is an acquire of a key known to be free.
//!
//! Safe by construction: a stream sequence names exactly one message, so if
//! revision R is known to hold holder H's lease, a write that expects R and
//! succeeds replaced that very record. An entry is only ever used when the
//! caller's revision equals it; a stale or missing entry costs one read.
//! Likewise a create that expects the revision a key was freed at (or 0, no
//! message, for a key never seen) lands only if the key is still free, and
//! an owner read answers from what is known once a check that only the
//! current stream leader can pass proves the key still at that revision.

use std::sync::{Arc, Mutex};

use foldhash::HashMap;
use time::OffsetDateTime;

/// Bound on remembered keys; past it the map starts over (it is a cache).
const CAPACITY: usize = 100_000;

/// The parts of a lease record a renew or release needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Known {
    pub(crate) revision: u64,
    pub(crate) holder: String,
    pub(crate) acquired_at: OffsetDateTime,
    pub(crate) ttl_ms: u64,
    /// The lease's expiry, never later than the server's.
    pub(crate) expires_at: OffsetDateTime,
    /// Under a policy, the principal the tenure belongs to.
    pub(crate) principal: Option<Arc<str>>,
    /// The tenure the record belongs to, and its renewals so far: what a
    /// renew counts on, and a release's tombstone tells the history
    /// (docs/protocol.md, Tenure history).
    pub(crate) tenancy: Tenancy,
}

/// The tenure a lease record belongs to: the revision that started it,
/// and how many times it was renewed up to the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tenancy {
    pub(crate) tenure: u64,
    pub(crate) renewals: u64,
}

impl Tenancy {
    /// The tenancy `record`, written at `seq`, tells.
    pub(crate) fn of(seq: u64, record: &dagnats_leases_wire::record::LeaseRecord) -> Self {
        Tenancy {
            tenure: record.tenure_at(seq),
            renewals: record.renewals,
        }
    }
}

impl Known {
    /// The lease on `key` this tells of.
    pub(crate) fn lease(&self, key: &str) -> dagnats_leases_wire::reply::Lease {
        dagnats_leases_wire::reply::Lease {
            held: true,
            key: key.to_string(),
            holder: self.holder.clone(),
            revision: self.revision,
            acquired_at: self.acquired_at,
            expires_at: self.expires_at,
            ttl_ms: self.ttl_ms,
        }
    }

    /// What `lease`, written at `revision` in `tenancy`, a tenure of
    /// `principal`, tells.
    pub(crate) fn of(
        revision: u64,
        lease: &dagnats_leases_wire::reply::Lease,
        (tenancy, principal): (Tenancy, Option<&str>),
    ) -> Self {
        Known {
            principal: principal.map(Arc::from),
            revision,
            holder: lease.holder.clone(),
            acquired_at: lease.acquired_at,
            ttl_ms: lease.ttl_ms,
            expires_at: lease.expires_at,
            tenancy,
        }
    }
}

/// What is known of one key at its last known revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    Held(Known),
    /// Freed (released or expired) at this revision.
    Free(u64),
}

impl Slot {
    pub(crate) fn revision(&self) -> u64 {
        match self {
            Slot::Held(known) => known.revision,
            Slot::Free(revision) => *revision,
        }
    }
}

/// Last known revision of each key.
#[derive(Default)]
pub(crate) struct KnownRevisions {
    by_key: Mutex<HashMap<String, Slot>>,
}

impl KnownRevisions {
    /// Records that `key` is at `known.revision`, unless a later revision is
    /// already known.
    pub(crate) fn remember(&self, key: &str, known: Known) {
        self.set(key, Slot::Held(known));
    }

    /// Records that `key` was freed at `revision` (a release or an expiry
    /// marker), unless a later revision is already known.
    pub(crate) fn freed(&self, key: &str, revision: u64) {
        self.set(key, Slot::Free(revision));
    }

    /// Forgets `key`: read to have no message at all (its last one
    /// expired), a state no revision names.
    pub(crate) fn forget(&self, key: &str) {
        self.by_key.lock().expect("poisoned").remove(key);
    }

    fn set(&self, key: &str, slot: Slot) {
        let mut map = self.by_key.lock().expect("poisoned");
        if let Some(current) = map.get_mut(key) {
            if current.revision() < slot.revision() {
                *current = slot;
            }
            return;
        }
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(key.to_string(), slot);
    }

    /// What `key` was last known to hold, and at which revision: current
    /// only once a check proves the key still at that revision.
    pub(crate) fn last(&self, key: &str) -> Option<Slot> {
        self.by_key.lock().expect("poisoned").get(key).cloned()
    }

    /// What `key` holds at `revision`, if that is known.
    pub(crate) fn at(&self, key: &str, revision: u64) -> Option<Known> {
        let map = self.by_key.lock().expect("poisoned");
        match map.get(key) {
            Some(Slot::Held(known)) if known.revision == revision => Some(known.clone()),
            _ => None,
        }
    }

    /// The revision a create of `key` should expect if `key` is believed
    /// free: the one it was freed at, or 0 (no message) if nothing is known
    /// of it. `None` when it is known held: the holder must be read.
    pub(crate) fn free_at(&self, key: &str) -> Option<u64> {
        let map = self.by_key.lock().expect("poisoned");
        match map.get(key) {
            Some(Slot::Held(_)) => None,
            Some(Slot::Free(revision)) => Some(*revision),
            None => Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(revision: u64) -> Known {
        Known {
            revision,
            holder: "h".into(),
            acquired_at: OffsetDateTime::UNIX_EPOCH,
            ttl_ms: 1_000,
            expires_at: OffsetDateTime::UNIX_EPOCH,
            principal: None,
            tenancy: Tenancy {
                tenure: revision,
                renewals: 0,
            },
        }
    }

    #[test]
    fn an_older_revision_never_replaces_a_newer_one() {
        let k = KnownRevisions::default();
        k.remember("a", known(5));
        k.remember("a", known(3));
        assert_eq!(k.at("a", 5), Some(known(5)));
        assert_eq!(k.at("a", 3), None);
        k.remember("a", known(7));
        assert_eq!(k.at("a", 7), Some(known(7)));
        k.freed("a", 8);
        assert_eq!(k.at("a", 7), None);
    }

    #[test]
    fn a_key_is_believed_free_at_its_last_free_revision_or_0_if_never_seen() {
        let k = KnownRevisions::default();
        assert_eq!(k.free_at("a"), Some(0));
        k.remember("a", known(5));
        assert_eq!(k.free_at("a"), None);
        k.freed("a", 4);
        assert_eq!(k.free_at("a"), None, "an older free never hides a hold");
        k.freed("a", 6);
        assert_eq!(k.free_at("a"), Some(6));
        k.remember("a", known(5));
        assert_eq!(k.free_at("a"), Some(6), "an older hold never hides a free");
    }

    #[test]
    fn a_forgotten_key_is_unknown_and_believed_free_at_0() {
        let k = KnownRevisions::default();
        k.freed("a", 6);
        k.forget("a");
        assert_eq!(k.last("a"), None);
        assert_eq!(k.free_at("a"), Some(0));
    }
}
