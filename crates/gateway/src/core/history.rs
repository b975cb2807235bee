//! History: the tenure history, newest first, a page at a time
//! (docs/protocol.md, Tenure history). The history itself is written and
//! read behind the `TenureLog` seam; the core keeps what a query wants,
//! orders and pages it, and reads an open tenure's renewals so far from
//! the bucket.

use std::collections::HashMap;

use super::error::LeaseError;
use super::lease_core::LeaseCore;
use super::list::Visible;
use super::ports::Records;
use dagnats_leases_wire::history::{Cursor, HistoryRequest, Tenure, TenureHistory};
use dagnats_leases_wire::record::Entry;

/// Open tenures on a page past which their renewals are read from one
/// snapshot of the bucket rather than key by key.
const READ_ONE_BY_ONE: usize = 8;

impl LeaseCore {
    /// One page of the tenures `req` asks for of the keys `visible` lets
    /// the caller read, newest first (by `tenure`), and the cursor of the
    /// next page. With the history off, an empty page.
    pub(crate) async fn history(
        &self,
        req: HistoryRequest,
        visible: Visible<'_>,
    ) -> Result<TenureHistory, LeaseError> {
        let bucket = self.bucket()?;
        let Some(log) = self.tenure_log() else {
            return Ok(TenureHistory {
                tenures: Vec::new(),
                next: None,
            });
        };
        let candidates = log.candidates(&req).await.map_err(|reason| {
            LeaseError::Unavailable(format!("the tenure history cannot be read: {reason}"))
        })?;
        let candidates = candidates.into_iter().filter(|t| visible(&t.key));
        let (mut tenures, next) = page(&req, candidates);
        renewals_so_far(bucket, &mut tenures).await;
        Ok(TenureHistory { tenures, next })
    }
}

/// The tenures `req` wants among `candidates`, newest first, cut to its
/// page size, and the cursor after the page when more follow.
fn page(
    req: &HistoryRequest,
    candidates: impl Iterator<Item = Tenure>,
) -> (Vec<Tenure>, Option<String>) {
    let mut tenures: Vec<Tenure> = candidates.filter(|t| req.wants(t)).collect();
    tenures.sort_by(|a, b| b.tenure.cmp(&a.tenure).then_with(|| a.key.cmp(&b.key)));
    let limit = req.page_size();
    let next =
        (tenures.len() > limit).then(|| String::from(Cursor::after(tenures[limit - 1].tenure)));
    tenures.truncate(limit);
    (tenures, next)
}

/// Each open tenure's renewals as the bucket's record counts them now
/// (the history writes none of them). A key the bucket cannot be read
/// for keeps the history's count.
async fn renewals_so_far(bucket: &dyn Records, tenures: &mut [Tenure]) {
    let open: Vec<usize> = (0..tenures.len())
        .filter(|&i| tenures[i].end.is_none())
        .collect();
    if open.is_empty() {
        return;
    }
    let mut counted: HashMap<String, (u64, u64)> = HashMap::new();
    let mut note = |key: &str, entry: &Entry| {
        if let Entry::Held { seq, record, .. } = entry {
            counted.insert(key.to_string(), (record.tenure_at(*seq), record.renewals));
        }
    };
    if open.len() <= READ_ONE_BY_ONE {
        for &i in &open {
            if let Ok(Some(entry)) = bucket.last(&tenures[i].key).await {
                note(&tenures[i].key, &entry);
            }
        }
    } else if let Ok(snapshot) = bucket.entries().await {
        for (key, entry) in snapshot.iter() {
            if let Ok(entry) = entry {
                note(key, entry);
            }
        }
    }
    for i in open {
        let tenure = &mut tenures[i];
        if let Some(&(started, renewals)) = counted.get(&tenure.key)
            && started == tenure.tenure
        {
            tenure.renewals = tenure.renewals.max(renewals);
        }
    }
}
