//! What a message of the bucket, as the history consumer delivers it, is
//! to the history: the key it changed and what the change says
//! (`derive::Seen`).

use async_nats::Message;

use super::derive::{Change, Seen, Told};
use super::stored::LastWrite;
use crate::store::pull::Delivery;
use dagnats_leases_wire::history::TenureEnd;
use dagnats_leases_wire::names::{BUCKET, HEADER_MARKER_REASON};
use dagnats_leases_wire::record::{Entry, decode_entry};

/// The key and the change a delivered message of the bucket is; `None`
/// for a message that is no change of a lease (logged when unreadable).
pub(super) fn change_of(message: &Message, delivery: &Delivery) -> Option<(String, Change)> {
    let key = message
        .subject
        .as_str()
        .strip_prefix(&format!("$KV.{BUCKET}."))?
        .to_string();
    let headers = message.headers.as_ref();
    let header = |name: &str| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
    let (revision, at) = (delivery.stream_seq, delivery.stored_at);
    let entry = match decode_entry(revision, at, header, &message.payload) {
        Ok(entry) => entry,
        Err(reason) => {
            tracing::warn!(key, revision, reason, "a record the history cannot read");
            return None;
        }
    };
    let seen = match entry {
        Entry::Held {
            renewed: false,
            record,
            ..
        } => Seen::Started {
            last: LastWrite {
                ttl_ms: record.ttl_ms,
                written_at: record.written_at,
            },
            holder: record.holder,
            acquired_at: record.acquired_at,
            from: record.previous_holder,
            replaced: record.prev,
        },
        Entry::Held { record, .. } => Seen::Renewed {
            tenure: record.tenure,
            renewals: record.renewals,
            last: LastWrite {
                ttl_ms: record.ttl_ms,
                written_at: record.written_at,
            },
            holder: record.holder,
            acquired_at: record.acquired_at,
        },
        Entry::Free {
            released: Some(tombstone),
            ..
        } => Seen::Freed {
            end: tombstone.end(),
            told: Some(Told {
                holder: tombstone.holder,
                tenure: tombstone.tenure,
                acquired_at: tombstone.acquired_at,
                renewals: tombstone.renewals,
            }),
        },
        // The server's expiry marker, or a delete by a KV tool (an
        // operator's hand, like a revoke).
        Entry::Free { released: None, .. } => Seen::Freed {
            end: if header(HEADER_MARKER_REASON).is_some() {
                TenureEnd::Expired
            } else {
                TenureEnd::Revoked
            },
            told: None,
        },
    };
    Some((key, Change { revision, at, seen }))
}
