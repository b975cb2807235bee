//! What this gateway knows a revision holds, so a renew or release in the
//! common case is one JetStream round trip (the compare-and-set) instead of
//! a read and a write.
//!
//! Safe by construction: a stream sequence names exactly one message, so if
//! revision R is known to hold holder H's lease, a write that expects R and
//! succeeds replaced that very record. An entry is only ever used when the
//! caller's revision equals it; a stale or missing entry costs one read.

use std::collections::HashMap;
use std::sync::Mutex;

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
}

impl Known {
    /// What `lease`, written at `revision`, tells.
    pub(crate) fn of(revision: u64, lease: &dagnats_leases_wire::reply::Lease) -> Self {
        Known {
            revision,
            holder: lease.holder.clone(),
            acquired_at: lease.acquired_at,
            ttl_ms: lease.ttl_ms,
            expires_at: lease.expires_at,
        }
    }
}

/// Last known revision of each key.
#[derive(Default)]
pub(crate) struct KnownRevisions {
    by_key: Mutex<HashMap<String, Known>>,
}

impl KnownRevisions {
    /// Records that `key` is at `known.revision`, unless a later revision is
    /// already known.
    pub(crate) fn remember(&self, key: &str, known: Known) {
        let mut map = self.by_key.lock().expect("poisoned");
        if let Some(current) = map.get_mut(key) {
            if current.revision < known.revision {
                *current = known;
            }
            return;
        }
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(key.to_string(), known);
    }

    /// What `key` holds at `revision`, if that is known.
    pub(crate) fn at(&self, key: &str, revision: u64) -> Option<Known> {
        let map = self.by_key.lock().expect("poisoned");
        map.get(key).filter(|k| k.revision == revision).cloned()
    }

    /// Drops what is known of `key` (it was released).
    pub(crate) fn forget(&self, key: &str) {
        self.by_key.lock().expect("poisoned").remove(key);
    }

    /// Drops what is known of `key` if it is older than `revision` (the key
    /// was freed at `revision`; a later write may already be known).
    pub(crate) fn forget_before(&self, key: &str, revision: u64) {
        let mut map = self.by_key.lock().expect("poisoned");
        if map.get(key).is_some_and(|k| k.revision < revision) {
            map.remove(key);
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
        k.forget("a");
        assert_eq!(k.at("a", 7), None);
    }
}
