//! Acquire: grant the key if nobody holds it; the holder asking again gets
//! its lease back unchanged, so a retry after a lost reply is safe.

use std::time::Duration;

use time::OffsetDateTime;

use super::budget::within_budget;
use super::caller::Caller;
use super::error::LeaseError;
use super::lease_core::{LeaseCore, MAX_ROUNDS, contention};
use super::ports::{Records, StoreError};
use super::records::lease_record;
use dagnats_leases_wire::record::{Entry, WriteEvent};
use dagnats_leases_wire::reply::Grant;
use dagnats_leases_wire::request::AcquireRequest;

/// How long an acquire waits for the server to expire a record past its
/// `expires_at`: expiry lands up to about 0.3 s after the TTL
/// (docs/protocol.md, Storage: the leases bucket), plus the skew the
/// expiry margin allows between gateway and server clocks.
const OVERDUE_WAIT: Duration = Duration::from_secs(3);
/// How often the overdue record is read again meanwhile.
const OVERDUE_POLL: Duration = Duration::from_millis(50);

impl LeaseCore {
    /// Grants the key if nobody holds it, in a tenure of `caller`'s. The
    /// current holder asking again gets its lease back unchanged (same
    /// revision, TTL not extended), if the tenure is the caller's own.
    ///
    /// A key believed free is created at once, one round trip: its
    /// compare-and-set decides, and a conflict reads like any other round.
    pub(crate) async fn acquire(
        &self,
        req: AcquireRequest,
        caller: &Caller,
    ) -> Result<Grant, LeaseError> {
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
                                // marker, so the new tenure is written over the
                                // marker instead.
                                self.await_expiry(bucket, key, seq).await?;
                                continue;
                            }
                            let granted = record.holder == req.holder.as_str()
                                && caller.owns(record.principal.as_deref());
                            if !granted {
                                crate::metrics::acquire_not_granted();
                            }
                            return Ok(Grant { granted, lease });
                        }
                        Some(Entry::Free { seq, .. }) => seq,
                        None => 0,
                    },
                };
                let now = OffsetDateTime::now_utc();
                let record =
                    lease_record(&req.holder, req.ttl_ms, (now, now), expected, caller.name());
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

    /// [`acquire`](Self::acquire) as one try of a wait for the key that
    /// began `waited` ago, when the caller says so: a grant counts how long
    /// its holder waited (docs/protocol.md, Tenure history).
    pub(crate) async fn acquire_waited(
        &self,
        req: AcquireRequest,
        caller: &Caller,
        waited: Option<Duration>,
    ) -> Result<Grant, LeaseError> {
        let grant = self.acquire(req, caller).await?;
        if let (true, Some(waited)) = (grant.granted, waited) {
            crate::metrics::acquire_waited(waited);
        }
        Ok(grant)
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
}
