//! The lease records this gateway is writing, by key, each with the bytes
//! it was serialized into, so the change event of the gateway's own write
//! is not parsed back into what it already has.
//!
//! The stream leader republishes a write before it acknowledges it, so the
//! event arrives before the writer knows the revision it wrote; what tells
//! the event apart is its payload. A record is taken only for the very
//! bytes it was serialized into, and parsing those bytes gives that record
//! (its timestamps are kept to the millisecond, as the wire carries them:
//! `lease_record`), so taking it is exact, and saves parsing on the hot path.

use std::sync::Mutex;

use bytes::Bytes;
use dagnats_leases_wire::record::LeaseRecord;
use foldhash::HashMap;

/// Bound on keys with a write whose event has not come back (a refused
/// write never has one); past it the map starts over.
const CAPACITY: usize = 10_000;

/// The last lease record written to each key, until its event comes back.
#[derive(Default)]
pub(crate) struct WrittenRecords {
    by_key: Mutex<HashMap<String, (Bytes, LeaseRecord)>>,
}

impl WrittenRecords {
    /// Notes that `record`, serialized into `body`, is being written to
    /// `key`. A later write to the key replaces it.
    pub(crate) fn note(&self, key: &str, body: Bytes, record: LeaseRecord) {
        let mut map = self.by_key.lock().expect("poisoned");
        if let Some(slot) = map.get_mut(key) {
            *slot = (body, record);
            return;
        }
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(key.to_string(), (body, record));
    }

    /// The record written to `key` as exactly `payload`, if it is the last
    /// one noted there; it is noted no longer.
    pub(crate) fn take(&self, key: &str, payload: &[u8]) -> Option<LeaseRecord> {
        let mut map = self.by_key.lock().expect("poisoned");
        match map.get(key) {
            Some((body, _)) if body.as_ref() == payload => map.remove(key).map(|(_, r)| r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::OffsetDateTime;

    fn record(holder: &str, prev: u64) -> (Bytes, LeaseRecord) {
        let record = LeaseRecord {
            v: 1,
            holder: holder.into(),
            ttl_ms: 1_000,
            acquired_at: OffsetDateTime::UNIX_EPOCH,
            written_at: OffsetDateTime::UNIX_EPOCH,
            prev,
            previous_holder: None,
            principal: None,
            tenure: None,
            renewals: 0,
        };
        (serde_json::to_vec(&record).unwrap().into(), record)
    }

    #[test]
    fn a_record_is_taken_once_and_only_for_the_bytes_it_was_written_as() {
        let written = WrittenRecords::default();
        let (body, lease) = record("h", 4);
        written.note("k", body.clone(), lease.clone());
        let (other, _) = record("h", 5);
        assert_eq!(written.take("k", &other), None, "another write's bytes");
        assert_eq!(written.take("j", &body), None, "another key");
        assert_eq!(written.take("k", &body), Some(lease));
        assert_eq!(written.take("k", &body), None, "taken already");
    }

    #[test]
    fn a_later_write_to_the_key_replaces_the_one_before() {
        let written = WrittenRecords::default();
        let (first, _) = record("h", 4);
        let (second, renewed) = record("h", 5);
        written.note("k", first.clone(), record("h", 4).1);
        written.note("k", second.clone(), renewed.clone());
        assert_eq!(written.take("k", &first), None);
        assert_eq!(written.take("k", &second), Some(renewed));
    }
}
