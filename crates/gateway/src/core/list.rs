//! List: every held lease, each read through the stream leader. A key
//! whose record does not parse is named apart (`corrupt`), never a reason
//! to answer no listing at all.

use futures::{StreamExt, TryStreamExt};

use super::error::LeaseError;
use super::leases::LeaseCore;
use super::ports::StoreError;
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
            leases: held.leases.into_iter().map(|(_, lease)| lease).collect(),
            corrupt: held.corrupt,
        })
    }

    /// Every held lease under `prefix` with the event that wrote its current
    /// record (acquired or renewed), ordered by key. Keys come from the
    /// leader's stream info; each is then read like `owner`, so a key freed
    /// in between is simply left out.
    pub(crate) async fn held(&self, prefix: &KeyPrefix) -> Result<Held, LeaseError> {
        let bucket = self.bucket()?;
        let mut keys = bucket.keys().await.map_err(|err| self.store_error(err))?;
        keys.retain(|key| prefix.matches(key));
        keys.sort();
        let reads = futures::stream::iter(keys)
            .map(|key| async move {
                let entry = match self.read_entry(bucket, &key).await {
                    Ok(entry) => entry,
                    Err(StoreError::Corrupt { cause, .. }) => {
                        tracing::warn!(key, cause, "corrupt record left out of a listing");
                        return Ok(Found::Corrupt(key));
                    }
                    Err(err) => return Err(self.store_error(err)),
                };
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
                        Found::Held(kind, record.lease(&key, seq, Some(stored_at)))
                    }
                    _ => Found::Free,
                })
            })
            .buffered(READS_IN_FLIGHT);
        let found: Vec<_> = reads.try_collect().await?;
        let mut held = Held::default();
        for found in found {
            match found {
                Found::Held(kind, lease) => held.leases.push((kind, lease)),
                Found::Corrupt(key) => held.corrupt.push(key),
                Found::Free => {}
            }
        }
        Ok(held)
    }
}

/// The held leases under a prefix, and the keys that could not be read.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// Each held lease with the event that wrote its current record
    /// (acquired or renewed), ordered by key.
    pub(crate) leases: Vec<(ChangeKind, Lease)>,
    /// Keys whose record does not parse, ordered.
    pub(crate) corrupt: Vec<String>,
}

/// What one key of a listing came to.
enum Found {
    Held(ChangeKind, Lease),
    Corrupt(String),
    Free,
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::OffsetDateTime;

    use crate::core::fakes::{self, request};
    use dagnats_leases_wire::kind::Kind;
    use dagnats_leases_wire::request::KeyPrefix;

    #[tokio::test]
    async fn a_listing_answers_every_other_lease_and_names_the_corrupt_keys() {
        let (core, records, _) = fakes::core(1 << 20);
        let now = OffsetDateTime::now_utc();
        records.hold("a", "ha", 10_000, now);
        records.corrupt("b");
        records.hold("c", "hc", 10_000, now);
        records.corrupt("d");
        let list = core.list(request(json!({}))).await.unwrap();
        let keys: Vec<_> = list.leases.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["a", "c"]);
        assert_eq!(list.corrupt, ["b", "d"]);
        let held = core.held(&KeyPrefix::default()).await.unwrap();
        assert_eq!(held.leases.len(), 2, "a resume skips the corrupt keys too");
        let owner = core.owner(request(json!({"key": "b"}))).await;
        assert_eq!(owner.unwrap_err().kind(), Kind::Internal);
    }

    #[tokio::test]
    async fn a_listing_without_corrupt_keys_has_no_corrupt_field() {
        let (core, records, _) = fakes::core(1 << 20);
        records.hold("a", "ha", 10_000, OffsetDateTime::now_utc());
        let list = core.list(request(json!({}))).await.unwrap();
        let body = serde_json::to_value(&list).unwrap();
        assert!(body.get("corrupt").is_none(), "{body}");
    }
}
