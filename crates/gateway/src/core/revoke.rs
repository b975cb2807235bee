//! Revoke: the operator's way out of a stuck lease. It frees the key
//! whoever holds it, with a new, higher fence, so the holder's fence is
//! stale everywhere afterwards; a `released` event names the holder.

use super::budget::within_budget;
use super::error::LeaseError;
use super::known::Tenancy;
use super::lease_core::{LeaseCore, MAX_ROUNDS, contention};
use super::ports::StoreError;
use super::release::Ending;
use dagnats_leases_wire::record::Entry;
use dagnats_leases_wire::reply::Released;
use dagnats_leases_wire::request::OwnerRequest;

/// How long the tombstone of a revoked corrupt record lives: it has no
/// lease TTL to take, and nobody retries a release of it.
const CORRUPT_TOMBSTONE_TTL_MS: u64 = 5_000;

impl LeaseCore {
    /// Frees `req.key` whoever holds it; `not_held` if nobody does.
    pub(crate) async fn revoke(&self, req: OwnerRequest) -> Result<Released, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let key = req.key.as_str();
            for _ in 0..MAX_ROUNDS {
                let read = self.read_entry(bucket, key).await;
                let (seq, holder, ttl_ms, principal, tenure) = match read {
                    Ok(Some(Entry::Held { seq, record, .. })) => {
                        let tenure = Some((record.acquired_at, Tenancy::of(seq, &record)));
                        let principal = record.principal;
                        (seq, record.holder, record.ttl_ms, principal, tenure)
                    }
                    Ok(_) => return Err(LeaseError::NotHeld(key.to_string())),
                    // A record nobody can read is cleared like a held one: it
                    // names no holder, and the tombstone lives a short while.
                    Err(StoreError::Corrupt { seq, cause }) => {
                        tracing::warn!(key, revision = seq, cause, "revoking a corrupt record");
                        (seq, String::new(), CORRUPT_TOMBSTONE_TTL_MS, None, None)
                    }
                    Err(err) => return Err(self.store_error(err)),
                };
                let ended = (holder.as_str(), principal.as_deref());
                let ending = Ending::revoked(tenure);
                let revoked = self.release_at(bucket, key, ended, (seq, ttl_ms), ending);
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
}
