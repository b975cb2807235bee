//! Renew: extend the lease to `ttl_ms` from now, if the caller holds it at
//! the fence it names. The reply carries the new fence; the tenure (and
//! `acquired_at`) stays.

use std::sync::Arc;

use time::OffsetDateTime;

use super::budget::within_budget;
use super::caller::Caller;
use super::error::LeaseError;
use super::fencing::{Claim, NewGrant};
use super::known::{Known, Tenancy};
use super::lease_core::LeaseCore;
use super::ports::{Records, StoreError};
use super::records::lease_record;
use super::release::Ending;
use dagnats_leases_wire::record::{LeaseRecord, WriteEvent};
use dagnats_leases_wire::reply::{Grant, Lease};
use dagnats_leases_wire::request::RenewRequest;

impl LeaseCore {
    /// Extends the lease to `ttl_ms` from now, if the caller holds it at
    /// `revision`, in a tenure `caller` may act on; the tenure keeps its
    /// principal.
    pub(crate) async fn renew(
        &self,
        req: RenewRequest,
        caller: &Caller,
    ) -> Result<Grant, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let req = &req;
            let write_for = move |held: Known| {
                let started = (held.acquired_at, held.tenancy);
                let tenure = (started, held.principal.clone());
                let renewed = move |send_by| self.renew_at(bucket, req, tenure, send_by);
                // A late renew is withdrawn: nothing stays held in the name of
                // a holder told it lost the lease. On a task of its own, so
                // the call budget running out cannot stop it half done.
                let withdraw = move |grant: Grant| {
                    let (core, req) = (self.clone(), req.clone());
                    let principal = held.principal.clone();
                    let withdrawal = tokio::spawn(async move {
                        let bucket = &*core.records;
                        let renewed = (&grant.lease, principal.as_deref());
                        core.withdraw(bucket, &req, renewed, held.expires_at, started)
                            .await
                    });
                    async move {
                        let _ = withdrawal.await;
                    }
                };
                (renewed, withdraw)
            };
            // A retry of this very renew, whose reply was lost, finds the
            // record renewed by its holder.
            let by_holder = |record: &LeaseRecord| record.holder == req.holder.as_str();
            let claim = Claim::new(req.key.as_str(), &req.holder, req.revision, caller);
            self.fenced_grant(NewGrant::Renewal, bucket, claim, write_for, by_holder)
                .await
        })
        .await
    }

    /// The renew's one write in the tenure that started at `acquired_at`
    /// and belongs to `principal`, sent no later than `send_by`. The record
    /// names the tenure and counts its renewals, so the history needs no
    /// write of its own for a renew.
    async fn renew_at(
        &self,
        bucket: &dyn Records,
        req: &RenewRequest,
        ((acquired_at, tenancy), principal): ((OffsetDateTime, Tenancy), Option<Arc<str>>),
        send_by: OffsetDateTime,
    ) -> Result<Grant, StoreError> {
        let key = req.key.as_str();
        let revision = req.revision.get();
        let now = OffsetDateTime::now_utc();
        let mut record = lease_record(
            &req.holder,
            req.ttl_ms,
            (acquired_at, now),
            revision,
            principal.as_deref(),
        );
        record.tenure = Some(tenancy.tenure);
        record.renewals = tenancy.renewals + 1;
        let event = WriteEvent::Renewed;
        let seq = self
            .write_lease(bucket, (key, revision), event, &record, Some(send_by))
            .await?;
        Ok(Grant {
            granted: true,
            lease: record.lease(key, seq, None),
        })
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
    /// so the key must not be free for another holder to take
    /// (docs/fault-runs.md has the run that found it). The tombstone ends
    /// the tenure `tenure` (as it was before the renew) as run out.
    async fn withdraw(
        &self,
        bucket: &dyn Records,
        req: &RenewRequest,
        (renewed, principal): (&Lease, Option<&str>),
        was_due: OffsetDateTime,
        (acquired_at, tenancy): (OffsetDateTime, Tenancy),
    ) {
        let early = was_due - OffsetDateTime::now_utc();
        tokio::time::sleep(early.try_into().unwrap_or_default()).await;
        let key = req.key.as_str();
        let (holder, revision) = (req.holder.as_str(), renewed.revision);
        let renewed_too = Tenancy {
            renewals: tenancy.renewals + 1,
            ..tenancy
        };
        let ending = Ending::withdrawn(acquired_at, renewed_too);
        match self
            .release_at(
                bucket,
                key,
                (holder, principal),
                (revision, renewed.ttl_ms),
                ending,
            )
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
}
