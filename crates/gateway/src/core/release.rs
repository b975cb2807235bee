//! Release: free the key under the same fence check as renew. A lease that
//! already expired is `lost`; a retry after a lost reply gets `released`.

use futures::FutureExt;
use time::OffsetDateTime;

use super::budget::within_budget;
use super::caller::Caller;
use super::error::LeaseError;
use super::fencing::{Claim, lost, too_late};
use super::known::{Known, Tenancy};
use super::lease_core::LeaseCore;
use super::ports::{Records, StoreError, Write};
use dagnats_leases_wire::record::{Entry, RECORD_VERSION, ReleaseRecord, WriteEvent};
use dagnats_leases_wire::reply::Released;
use dagnats_leases_wire::request::ReleaseRequest;

impl LeaseCore {
    /// Frees the key if the caller holds it at `revision`, in a tenure
    /// `caller` may act on.
    pub(crate) async fn release(
        &self,
        req: ReleaseRequest,
        caller: &Caller,
    ) -> Result<Released, LeaseError> {
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
                    let ended = (holder, held.principal.as_deref());
                    let ending = Ending::released(held.acquired_at, held.tenancy);
                    self.release_at(bucket, key, ended, (revision, held.ttl_ms), ending)
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
            let claim = Claim::new(key, &req.holder, req.revision, caller);
            self.fenced(bucket, claim, write, landed).await?
        })
        .await
    }

    /// Writes the release tombstone for `holder`'s lease (a tenure of
    /// `principal`) at `revision`. It lives as long as the lease it ends
    /// (`ttl_ms`): the window in which a release retried after a lost reply
    /// still gets `released` rather than `lost`. It is a purge, which
    /// expires without the server's expiry marker, so a released key never
    /// later looks expired.
    pub(super) async fn release_at(
        &self,
        bucket: &dyn Records,
        key: &str,
        (holder, principal): (&str, Option<&str>),
        (revision, ttl_ms): (u64, u64),
        ending: Ending,
    ) -> Result<Released, StoreError> {
        let tombstone = ReleaseRecord {
            v: RECORD_VERSION,
            holder: holder.to_string(),
            released_at: OffsetDateTime::now_utc(),
            prev: revision,
            principal: principal.map(str::to_string),
            revoked: ending.by != By::Holder,
            withdrawn: ending.by == By::Withdrawal,
            tenure: ending.tenure.map(|(_, tenancy)| tenancy.tenure),
            acquired_at: ending.tenure.map(|(acquired_at, _)| acquired_at),
            renewals: ending.tenure.map_or(0, |(_, tenancy)| tenancy.renewals),
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
}

/// Who ends a tenure with a tombstone, and which tenure: what the
/// tombstone tells the history (docs/protocol.md, Tenure history). The
/// one place a revoke's mark is made; `ReleaseRecord::end` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ending {
    by: By,
    /// When the tenure started, and its tenancy; `None` for a record that
    /// names none (a corrupt one).
    tenure: Option<(OffsetDateTime, Tenancy)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    /// Its holder released it.
    Holder,
    /// An operator revoked it.
    Operator,
    /// The gateway took back a renew acknowledged too late: it ran out.
    Withdrawal,
}

impl Ending {
    /// The holder releases the tenure that started at `acquired_at`.
    pub(super) fn released(acquired_at: OffsetDateTime, tenancy: Tenancy) -> Self {
        Ending {
            by: By::Holder,
            tenure: Some((acquired_at, tenancy)),
        }
    }

    /// An operator revokes the tenure, if the record names one.
    pub(super) fn revoked(tenure: Option<(OffsetDateTime, Tenancy)>) -> Self {
        Ending {
            by: By::Operator,
            tenure,
        }
    }

    /// A late renew of the tenure is taken back.
    pub(super) fn withdrawn(acquired_at: OffsetDateTime, tenancy: Tenancy) -> Self {
        Ending {
            by: By::Withdrawal,
            tenure: Some((acquired_at, tenancy)),
        }
    }
}
