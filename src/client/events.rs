//! [`ChangeEvent`]: what a message on `dagnats.lease.changed.<key>` says.
//!
//! The server republishes each write with its original headers plus
//! `Nats-Sequence` (the revision), `Nats-Subject` and `Nats-Time-Stamp`.
//! `Dagnats-Lease-Event` names acquired, renewed and released; the server's
//! own `Nats-Marker-Reason: MaxAge` marker is an expiry. Releases are purges
//! whose tombstones expire without a marker, so an expiry is never the
//! clean-up of a release.

use async_nats::Message;
use serde::Serialize;
use time::OffsetDateTime;

use crate::core::model::Lease;
use crate::core::timefmt;
use crate::protocol::{CHANGED_PREFIX, HEADER_MARKER_REASON};
use crate::store::record::{Entry, LeaseEvent, decode_entry};

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    Acquired,
    Renewed,
    Released,
    Expired,
}

impl EventKind {
    /// The event name on the wire (and in SSE).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Renewed => "renewed",
            EventKind::Released => "released",
            EventKind::Expired => "expired",
        }
    }
}

/// One change of one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeEvent {
    pub event: EventKind,
    pub key: String,
    /// The revision of the write (or of the server's expiry marker).
    pub revision: u64,
    /// The holder, when the event names one (not for an expiry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// The lease, for acquired and renewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
}

impl ChangeEvent {
    /// Reads a change event; `None` for a message that is not one (no
    /// sequence, or a record this gateway did not write).
    pub fn from_message(msg: &Message) -> Option<ChangeEvent> {
        let key = msg
            .subject
            .as_str()
            .strip_prefix(CHANGED_PREFIX)?
            .strip_prefix('.')?
            .to_string();
        let headers = msg.headers.as_ref()?;
        let header = |name: &str| headers.get(name).map(|v| v.as_str());
        let revision: u64 = header("Nats-Sequence")?.parse().ok()?;
        let stored_at = header("Nats-Time-Stamp")
            .and_then(|t| timefmt::parse(t).ok())
            .unwrap_or_else(OffsetDateTime::now_utc);
        let expired = header(HEADER_MARKER_REASON).is_some();
        let event = match decode_entry(revision, stored_at, header, &msg.payload).ok()? {
            Entry::Held { event, record, .. } => ChangeEvent {
                event: if event == LeaseEvent::Acquired {
                    EventKind::Acquired
                } else {
                    EventKind::Renewed
                },
                holder: Some(record.holder.clone()),
                lease: Some(record.lease(&key, revision, Some(stored_at))),
                key,
                revision,
            },
            Entry::Free { released, .. } => ChangeEvent {
                event: if expired {
                    EventKind::Expired
                } else {
                    EventKind::Released
                },
                holder: released.map(|r| r.holder),
                lease: None,
                key,
                revision,
            },
        };
        Some(event)
    }

    /// The subject carrying the changes of `key`, or of every key.
    pub fn subject(key: Option<&str>) -> String {
        format!("{CHANGED_PREFIX}.{}", key.unwrap_or("*"))
    }
}
