//! Transfer: the holder hands its lease to another holder in one
//! compare-and-set write, so the new tenure starts exactly where the old one
//! ends, with no free moment between them for a third holder to take.

use time::OffsetDateTime;

use super::budget::within_budget;
use super::caller::Caller;
use super::error::LeaseError;
use super::fencing::{Claim, NewGrant};
use super::known::Known;
use super::lease_core::LeaseCore;
use super::ports::{Records, StoreError, Write};
use dagnats_leases_wire::record::{LeaseRecord, RECORD_VERSION, WriteEvent};
use dagnats_leases_wire::reply::Grant;
use dagnats_leases_wire::request::TransferRequest;

impl LeaseCore {
    /// Makes `to` the holder, if `holder` holds the key at `revision`: a
    /// new, higher fence, a new tenure (`acquired_at` is now) and the TTL
    /// from now. Anything else is `lost`, as renew would answer; a retry
    /// whose first write already landed gets the same grant again.
    ///
    /// The write is an `acquired` (a tenure starts) that names the previous
    /// holder, in the record and in `Dagnats-Lease-Previous-Holder`.
    ///
    /// `caller` must be allowed to act on the tenure it ends; the new one
    /// belongs to `req.to_principal`, which the front lets only an admin
    /// name, or else to `caller`.
    pub(crate) async fn transfer(
        &self,
        req: TransferRequest,
        caller: &Caller,
    ) -> Result<Grant, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let req = &req;
            // Nothing to undo: the record names `to`, not the holder told it
            // lost the lease, and `to` learns of it from the server.
            let write_for = move |_: Known| {
                let moved = move |send_by| self.transfer_at(bucket, (req, caller), send_by);
                (moved, |_| async {})
            };
            // A retry of this very transfer, whose reply was lost, finds the
            // tenure it started, moved from its holder to `to`.
            let moved_to = |record: &LeaseRecord| {
                record.holder == req.to.as_str()
                    && record.previous_holder.as_deref() == Some(req.holder.as_str())
            };
            let claim = Claim::new(req.key.as_str(), &req.holder, req.revision, caller);
            self.fenced_grant(NewGrant::Transfer, bucket, claim, write_for, moved_to)
                .await
        })
        .await
    }

    /// The transfer's one write, expecting the holder's fence, sent no
    /// later than `send_by`.
    async fn transfer_at(
        &self,
        bucket: &dyn Records,
        (req, caller): (&TransferRequest, &Caller),
        send_by: OffsetDateTime,
    ) -> Result<Grant, StoreError> {
        let key = req.key.as_str();
        let now = OffsetDateTime::now_utc();
        let record = LeaseRecord {
            v: RECORD_VERSION,
            holder: req.to.as_str().to_string(),
            ttl_ms: req.ttl_ms.as_millis(),
            acquired_at: now,
            written_at: now,
            prev: req.revision.get(),
            previous_holder: Some(req.holder.as_str().to_string()),
            principal: match &req.to_principal {
                Some(name) => Some(name.as_str().to_string()),
                None => caller.name().map(str::to_string),
            },
            tenure: None,
            renewals: 0,
        };
        let write = Write {
            event: WriteEvent::Acquired,
            ttl_secs: req.ttl_ms.as_millis() / 1_000,
            body: serde_json::to_vec(&record)
                .expect("a record serializes")
                .into(),
            previous_holder: Some(req.holder.as_str().to_string()),
            send_by: Some(send_by),
        };
        let seq = bucket.write(key, req.revision.get(), write).await?;
        self.remember(key, seq, &record, None);
        tracing::info!(
            key,
            from = req.holder.as_str(),
            to = req.to.as_str(),
            revision = seq,
            "lease transferred"
        );
        Ok(Grant {
            granted: true,
            lease: record.lease(key, seq, None),
        })
    }
}
