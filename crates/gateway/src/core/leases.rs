//! [`LeaseCore`]: acquire, renew, release and owner over the bucket.

use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;
use time::OffsetDateTime;

use super::budget::within_budget;
use super::error::LeaseError;
use super::known::{Known, KnownRevisions, Slot};
use super::ports::{Availability, OwnerHop, Records, StoreError, Write};
use super::written::WrittenRecords;
use dagnats_leases_wire::record::{Entry, LeaseRecord, RECORD_VERSION, ReleaseRecord, WriteEvent};
use dagnats_leases_wire::reply::{FreeKey, Grant, Lease, Owner, Released};
use dagnats_leases_wire::request::{
    AcquireRequest, HolderId, OwnerRequest, ReleaseRequest, RenewRequest, Revision, Ttl,
};
use dagnats_leases_wire::timefmt;

/// How many compare-and-set rounds a call makes before it reports
/// contention as `unavailable`. Each lost round means another writer
/// landed, so the next read usually settles the answer.
const MAX_ROUNDS: usize = 4;

/// The lease operations of the seed. Cheap to clone; every front shares one.
#[derive(Clone)]
pub(crate) struct LeaseCore {
    records: Arc<dyn Records>,
    inbox: Arc<dyn OwnerHop>,
    known: Arc<KnownRevisions>,
    written: Arc<WrittenRecords>,
}

impl LeaseCore {
    /// A core over the bucket's `records` that forwards through `inbox`.
    pub(crate) fn new(records: Arc<dyn Records>, inbox: Arc<dyn OwnerHop>) -> Self {
        LeaseCore {
            records,
            inbox,
            known: Arc::default(),
            written: Arc::default(),
        }
    }

    /// Whether calls can be served now: `Ok`, or the error every call
    /// would answer (`unavailable` or `unsupported`).
    pub(crate) fn ready(&self) -> Result<(), LeaseError> {
        match self.records.availability() {
            Availability::Degraded(reason) => Err(unavailable(&reason)),
            _ => self.bucket().map(|_| ()),
        }
    }

    /// Learns from a change event that `key` is at `revision`: `lease` is
    /// what was written there, or `None` when the key was freed. Another
    /// gateway's write then costs this one no extra read on the next renew.
    /// The bucket learns the revision too, so a bucket this gateway has
    /// to create again starts above every write any gateway made.
    pub(crate) fn observe(&self, key: &str, revision: u64, lease: Option<&Lease>) {
        self.records.saw(revision);
        match lease {
            Some(lease) => self.known.remember(key, Known::of(revision, lease)),
            None => self.known.freed(key, revision),
        }
    }

    /// The record this gateway wrote to `key` as exactly `payload`, for
    /// the change event of its own write (see `written.rs`).
    pub(crate) fn take_written(&self, key: &str, payload: &[u8]) -> Option<LeaseRecord> {
        self.written.take(key, payload)
    }

    pub(super) fn inbox(&self) -> &dyn OwnerHop {
        &*self.inbox
    }

    /// Grants the key if nobody holds it. The current holder asking again
    /// gets its lease back unchanged (same revision, TTL not extended), so
    /// a retry after a lost reply is safe.
    ///
    /// A key believed free is created at once, one round trip: its
    /// compare-and-set decides, and a conflict reads like any other round.
    pub(crate) async fn acquire(&self, req: AcquireRequest) -> Result<Grant, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let key = req.key.as_str();
            let mut believed_free = self.known.free_at(key);
            for _ in 0..MAX_ROUNDS {
                let expected = match believed_free.take() {
                    Some(seq) => seq,
                    None => match self.read(bucket, key).await? {
                        Some(Entry::Held {
                            seq,
                            record,
                            stored_at,
                            ..
                        }) => {
                            let lease = record.lease(key, seq, Some(stored_at));
                            if lease.expires_at <= OffsetDateTime::now_utc() {
                                // Overdue: nobody holds it, but a write over it
                                // now could be purged by the server's expiry
                                // marker (docs/operations.md), so the new tenure
                                // is written over the marker instead.
                                self.await_expiry(bucket, key, seq).await?;
                                continue;
                            }
                            let granted = record.holder == req.holder.as_str();
                            return Ok(Grant { granted, lease });
                        }
                        Some(Entry::Free { seq, .. }) => seq,
                        None => 0,
                    },
                };
                let now = OffsetDateTime::now_utc();
                let record = lease_record(&req.holder, req.ttl_ms, now, now, expected);
                match self
                    .write_lease(bucket, (key, expected), WriteEvent::Acquired, &record, None)
                    .await
                {
                    Ok(seq) => {
                        let lease = record.lease(key, seq, None);
                        return Ok(Grant {
                            granted: true,
                            lease,
                        });
                    }
                    Err(StoreError::Conflict) => continue,
                    Err(err) => return Err(self.store_error(err)),
                }
            }
            Err(contention(key))
        })
        .await
    }

    /// Extends the lease to `ttl_ms` from now, if the caller holds it at
    /// `revision`. The reply carries the new fence; `acquired_at` stays.
    pub(crate) async fn renew(&self, req: RenewRequest) -> Result<Grant, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let (key, revision) = (req.key.as_str(), req.revision.get());
            let lost = || lost(key, &req.holder, req.revision);
            let (bucket_ref, req_ref, lost_ref) = (bucket, &req, &lost);
            let write = move |held: Known| {
                let (bucket, req, lost) = (bucket_ref, req_ref, lost_ref);
                let renewed = move |send_by| self.renew_at(bucket, req, held.acquired_at, send_by);
                // A late renew is withdrawn: nothing stays held in the name of
                // a holder told it lost the lease. On a task of its own, so
                // the call budget running out cannot stop it half done.
                let withdraw = move |grant: Grant| {
                    let (core, req) = (self.clone(), req.clone());
                    let withdrawal = tokio::spawn(async move {
                        let bucket = &*core.records;
                        core.withdraw(bucket, &req, &grant.lease, held.expires_at)
                            .await
                    });
                    async move {
                        let _ = withdrawal.await;
                    }
                };
                clear_of_expiry(
                    "renew",
                    (key, revision),
                    held.expires_at,
                    lost,
                    renewed,
                    withdraw,
                )
                .boxed()
            };
            // This very renew already landed and its reply was lost.
            let landed = |entry: &Entry| match entry {
                Entry::Held {
                    seq,
                    renewed: true,
                    record,
                    stored_at,
                } if record.prev == revision && record.holder == req.holder.as_str() => {
                    Some(Ok(granted_again(key, *seq, record, *stored_at)))
                }
                _ => None,
            };
            self.fenced(bucket, key, &req.holder, req.revision, write, landed)
                .await?
        })
        .await
    }

    /// Waits for the server to expire the overdue record at `seq` (its
    /// marker, or any other write, replaces it), re-reading the key.
    async fn await_expiry(
        &self,
        bucket: &dyn Records,
        key: &str,
        seq: u64,
    ) -> Result<(), LeaseError> {
        let deadline = tokio::time::Instant::now() + OVERDUE_WAIT;
        loop {
            tokio::time::sleep(OVERDUE_POLL).await;
            let now_at = match self.read(bucket, key).await? {
                Some(Entry::Held { seq: now_at, .. } | Entry::Free { seq: now_at, .. }) => now_at,
                None => 0,
            };
            if now_at != seq {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LeaseError::Unavailable(format!(
                    "the lease on {key} is past its expiry and the server has not freed it yet; retry later"
                )));
            }
        }
    }

    /// Takes back a renew that was acknowledged too late to count on: a
    /// compare-and-set purge of the renewed record at its own revision, so
    /// nothing stays held in the name of a holder told it lost the lease,
    /// and a retry of the same renew finds the tombstone and answers
    /// `lost` too. If the server's expiry marker got there first the key
    /// is free already; if the purge cannot be sent, the renewed record
    /// stays until its TTL runs out, and the log says so.
    ///
    /// Not before `was_due`, the expiry of the lease it renewed: until
    /// then the holder, not yet told, is still entitled by its last grant,
    /// so the key must not be free for another holder to take (the fault
    /// run found the key freed up to 0.2 s early, read as a stale `free`).
    async fn withdraw(
        &self,
        bucket: &dyn Records,
        req: &RenewRequest,
        renewed: &Lease,
        was_due: OffsetDateTime,
    ) {
        let early = was_due - OffsetDateTime::now_utc();
        tokio::time::sleep(early.try_into().unwrap_or_default()).await;
        let key = req.key.as_str();
        let (holder, revision) = (req.holder.as_str(), renewed.revision);
        match self
            .release_at(bucket, key, holder, revision, renewed.ttl_ms, true)
            .await
        {
            Ok(_) | Err(StoreError::Conflict) => {}
            Err(err) => tracing::warn!(
                key,
                revision,
                ?err,
                "could not withdraw a renew acknowledged too late: it stays until its TTL runs out"
            ),
        }
    }

    /// Frees the key under the same fence check as renew. A lease that
    /// already expired is `lost`.
    pub(crate) async fn release(&self, req: ReleaseRequest) -> Result<Released, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let (key, holder, revision) =
                (req.key.as_str(), req.holder.as_str(), req.revision.get());
            let req_ref = &req;
            let write = move |held: Known| {
                let req = req_ref;
                async move {
                    // Past its expiry the lease is gone, whether or not the
                    // server has written its marker yet: releasing it is
                    // `lost`, as renewing it is.
                    if too_late(held.expires_at) {
                        return Ok(Err(lost(key, &req.holder, req.revision)));
                    }
                    self.release_at(bucket, key, holder, revision, held.ttl_ms, false)
                        .await
                        .map(Ok)
                }
                .boxed()
            };
            // This very release already landed and its reply was lost.
            let landed = |entry: &Entry| match entry {
                Entry::Free {
                    seq,
                    released: Some(tombstone),
                } if tombstone.prev == revision
                    && tombstone.holder == holder
                    && !tombstone.revoked =>
                {
                    Some(Ok(Released {
                        released: true,
                        held: false,
                        key: key.to_string(),
                        holder: holder.to_string(),
                        revision: *seq,
                    }))
                }
                _ => None,
            };
            self.fenced(bucket, key, &req.holder, req.revision, write, landed)
                .await?
        })
        .await
    }

    /// The fence check renew and release share: `write` runs only while
    /// `holder` holds `key` at `revision`, known from this gateway's own
    /// writes and events (one round trip) or else read through the leader.
    /// A retry whose first write already landed gets `landed`'s answer;
    /// anything else is `lost`.
    pub(super) async fn fenced<'a, T>(
        &self,
        bucket: &dyn Records,
        key: &str,
        holder: &HolderId,
        revision: Revision,
        write: impl Fn(Known) -> BoxFuture<'a, Result<T, StoreError>>,
        landed: impl Fn(&Entry) -> Option<T>,
    ) -> Result<T, LeaseError> {
        if let Some(known) = self.known.at(key, revision.get()) {
            if known.holder != holder.as_str() {
                return Err(lost(key, holder, revision));
            }
            match write(known).await {
                Err(StoreError::Conflict) => {}
                done => return done.map_err(|err| self.store_error(err)),
            }
        }
        for _ in 0..MAX_ROUNDS {
            let entry = self.read(bucket, key).await?;
            match &entry {
                Some(Entry::Held {
                    seq,
                    record,
                    stored_at,
                    ..
                }) if *seq == revision.get() && record.holder == holder.as_str() => {
                    let held = Known::of(*seq, &record.lease(key, *seq, Some(*stored_at)));
                    match write(held).await {
                        Err(StoreError::Conflict) => continue,
                        done => return done.map_err(|err| self.store_error(err)),
                    }
                }
                Some(entry) => return landed(entry).ok_or_else(|| lost(key, holder, revision)),
                None => return Err(lost(key, holder, revision)),
            }
        }
        Err(contention(key))
    }

    /// Frees the key whoever holds it, with a new, higher fence: the
    /// operator's way out of a stuck lease. The holder's fence is stale
    /// everywhere afterwards, and a `released` event names it.
    pub(crate) async fn revoke(&self, req: OwnerRequest) -> Result<Released, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let key = req.key.as_str();
            for _ in 0..MAX_ROUNDS {
                let (seq, holder, ttl_ms) = match self.read_entry(bucket, key).await {
                    Ok(Some(Entry::Held { seq, record, .. })) => {
                        (seq, record.holder, record.ttl_ms)
                    }
                    Ok(_) => return Err(LeaseError::NotHeld(key.to_string())),
                    // A record nobody can read is cleared like a held one: it
                    // names no holder, and the tombstone lives a short while.
                    Err(StoreError::Corrupt { seq, cause }) => {
                        tracing::warn!(key, revision = seq, cause, "revoking a corrupt record");
                        (seq, String::new(), CORRUPT_TOMBSTONE_TTL_MS)
                    }
                    Err(err) => return Err(self.store_error(err)),
                };
                let revoked = self.release_at(bucket, key, &holder, seq, ttl_ms, true);
                match revoked.await {
                    Err(StoreError::Conflict) => continue,
                    Err(err) => return Err(self.store_error(err)),
                    Ok(released) => {
                        tracing::info!(key, holder, revision = seq, "lease revoked");
                        return Ok(released);
                    }
                }
            }
            Err(contention(key))
        })
        .await
    }

    /// Who holds the key, read through the stream leader. No side effects.
    pub(crate) async fn owner(&self, req: OwnerRequest) -> Result<Owner, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            self.current(bucket, req.key.as_str()).await
        })
        .await
    }

    /// Who holds `key` now, as the stream leader sees it (owner's answer,
    /// and whom a forward goes to).
    ///
    /// When this gateway knows what the key's last revision holds (its own
    /// writes, change events, earlier reads), one check that the key is
    /// still at that revision answers: on a replicated bucket a barrier
    /// only the current leader can commit, the same proof a read needs
    /// after it, so one JetStream round trip instead of two. A stale
    /// guess costs the check, then the read.
    pub(super) async fn current(
        &self,
        bucket: &dyn Records,
        key: &str,
    ) -> Result<Owner, LeaseError> {
        if let Some(known) = self.known.last(key) {
            let current = bucket.still_at(key, known.revision()).await;
            if current.map_err(|err| self.store_error(err))? {
                crate::metrics::owner_read("known");
                return Ok(match known {
                    Slot::Held(known) => Owner::Held(known.lease(key)),
                    Slot::Free(_) => free_key(key),
                });
            }
        }
        crate::metrics::owner_read("read");
        Ok(match self.read(bucket, key).await? {
            Some(Entry::Held {
                seq,
                record,
                stored_at,
                ..
            }) => Owner::Held(record.lease(key, seq, Some(stored_at))),
            Some(Entry::Free { .. }) | None => free_key(key),
        })
    }

    /// The renew's one write, sent no later than `send_by`.
    async fn renew_at(
        &self,
        bucket: &dyn Records,
        req: &RenewRequest,
        acquired_at: OffsetDateTime,
        send_by: OffsetDateTime,
    ) -> Result<Grant, StoreError> {
        let key = req.key.as_str();
        let revision = req.revision.get();
        let now = OffsetDateTime::now_utc();
        let record = lease_record(&req.holder, req.ttl_ms, acquired_at, now, revision);
        let event = WriteEvent::Renewed;
        let seq = self
            .write_lease(bucket, (key, revision), event, &record, Some(send_by))
            .await?;
        Ok(Grant {
            granted: true,
            lease: record.lease(key, seq, None),
        })
    }

    /// Writes the release tombstone for `holder`'s lease at `revision`. It
    /// lives as long as the lease it ends (`ttl_ms`): the window in which a
    /// release retried after a lost reply still gets `released` rather than
    /// `lost`. It is a purge, which expires without the server's expiry
    /// marker, so a released key never later looks expired.
    async fn release_at(
        &self,
        bucket: &dyn Records,
        key: &str,
        holder: &str,
        revision: u64,
        ttl_ms: u64,
        revoked: bool,
    ) -> Result<Released, StoreError> {
        let tombstone = ReleaseRecord {
            v: RECORD_VERSION,
            holder: holder.to_string(),
            released_at: OffsetDateTime::now_utc(),
            prev: revision,
            revoked,
        };
        let write = Write {
            event: WriteEvent::Released,
            ttl_secs: ttl_ms / 1_000,
            body: serde_json::to_vec(&tombstone)
                .expect("a record serializes")
                .into(),
            previous_holder: None,
            send_by: None,
        };
        let seq = bucket.write(key, revision, write).await?;
        self.known.freed(key, seq);
        Ok(Released {
            released: true,
            held: false,
            key: key.to_string(),
            holder: holder.to_string(),
            revision: seq,
        })
    }

    /// Writes `record` to `key` if its last revision is `expected`.
    async fn write_lease(
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
        self.known.remember(key, Known::of(seq, &lease));
    }

    /// The bucket, if calls can be served now.
    pub(super) fn bucket(&self) -> Result<&dyn Records, LeaseError> {
        match self.records.availability() {
            Availability::Ready | Availability::Degraded(_) => Ok(&*self.records),
            Availability::Unsupported { server_version } => {
                Err(LeaseError::Unsupported { server_version })
            }
            Availability::Unavailable(reason) => Err(unavailable(&reason)),
        }
    }

    /// The one translation of store failures into wire errors.
    pub(super) fn store_error(&self, err: StoreError) -> LeaseError {
        match err {
            StoreError::Unavailable(reason) => unavailable(&reason),
            StoreError::BucketMissing => {
                self.records.request_repair();
                LeaseError::Unavailable(
                    "the leases bucket is missing and is being created again; retry later".into(),
                )
            }
            // Most often an election: saying "missing" misled operators.
            StoreError::NoListener => {
                self.records.request_repair();
                unavailable(
                    "no stream took the write: the leases stream is electing a leader, \
                     or the bucket is gone (the gateway is checking it)",
                )
            }
            StoreError::Corrupt { cause, .. } | StoreError::Unexpected(cause) => {
                LeaseError::internal(cause)
            }
            StoreError::Conflict => LeaseError::internal("compare-and-set conflict not handled"),
            StoreError::TooLate => {
                unavailable("a write waited to be sent until its lease was about to expire")
            }
        }
    }
}

fn lease_record(
    holder: &HolderId,
    ttl: Ttl,
    acquired_at: OffsetDateTime,
    written_at: OffsetDateTime,
    prev: u64,
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
    }
}

/// The grant a retried call answers when its first write already landed
/// as `record`, at `seq`.
pub(super) fn granted_again(
    key: &str,
    seq: u64,
    record: &LeaseRecord,
    stored_at: OffsetDateTime,
) -> Grant {
    Grant {
        granted: true,
        lease: record.lease(key, seq, Some(stored_at)),
    }
}

pub(super) fn lost(key: &str, holder: &HolderId, revision: Revision) -> LeaseError {
    LeaseError::Lost(format!(
        "{} does not hold {key} at revision {}: it expired, was released, was taken, or the revision is stale",
        holder.as_str(),
        revision.get()
    ))
}

/// How close to its expiry a lease may be renewed: beyond this, the renew
/// could land after the server's expiry is due (see [`LeaseCore::renew`]).
/// It also absorbs clock skew between this gateway and the server.
const EXPIRY_MARGIN: Duration = Duration::from_millis(250);

/// How long an acquire waits for the server to expire a record past its
/// `expires_at`: expiry lands 0 to 0.3 s after the TTL (contract.md), plus
/// the expiry margin's skew between gateway and server clocks.
const OVERDUE_WAIT: Duration = Duration::from_secs(3);
/// How often the overdue record is read again meanwhile.
const OVERDUE_POLL: Duration = Duration::from_millis(50);

/// The last moment a write renewing (or moving) a lease due at
/// `expires_at` may be sent.
fn send_by(expires_at: OffsetDateTime) -> OffsetDateTime {
    expires_at - EXPIRY_MARGIN
}

fn too_late(expires_at: OffsetDateTime) -> bool {
    OffsetDateTime::now_utc() >= send_by(expires_at)
}

/// A fenced `write` of a lease due to expire at `expires_at`, refused
/// (`lost`) before it is sent and after it is acknowledged when it races
/// that expiry: nats-server 2.15 acknowledges a write that replaces a
/// message whose TTL has run out but is not yet expired, then the overdue
/// expiry's marker (a subject rollup) erases that write. A write
/// acknowledged that late may be gone a moment later, so nobody may count
/// on it (docs/operations.md); `undo` runs on it before the refusal.
///
/// `write` gets the moment after which it must not be sent: one that
/// waited in this gateway's queue that long is never sent (under overload,
/// a write that could only come back too late is not worth sending, nor
/// its undo), and is `lost` too.
pub(super) async fn clear_of_expiry<T, W, U>(
    what: &str,
    (key, revision): (&str, u64),
    expires_at: OffsetDateTime,
    lost: impl Fn() -> LeaseError,
    write: impl FnOnce(OffsetDateTime) -> W,
    undo: impl FnOnce(T) -> U,
) -> Result<Result<T, LeaseError>, StoreError>
where
    W: Future<Output = Result<T, StoreError>>,
    U: Future<Output = ()>,
{
    if too_late(expires_at) {
        return Ok(Err(lost()));
    }
    let done = match write(send_by(expires_at)).await {
        Err(StoreError::TooLate) => return Ok(Err(lost())),
        done => done?,
    };
    if too_late(expires_at) {
        tracing::warn!(
            key,
            revision,
            what,
            "acknowledged after the lease was due to expire: answered lost"
        );
        undo(done).await;
        return Ok(Err(lost()));
    }
    Ok(Ok(done))
}

/// How long the tombstone of a revoked corrupt record lives: it has no
/// lease TTL to take, and nobody retries a release of it.
const CORRUPT_TOMBSTONE_TTL_MS: u64 = 5_000;

fn free_key(key: &str) -> Owner {
    Owner::Free(FreeKey {
        held: false,
        key: key.to_string(),
    })
}

fn contention(key: &str) -> LeaseError {
    LeaseError::Unavailable(format!("{key} changed on every attempt; retry later"))
}

#[cfg(test)]
mod tests;

/// What a call answers while the bucket cannot serve, and why.
fn unavailable(reason: &str) -> LeaseError {
    LeaseError::Unavailable(format!("leases are unavailable: {reason}; retry later"))
}
