//! Owner: who holds a key, read through the stream leader, with no side
//! effects. Forward reads its owner the same way.

use std::sync::Arc;

use super::budget::within_budget;
use super::error::LeaseError;
use super::known::Slot;
use super::lease_core::LeaseCore;
use super::ports::Records;
use dagnats_leases_wire::record::Entry;
use dagnats_leases_wire::reply::{FreeKey, Owner};
use dagnats_leases_wire::request::OwnerRequest;

impl LeaseCore {
    /// Who holds the key, read through the stream leader.
    pub(crate) async fn owner(&self, req: OwnerRequest) -> Result<Owner, LeaseError> {
        within_budget(async move {
            let bucket = self.bucket()?;
            let (owner, _) = self.current(bucket, req.key.as_str()).await?;
            Ok(owner)
        })
        .await
    }

    /// Who holds `key` now, as the stream leader sees it, and the
    /// principal the tenure belongs to (under a policy).
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
    ) -> Result<(Owner, Option<Arc<str>>), LeaseError> {
        if let Some(known) = self.known.last(key) {
            let current = bucket.still_at(key, known.revision()).await;
            if current.map_err(|err| self.store_error(err))? {
                crate::metrics::owner_read("known");
                return Ok(match known {
                    Slot::Held(known) => (Owner::Held(known.lease(key)), known.principal),
                    Slot::Free(_) => (free_key(key), None),
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
            }) => (
                Owner::Held(record.lease(key, seq, Some(stored_at))),
                record.principal.map(Arc::from),
            ),
            Some(Entry::Free { .. }) | None => (free_key(key), None),
        })
    }
}

fn free_key(key: &str) -> Owner {
    Owner::Free(FreeKey {
        held: false,
        key: key.to_string(),
    })
}
