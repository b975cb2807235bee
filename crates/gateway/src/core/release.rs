//! Release: free the key under the same fence check as renew. A lease that
//! already expired is `lost`; a retry after a lost reply gets `released`.

use futures::FutureExt;
use time::OffsetDateTime;

use super::budget::within_budget;
use super::caller::Caller;
use super::error::LeaseError;
use super::fencing::{Claim, lost, too_late};
use super::known::Known;
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
                    self.release_at(bucket, key, ended, (revision, held.ttl_ms), false)
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
        revoked: bool,
    ) -> Result<Released, StoreError> {
        let tombstone = ReleaseRecord {
            v: RECORD_VERSION,
            holder: holder.to_string(),
            released_at: OffsetDateTime::now_utc(),
            prev: revision,
            revoked,
            principal: principal.map(str::to_string),
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
