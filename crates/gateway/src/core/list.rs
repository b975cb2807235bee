//! List: the held leases, ordered by key, from one snapshot of the bucket
//! confirmed current once (see [`Records::entries`]), a page at a time: at
//! most `limit` leases and, over NATS, never more bytes than the server's
//! max_payload. A key whose record does not parse is named apart
//! (`corrupt`), never a reason to answer no listing.
//!
//! Under a policy a listing holds only the keys the caller may read,
//! chosen before the page is cut: a page is as full as it would be
//! without the hidden keys, and `next` never names one, so no listing
//! tells a hidden key exists.

use super::error::LeaseError;
use super::lease_core::LeaseCore;
use super::ports::{Records, StoreError};
use dagnats_leases_wire::change::ChangeKind;
use dagnats_leases_wire::record::Entry;
use dagnats_leases_wire::reply::{Lease, LeaseList};
use dagnats_leases_wire::request::{KeyPrefix, ListRequest, MAX_NAME_LEN};

/// What bounds a list reply besides the request's own `limit`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ListBounds {
    /// Leases per reply when the request names no `limit`; `None`: all.
    pub(crate) default_limit: Option<usize>,
    /// Bytes the encoded reply may take (a NATS server's max_payload).
    pub(crate) max_bytes: Option<usize>,
}

/// The keys a caller may see: `&|_| true` for every key.
pub(crate) type Visible<'a> = &'a (dyn Fn(&str) -> bool + Sync);

impl LeaseCore {
    /// The held leases under the prefix and after `after` that are
    /// `visible`, ordered by key, as many as the limit and `bounds` allow;
    /// `next` names the last one when more follow.
    pub(crate) async fn list(
        &self,
        req: ListRequest,
        bounds: ListBounds,
        visible: Visible<'_>,
    ) -> Result<LeaseList, LeaseError> {
        let limit = req.limit.map(|l| l.get()).or(bounds.default_limit);
        let after = req.after.as_ref().map(|k| k.as_str());
        let bucket = self.bucket()?;
        let mut page = Page::new(limit, bounds.max_bytes);
        for found in self
            .found_under(bucket, (&req.prefix, visible), after)
            .await?
        {
            let fits = match found {
                Found::Held(_, lease) => page.push(lease),
                Found::Corrupt(key) => page.push_corrupt(key),
            };
            if !fits {
                break;
            }
        }
        page.finish()
    }

    /// Every held lease under `prefix` that is `visible`, with the event
    /// that wrote its current record (acquired or renewed), ordered by key,
    /// and the keys whose record does not parse.
    pub(crate) async fn held(
        &self,
        prefix: &KeyPrefix,
        visible: Visible<'_>,
    ) -> Result<Held, LeaseError> {
        let bucket = self.bucket()?;
        let mut held = Held::default();
        for found in self.found_under(bucket, (prefix, visible), None).await? {
            match found {
                Found::Held(kind, lease) => held.leases.push((kind, lease)),
                Found::Corrupt(key) => held.corrupt.push(key),
            }
        }
        Ok(held)
    }

    /// The held and the corrupt keys under `prefix` and after `after` that
    /// are `visible`, ordered by key, from one snapshot; what it shows is
    /// remembered like any read.
    async fn found_under(
        &self,
        bucket: &dyn Records,
        (prefix, visible): (&KeyPrefix, Visible<'_>),
        after: Option<&str>,
    ) -> Result<Vec<Found>, LeaseError> {
        let snapshot = bucket
            .entries()
            .await
            .map_err(|err| self.store_error(err))?;
        let mut entries: Vec<_> = snapshot
            .iter()
            .filter(|(key, _)| {
                prefix.matches(key)
                    && after.is_none_or(|after| key.as_str() > after)
                    && visible(key)
            })
            .collect();
        entries.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        let mut found = Vec::with_capacity(entries.len());
        for (key, entry) in entries {
            match entry {
                Ok(Entry::Held {
                    seq,
                    renewed,
                    record,
                    stored_at,
                }) => {
                    self.remember(key, *seq, record, Some(*stored_at));
                    let kind = if *renewed {
                        ChangeKind::Renewed
                    } else {
                        ChangeKind::Acquired
                    };
                    found.push(Found::Held(kind, record.lease(key, *seq, Some(*stored_at))));
                }
                Ok(Entry::Free { seq, .. }) => self.known_freed(key, *seq),
                Err(StoreError::Corrupt { cause, .. }) => {
                    tracing::warn!(key, cause, "corrupt record left out of a listing");
                    found.push(Found::Corrupt(key.clone()));
                }
                Err(err) => return Err(self.store_error(err.clone())),
            }
        }
        Ok(found)
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

/// A key a listing shows: held, or with a record that does not parse.
enum Found {
    Held(ChangeKind, Lease),
    Corrupt(String),
}

/// `{"leases":[` + `],"next":` + `}`.
const ENVELOPE_BYTES: usize = 21;
/// `,"corrupt":[` + `]`, once a page names a corrupt key.
const CORRUPT_BYTES: usize = 13;
/// The longest `next`: a quoted key (keys need no escaping).
const NEXT_BYTES: usize = MAX_NAME_LEN + 2;

/// One page being filled: it takes leases until the count or byte bound
/// is reached, and the first lease it turns away proves that `next` is due.
struct Page {
    leases: Vec<Lease>,
    corrupt: Vec<String>,
    limit: Option<usize>,
    max_bytes: Option<usize>,
    /// Encoded size so far, with room for the longest `next`.
    bytes: usize,
    more: bool,
}

impl Page {
    fn new(limit: Option<usize>, max_bytes: Option<usize>) -> Self {
        Page {
            leases: Vec::new(),
            corrupt: Vec::new(),
            limit,
            max_bytes,
            bytes: ENVELOPE_BYTES + NEXT_BYTES,
            more: false,
        }
    }

    /// Takes `lease`, or returns false (and the page is done) when it
    /// does not fit.
    fn push(&mut self, lease: Lease) -> bool {
        let full = self.limit.is_some_and(|limit| self.leases.len() >= limit);
        // Sized only when bytes bound the page: an HTTP list of 10,000
        // leases spent 5 % of its CPU encoding each one twice.
        let bounded = self.max_bytes.map(|max| {
            let size = encoded_len(&lease) + usize::from(!self.leases.is_empty());
            (size, max)
        });
        if full || bounded.is_some_and(|(size, max)| self.bytes + size > max) {
            self.more = true;
            return false;
        }
        self.bytes += bounded.map_or(0, |(size, _)| size);
        self.leases.push(lease);
        true
    }

    /// Names `key` as corrupt, or returns false (and the page is done) when
    /// the name does not fit.
    fn push_corrupt(&mut self, key: String) -> bool {
        let size = key.len()
            + 2
            + usize::from(!self.corrupt.is_empty())
            + if self.corrupt.is_empty() {
                CORRUPT_BYTES
            } else {
                0
            };
        if self.max_bytes.is_some_and(|max| self.bytes + size > max) {
            self.more = true;
            return false;
        }
        self.bytes += size;
        self.corrupt.push(key);
        true
    }

    fn finish(self) -> Result<LeaseList, LeaseError> {
        if self.more && self.leases.is_empty() {
            return Err(LeaseError::internal(format!(
                "one lease does not fit the server's max_payload of {} bytes",
                self.max_bytes.unwrap_or_default()
            )));
        }
        let next = self
            .more
            .then(|| self.leases.last().map(|lease| lease.key.clone()))
            .flatten();
        Ok(LeaseList {
            leases: self.leases,
            next,
            corrupt: self.corrupt,
        })
    }
}

/// The bytes `lease` encodes to, counted rather than kept.
fn encoded_len(lease: &Lease) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    serde_json::to_writer(&mut counter, lease).expect("a lease serializes");
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fakes::{self, request};
    use dagnats_leases_wire::kind::Kind;
    use serde_json::json;
    use time::OffsetDateTime;
    use time::macros::datetime;

    fn lease(key: &str) -> Lease {
        Lease {
            held: true,
            key: key.into(),
            holder: "holder".into(),
            revision: 12,
            acquired_at: datetime!(2026-10-18 12:00 UTC),
            expires_at: datetime!(2026-10-18 12:00:15 UTC),
            ttl_ms: 15_000,
        }
    }

    fn fill(page: &mut Page, keys: &[&str]) {
        for key in keys {
            if !page.push(lease(key)) {
                return;
            }
        }
    }

    #[test]
    fn a_page_at_its_limit_names_its_last_key_as_next() {
        let mut page = Page::new(Some(2), None);
        fill(&mut page, &["a", "b", "c"]);
        let list = page.finish().unwrap();
        assert_eq!(list.leases.len(), 2);
        assert_eq!(list.next.as_deref(), Some("b"));
    }

    #[test]
    fn a_page_that_reaches_the_end_has_no_next() {
        let mut page = Page::new(Some(2), None);
        fill(&mut page, &["a", "b"]);
        assert_eq!(page.finish().unwrap().next, None);
    }

    #[test]
    fn an_encoded_page_never_exceeds_max_bytes() {
        let keys: Vec<String> = (0..50).map(|i| format!("key-{i:03}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        for max in [400, 1_000, 4_096] {
            let mut page = Page::new(None, Some(max));
            fill(&mut page, &keys);
            let list = page.finish().unwrap();
            let encoded = serde_json::to_vec(&list).unwrap();
            assert!(encoded.len() <= max, "{} > {max}", encoded.len());
            assert!(list.next.is_some() && !list.leases.is_empty());
            // Only the room kept for the longest `next` and one lease is unused.
            let one = serde_json::to_vec(&lease("key-000")).unwrap().len() + 1;
            assert!(
                encoded.len() + NEXT_BYTES + one > max,
                "{} of {max}",
                encoded.len()
            );
        }
    }

    #[test]
    fn a_max_payload_too_small_for_one_lease_is_an_error_not_an_empty_page() {
        let mut page = Page::new(None, Some(100));
        fill(&mut page, &["a"]);
        assert_eq!(page.finish(), Err(LeaseError::Internal));
    }

    #[tokio::test]
    async fn a_listing_answers_every_other_lease_and_names_the_corrupt_keys() {
        let (core, records, _) = fakes::core(1 << 20);
        let now = OffsetDateTime::now_utc();
        records.hold("a", "ha", 10_000, now);
        records.corrupt("b");
        records.hold("c", "hc", 10_000, now);
        records.corrupt("d");
        let list = core
            .list(request(json!({})), ListBounds::default(), &|_| true)
            .await
            .unwrap();
        let keys: Vec<_> = list.leases.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["a", "c"]);
        assert_eq!(list.corrupt, ["b", "d"]);
        let held = core.held(&KeyPrefix::default(), &|_| true).await.unwrap();
        assert_eq!(held.leases.len(), 2, "a resume skips the corrupt keys too");
        let owner = core.owner(request(json!({"key": "b"}))).await;
        assert_eq!(owner.unwrap_err().kind(), Kind::Internal);
    }

    #[tokio::test]
    async fn a_listing_without_corrupt_keys_has_no_corrupt_field() {
        let (core, records, _) = fakes::core(1 << 20);
        records.hold("a", "ha", 10_000, OffsetDateTime::now_utc());
        let list = core
            .list(request(json!({})), ListBounds::default(), &|_| true)
            .await
            .unwrap();
        let body = serde_json::to_value(&list).unwrap();
        assert!(body.get("corrupt").is_none(), "{body}");
    }
}
