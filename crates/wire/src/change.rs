//! Change events: what a message on `dagnats.lease.changed.<key>` says.
//!
//! The server republishes every write with its original headers plus
//! `Nats-Sequence` (the revision), `Nats-Subject` and `Nats-Time-Stamp`.
//! `Dagnats-Lease-Event` says acquired, renewed or released; the server's
//! `Nats-Marker-Reason: MaxAge` marker says expired. A release is a purge
//! with a TTL, which the server removes without a marker, so a released key
//! never later shows as expired.

use serde::Serialize;
use time::OffsetDateTime;

use crate::names::{
    CHANGED_PREFIX, HEADER_MARKER_REASON, HEADER_PREVIOUS_HOLDER, HEADER_SEQUENCE, HEADER_TIMESTAMP,
};
use crate::record::{Entry, LeaseRecord, decode_written_entry};
use crate::reply::Lease;
use crate::timefmt;

/// What happened to a key: the SSE event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Acquired,
    Renewed,
    Released,
    Expired,
}

impl ChangeKind {
    /// The event name on the wire (and in SSE).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Acquired => "acquired",
            ChangeKind::Renewed => "renewed",
            ChangeKind::Released => "released",
            ChangeKind::Expired => "expired",
        }
    }

    /// Whether the key has no holder after this change.
    pub fn ends_tenure(self) -> bool {
        matches!(self, ChangeKind::Released | ChangeKind::Expired)
    }
}

/// One change of one key, as a message on `dagnats.lease.changed.<key>`
/// says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChangeEvent {
    pub event: ChangeKind,
    pub key: String,
    /// The revision of the write (or of the server's expiry marker).
    pub revision: u64,
    /// The holder, when known (an expiry carries none of its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// The lease, for acquired and renewed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// For an `acquired` written by a transfer: the holder the lease was
    /// handed over from (its tenure ended at this revision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<String>,
    /// Under a policy, the principal the tenure belongs to (acquired and
    /// renewed); never shown, since a reader needs only the lease.
    #[serde(skip)]
    pub principal: Option<String>,
    /// For acquired and renewed: the revision that started the tenure the
    /// record belongs to. Not in the event's JSON (its data is the lease).
    #[serde(skip)]
    pub tenure: Option<u64>,
    /// For renewed: how many times that tenure was renewed so far.
    #[serde(skip)]
    pub renewals: u64,
}

/// Why a message on the change subjects is not a change event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAChange {
    /// Not under `dagnats.lease.changed.`.
    Subject,
    /// No `Nats-Sequence` header, so no revision.
    NoRevision,
    /// A record that does not parse (the sentence says why).
    Corrupt(String),
}

impl ChangeEvent {
    /// Reads a change event from its subject, headers (`header` looks one
    /// up by name) and body.
    pub fn decode<'a>(
        subject: &str,
        header: impl Fn(&str) -> Option<&'a str>,
        payload: &[u8],
    ) -> Result<ChangeEvent, NotAChange> {
        Self::decode_written(subject, header, payload, None)
    }

    /// [`ChangeEvent::decode`] for the writer of `payload`: `written` is
    /// the lease record it serialized into these very bytes (see
    /// [`decode_written_entry`]).
    pub fn decode_written<'a>(
        subject: &str,
        header: impl Fn(&str) -> Option<&'a str>,
        payload: &[u8],
        written: Option<LeaseRecord>,
    ) -> Result<ChangeEvent, NotAChange> {
        let key = Self::key_of(subject)
            .ok_or(NotAChange::Subject)?
            .to_string();
        let revision = header(HEADER_SEQUENCE)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or(NotAChange::NoRevision)?;
        let stored_at = header(HEADER_TIMESTAMP)
            .and_then(|at| timefmt::parse(at).ok())
            .unwrap_or_else(OffsetDateTime::now_utc);
        let expired = header(HEADER_MARKER_REASON).is_some();
        let entry = decode_written_entry(revision, stored_at, &header, payload, written)
            .map_err(NotAChange::Corrupt)?;
        Ok(match entry {
            Entry::Held {
                renewed, record, ..
            } => ChangeEvent {
                event: if renewed {
                    ChangeKind::Renewed
                } else {
                    ChangeKind::Acquired
                },
                holder: Some(record.holder.clone()),
                lease: Some(record.lease(&key, revision, Some(stored_at))),
                previous_holder: header(HEADER_PREVIOUS_HOLDER).map(str::to_string),
                tenure: Some(record.tenure_at(revision)),
                renewals: record.renewals,
                principal: record.principal,
                key,
                revision,
            },
            Entry::Free { released, .. } => ChangeEvent {
                event: if expired {
                    ChangeKind::Expired
                } else {
                    ChangeKind::Released
                },
                holder: released.map(|r| r.holder),
                lease: None,
                previous_holder: None,
                principal: None,
                tenure: None,
                renewals: 0,
                key,
                revision,
            },
        })
    }

    /// The key whose changes `subject` carries, if it is a change subject.
    pub fn key_of(subject: &str) -> Option<&str> {
        subject
            .strip_prefix(CHANGED_PREFIX)
            .and_then(|rest| rest.strip_prefix('.'))
    }

    /// The subject carrying the changes of `key`, or of every key.
    pub fn subject(key: Option<&str>) -> String {
        format!("{CHANGED_PREFIX}.{}", key.unwrap_or("*"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::HEADER_EVENT;

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    #[test]
    fn an_expiry_marker_is_expired_and_a_purge_is_released() {
        let marker = [(HEADER_SEQUENCE, "9"), (HEADER_MARKER_REASON, "MaxAge")];
        let change = ChangeEvent::decode("dagnats.lease.changed.k", headers(&marker), b"").unwrap();
        assert_eq!((change.event, change.revision), (ChangeKind::Expired, 9));
        let body = br#"{"v":1,"holder":"h","released_at":"2026-10-18T12:00:00Z","prev":8}"#;
        let purge = [
            (HEADER_SEQUENCE, "10"),
            (HEADER_EVENT, "released"),
            ("KV-Operation", "PURGE"),
        ];
        let change = ChangeEvent::decode("dagnats.lease.changed.k", headers(&purge), body).unwrap();
        assert_eq!(change.event, ChangeKind::Released);
        assert_eq!(change.holder.as_deref(), Some("h"));
    }

    #[test]
    fn a_transfer_is_acquired_and_names_the_previous_holder() {
        let body = br#"{"v":1,"holder":"b","ttl_ms":1000,"acquired_at":"2026-10-18T12:00:00Z","written_at":"2026-10-18T12:00:00Z","prev":7,"previous_holder":"a"}"#;
        let transfer = [
            (HEADER_SEQUENCE, "8"),
            (HEADER_EVENT, "acquired"),
            (HEADER_PREVIOUS_HOLDER, "a"),
        ];
        let change =
            ChangeEvent::decode("dagnats.lease.changed.k", headers(&transfer), body).unwrap();
        assert_eq!(change.event, ChangeKind::Acquired);
        assert_eq!(change.holder.as_deref(), Some("b"));
        assert_eq!(change.previous_holder.as_deref(), Some("a"));
        let acquire = [(HEADER_SEQUENCE, "8"), (HEADER_EVENT, "acquired")];
        let change =
            ChangeEvent::decode("dagnats.lease.changed.k", headers(&acquire), body).unwrap();
        assert_eq!(change.previous_holder, None);
    }

    #[test]
    fn a_writers_own_record_decodes_to_the_event_its_bytes_do() {
        let record = LeaseRecord {
            v: 1,
            holder: "h".into(),
            ttl_ms: 2_000,
            acquired_at: time::macros::datetime!(2026-10-18 12:00 UTC),
            written_at: time::macros::datetime!(2026-10-18 12:00:01.5 UTC),
            prev: 7,
            previous_holder: None,
            principal: Some("team-a".into()),
            tenure: None,
            renewals: 0,
        };
        let body = serde_json::to_vec(&record).unwrap();
        let renew = [
            (HEADER_SEQUENCE, "8"),
            (HEADER_EVENT, "renewed"),
            (HEADER_TIMESTAMP, "2026-10-18T12:00:01.6Z"),
        ];
        let subject = "dagnats.lease.changed.k";
        let parsed = ChangeEvent::decode(subject, headers(&renew), &body).unwrap();
        let taken =
            ChangeEvent::decode_written(subject, headers(&renew), &body, Some(record)).unwrap();
        assert_eq!(taken, parsed);
        assert_eq!(parsed.principal.as_deref(), Some("team-a"));
        let shown = serde_json::to_string(&parsed).unwrap();
        assert!(
            !shown.contains("team-a"),
            "the principal is never shown: {shown}"
        );
        assert_eq!(ChangeEvent::key_of(subject), Some("k"));
        assert_eq!(ChangeEvent::key_of("dagnats.lease.changedk"), None);
    }

    #[test]
    fn a_message_without_a_revision_or_off_the_subjects_is_not_a_change() {
        let none: [(&str, &str); 0] = [];
        assert_eq!(
            ChangeEvent::decode("dagnats.lease.changed.k", headers(&none), b""),
            Err(NotAChange::NoRevision)
        );
        assert_eq!(
            ChangeEvent::decode("elsewhere.k", headers(&none), b""),
            Err(NotAChange::Subject)
        );
    }
}
