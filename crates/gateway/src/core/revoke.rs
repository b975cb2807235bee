//! Revoke: the operator's way out of a stuck lease. It frees the key
//! whoever holds it, with a new, higher fence, so the holder's fence is
//! stale everywhere afterwards; a `released` event names the holder.

use super::budget::within_budget;
use super::error::LeaseError;
use super::lease_core::{LeaseCore, MAX_ROUNDS, contention};
use super::ports::StoreError;
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
                let (seq, holder, ttl_ms, principal) = match self.read_entry(bucket, key).await {
                    Ok(Some(Entry::Held { seq, record, .. })) => {
                        (seq, record.holder, record.ttl_ms, record.principal)
                    }
                    Ok(_) => return Err(LeaseError::NotHeld(key.to_string())),
                    // A record nobody can read is cleared like a held one: it
                    // names no holder, and the tombstone lives a short while.
                    Err(StoreError::Corrupt { seq, cause }) => {
                        tracing::warn!(key, revision = seq, cause, "revoking a corrupt record");
                        (seq, String::new(), CORRUPT_TOMBSTONE_TTL_MS, None)
                    }
                    Err(err) => return Err(self.store_error(err)),
                };
                let ended = (holder.as_str(), principal.as_deref());
                let revoked = self.release_at(bucket, key, ended, (seq, ttl_ms), true);
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
