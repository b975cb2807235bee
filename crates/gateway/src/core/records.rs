//! The core's reads and writes of lease records, and what it learns from
//! each (`known.rs`), so the next call on the key can skip a read.

use bytes::Bytes;
use time::OffsetDateTime;

use super::error::LeaseError;
use super::known::{Known, Tenancy};
use super::lease_core::LeaseCore;
use super::ports::{Records, StoreError, Write};
use dagnats_leases_wire::record::{Entry, LeaseRecord, RECORD_VERSION, WriteEvent};
use dagnats_leases_wire::request::{HolderId, Ttl};
use dagnats_leases_wire::timefmt;

impl LeaseCore {
    /// Writes `record` to `key` if its last revision is `expected`.
    pub(super) async fn write_lease(
        &self,
        bucket: &dyn Records,
        (key, expected): (&str, u64),
        event: WriteEvent,
        record: &LeaseRecord,
        send_by: Option<OffsetDateTime>,
    ) -> Result<u64, StoreError> {
        let body = Bytes::from(serde_json::to_vec(record).expect("a record serializes"));
        self.written.note(key, body.clone(), record.clone());
        let write = Write {
            event,
            ttl_secs: record.ttl_ms / 1_000,
            body,
            previous_holder: None,
            send_by,
        };
        let seq = bucket.write(key, expected, write).await?;
        self.remember(key, seq, record, None);
        Ok(seq)
    }

    pub(super) async fn read(
        &self,
        bucket: &dyn Records,
        key: &str,
    ) -> Result<Option<Entry>, LeaseError> {
        self.read_entry(bucket, key)
            .await
            .map_err(|err| self.store_error(err))
    }

    /// [`LeaseCore::read`] with the store's own error, for the callers
    /// that treat a corrupt record apart (list, revoke).
    pub(super) async fn read_entry(
        &self,
        bucket: &dyn Records,
        key: &str,
    ) -> Result<Option<Entry>, StoreError> {
        let entry = bucket.last(key).await?;
        match &entry {
            Some(Entry::Held {
                seq,
                record,
                stored_at,
                ..
            }) => self.remember(key, *seq, record, Some(*stored_at)),
            Some(Entry::Free { seq, .. }) => self.known_freed(key, *seq),
            // Its last message (an expiry marker, a tombstone) expired too:
            // what was known of it would only cost a failed check.
            None => self.known.forget(key),
        }
        Ok(entry)
    }

    /// Learns from a read that `key` is free at `seq`.
    pub(super) fn known_freed(&self, key: &str, seq: u64) {
        self.known.freed(key, seq);
    }

    pub(super) fn remember(
        &self,
        key: &str,
        seq: u64,
        record: &LeaseRecord,
        stored_at: Option<OffsetDateTime>,
    ) {
        let lease = record.lease(key, seq, stored_at);
        let tenure = (Tenancy::of(seq, record), record.principal.as_deref());
        self.known.remember(key, Known::of(seq, &lease, tenure));
    }
}

/// The record of `holder`'s lease, written at `written_at`, in the tenure
/// of `principal` that started at `acquired_at`, replacing revision
/// `prev`.
pub(super) fn lease_record(
    holder: &HolderId,
    ttl: Ttl,
    (acquired_at, written_at): (OffsetDateTime, OffsetDateTime),
    prev: u64,
    principal: Option<&str>,
) -> LeaseRecord {
    // Kept as the wire carries them, so the record in memory is the one
    // its bytes parse to (`written.rs` hands it to the relay for them).
    LeaseRecord {
        v: RECORD_VERSION,
        holder: holder.as_str().to_string(),
        ttl_ms: ttl.as_millis(),
        acquired_at: timefmt::truncated(acquired_at),
        written_at: timefmt::truncated(written_at),
        prev,
        previous_holder: None,
        principal: principal.map(str::to_string),
        tenure: None,
        renewals: 0,
    }
}
