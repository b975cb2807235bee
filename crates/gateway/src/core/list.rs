//! List: every held lease, each read through the stream leader.

use futures::{StreamExt, TryStreamExt};

use super::error::LeaseError;
use super::leases::LeaseCore;
use dagnats_leases_wire::change::ChangeKind;
use dagnats_leases_wire::record::Entry;
use dagnats_leases_wire::reply::{Lease, LeaseList};
use dagnats_leases_wire::request::{KeyPrefix, ListRequest};

/// Keys read at once while listing.
const READS_IN_FLIGHT: usize = 16;

impl LeaseCore {
    /// Every held lease whose key starts with the prefix, ordered by key.
    pub(crate) async fn list(&self, req: ListRequest) -> Result<LeaseList, LeaseError> {
        let held = self.held(&req.prefix).await?;
        Ok(LeaseList {
            leases: held.into_iter().map(|(_, lease)| lease).collect(),
        })
    }

    /// Every held lease under `prefix` with the event that wrote its current
    /// record (acquired or renewed), ordered by key. Keys come from the
    /// leader's stream info; each is then read like `owner`, so a key freed
    /// in between is simply left out.
    pub(crate) async fn held(
        &self,
        prefix: &KeyPrefix,
    ) -> Result<Vec<(ChangeKind, Lease)>, LeaseError> {
        let bucket = self.bucket()?;
        let mut keys = bucket.keys().await.map_err(|err| self.store_error(err))?;
        keys.retain(|key| prefix.matches(key));
        keys.sort();
        let reads = futures::stream::iter(keys)
            .map(|key| async move {
                let entry = self.read(bucket, &key).await?;
                Ok::<_, LeaseError>(match entry {
                    Some(Entry::Held {
                        seq,
                        renewed,
                        record,
                        stored_at,
                    }) => {
                        let kind = if renewed {
                            ChangeKind::Renewed
                        } else {
                            ChangeKind::Acquired
                        };
                        Some((kind, record.lease(&key, seq, Some(stored_at))))
                    }
                    _ => None,
                })
            })
            .buffered(READS_IN_FLIGHT);
        let found: Vec<_> = reads.try_collect().await?;
        Ok(found.into_iter().flatten().collect())
    }
}
