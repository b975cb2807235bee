//! The stored record of a key: versioned JSON, plus the headers that say
//! what kind of message it is. The gateway writes and reads it; change-event
//! subscribers decode the same bytes, republished.
//!
//! A record that does not parse is corrupt and never guessed at: the call
//! that meets one answers `internal`.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use std::time::Duration;

use crate::history::TenureEnd;
use crate::names::{HEADER_EVENT, HEADER_KV_OPERATION, HEADER_MARKER_REASON};
use crate::reply::Lease;
use crate::timefmt;

/// The only record version this gateway writes and reads.
pub const RECORD_VERSION: u32 = 1;

/// Why a record was written; the value of `Dagnats-Lease-Event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteEvent {
    Acquired,
    Renewed,
    Released,
}

impl WriteEvent {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteEvent::Acquired => "acquired",
            WriteEvent::Renewed => "renewed",
            WriteEvent::Released => "released",
        }
    }

    /// The event a header value names.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "acquired" => Some(WriteEvent::Acquired),
            "renewed" => Some(WriteEvent::Renewed),
            "released" => Some(WriteEvent::Released),
            _ => None,
        }
    }
}

/// A live lease. `prev` is the revision this write replaced: a renew
/// retried after a lost reply finds its own earlier write by it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub v: u32,
    pub holder: String,
    pub ttl_ms: u64,
    #[serde(with = "timefmt")]
    pub acquired_at: OffsetDateTime,
    /// The gateway's clock just before the write was sent: the server
    /// stamps the message later, so this + ttl never overstates expiry.
    #[serde(with = "timefmt")]
    pub written_at: OffsetDateTime,
    pub prev: u64,
    /// A transfer wrote it, taking the lease from this holder at `prev`: a
    /// transfer retried after a lost reply finds its own write by the two.
    /// Absent from every other record (and from records of gateways that
    /// predate transfer), so the version stays 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_holder: Option<String>,
    /// Under a policy, the principal the tenure belongs to: the one that
    /// acquired it, kept through renews (docs/protocol.md, Authorization).
    /// Absent without a policy and from records written before policies,
    /// so the version stays 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// On a renew's record: the revision that started the tenure it
    /// renews, so the tenure history knows it from any one of its records
    /// (docs/protocol.md, Tenure history). Absent on the record that
    /// started it (its own revision is the tenure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenure: Option<u64>,
    /// How many times the tenure was renewed, this write included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub renewals: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LeaseRecord {
    /// The revision that started this record's tenure, the record being
    /// at `seq`.
    pub fn tenure_at(&self, seq: u64) -> u64 {
        self.tenure.unwrap_or(seq)
    }

    /// The lease this record describes, at revision `seq`. `expires_at`
    /// counts from the earlier of the gateway's clock at the write and the
    /// server's stamp (when known), so it is never later than the server's
    /// own expiry.
    pub fn lease(&self, key: &str, seq: u64, stored_at: Option<OffsetDateTime>) -> Lease {
        let start = stored_at.map_or(self.written_at, |at| at.min(self.written_at));
        Lease {
            held: true,
            key: key.to_string(),
            holder: self.holder.clone(),
            revision: seq,
            acquired_at: self.acquired_at,
            expires_at: start + Duration::from_millis(self.ttl_ms),
            ttl_ms: self.ttl_ms,
        }
    }
}

/// The tombstone a release leaves: who released which revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRecord {
    pub v: u32,
    pub holder: String,
    #[serde(with = "timefmt")]
    pub released_at: OffsetDateTime,
    pub prev: u64,
    /// An operator revoked the lease; the holder did not release it, so a
    /// release retried by the holder is `lost`, not a repeat success.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
    /// The principal the released tenure belonged to, as in its
    /// [`LeaseRecord`]: a release retried by another principal is not its
    /// to repeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The gateway took back a renew acknowledged too late to count: the
    /// lease ran out (with `revoked`, since its holder did not release it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub withdrawn: bool,
    /// The tenure it ended, when the tombstone says (it does from the
    /// history on): the revision that started it, when, and how many
    /// times it was renewed, so a history that never saw the tenure's
    /// other records still records it whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenure: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::timefmt::option"
    )]
    pub acquired_at: Option<OffsetDateTime>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub renewals: u64,
}

impl ReleaseRecord {
    /// How the tenure this tombstone ended, ended: the one place a
    /// revoke's mark is read (docs/protocol.md, Tenure history).
    pub fn end(&self) -> TenureEnd {
        match (self.revoked, self.withdrawn) {
            (_, true) => TenureEnd::Expired,
            (true, false) => TenureEnd::Revoked,
            (false, false) => TenureEnd::Released,
        }
    }
}

/// What the last message of a key says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A live lease, written by acquire or renew.
    Held {
        seq: u64,
        /// A renew wrote it; otherwise an acquire did, and a tenure
        /// started at `seq`.
        renewed: bool,
        record: LeaseRecord,
        /// The server's timestamp of the message.
        stored_at: OffsetDateTime,
    },
    /// Nobody holds the key: a release tombstone (`released` says who
    /// released it), the server's expiry marker, or a delete by a KV tool.
    Free {
        seq: u64,
        released: Option<ReleaseRecord>,
    },
}

/// Every header [`decode_entry`] looks up: a reader can find them all in
/// one walk of a message's headers.
pub const ENTRY_HEADERS: [&str; 3] = [HEADER_MARKER_REASON, HEADER_EVENT, HEADER_KV_OPERATION];

/// Reads one message of the bucket. `header` looks a header up by name,
/// one of [`ENTRY_HEADERS`].
pub fn decode_entry<'a>(
    seq: u64,
    stored_at: OffsetDateTime,
    header: impl Fn(&str) -> Option<&'a str>,
    body: &[u8],
) -> Result<Entry, String> {
    decode_written_entry(seq, stored_at, header, body, None)
}

/// [`decode_entry`] for the writer of `body`: `written` is the lease record
/// it serialized into these very bytes, taken instead of parsing them
/// again (a gateway reads each of its own writes back as a change event).
pub fn decode_written_entry<'a>(
    seq: u64,
    stored_at: OffsetDateTime,
    header: impl Fn(&str) -> Option<&'a str>,
    body: &[u8],
    written: Option<LeaseRecord>,
) -> Result<Entry, String> {
    if header(HEADER_MARKER_REASON).is_some() {
        return Ok(Entry::Free {
            seq,
            released: None,
        });
    }
    let event = header(HEADER_EVENT).and_then(WriteEvent::parse);
    if matches!(header(HEADER_KV_OPERATION), Some("DEL" | "PURGE")) {
        let released = match event {
            Some(WriteEvent::Released) => Some(parse_versioned::<ReleaseRecord>(seq, body)?),
            _ => None,
        };
        return Ok(Entry::Free { seq, released });
    }
    match event {
        Some(event @ (WriteEvent::Acquired | WriteEvent::Renewed)) => Ok(Entry::Held {
            seq,
            renewed: event == WriteEvent::Renewed,
            record: match written {
                Some(record) => record,
                None => parse_versioned::<LeaseRecord>(seq, body)?,
            },
            stored_at,
        }),
        _ => Err(format!(
            "record at revision {seq} was not written by dagnats-leases (no {HEADER_EVENT} header)"
        )),
    }
}

trait Versioned {
    fn version(&self) -> u32;
}
impl Versioned for LeaseRecord {
    fn version(&self) -> u32 {
        self.v
    }
}
impl Versioned for ReleaseRecord {
    fn version(&self) -> u32 {
        self.v
    }
}

fn parse_versioned<T: serde::de::DeserializeOwned + Versioned>(
    seq: u64,
    body: &[u8],
) -> Result<T, String> {
    let record: T = serde_json::from_slice(body)
        .map_err(|err| format!("corrupt record at revision {seq}: {err}"))?;
    if record.version() != RECORD_VERSION {
        return Err(format!(
            "record at revision {seq} has version {}, this gateway reads {RECORD_VERSION}",
            record.version()
        ));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    const AT: OffsetDateTime = datetime!(2026-10-18 12:00 UTC);

    #[test]
    fn decoding_asks_only_for_the_entry_headers() {
        let asked = std::cell::RefCell::new(Vec::new());
        let header = |name: &str| {
            asked.borrow_mut().push(name.to_string());
            match name {
                HEADER_EVENT => Some("released"),
                HEADER_KV_OPERATION => Some("PURGE"),
                _ => None,
            }
        };
        let body = br#"{"v":1,"holder":"h","released_at":"2026-10-18T12:00:00Z","prev":2}"#;
        assert!(decode_entry(3, AT, header, body).is_ok());
        let asked = asked.into_inner();
        assert_eq!(asked.len(), 3, "{asked:?}");
        assert!(
            asked
                .iter()
                .all(|name| ENTRY_HEADERS.contains(&name.as_str()))
        );
    }

    #[test]
    fn marker_is_free() {
        let entry = decode_entry(9, AT, headers(&[("Nats-Marker-Reason", "MaxAge")]), b"");
        assert_eq!(
            entry,
            Ok(Entry::Free {
                seq: 9,
                released: None
            })
        );
    }

    #[test]
    fn lease_record_round_trips() {
        let record = LeaseRecord {
            v: 1,
            holder: "h".into(),
            ttl_ms: 1_000,
            acquired_at: AT,
            written_at: AT,
            prev: 0,
            previous_holder: None,
            principal: None,
            tenure: None,
            renewals: 0,
        };
        let body = serde_json::to_vec(&record).unwrap();
        let entry = decode_entry(3, AT, headers(&[(HEADER_EVENT, "acquired")]), &body).unwrap();
        assert_eq!(
            entry,
            Entry::Held {
                seq: 3,
                renewed: false,
                record,
                stored_at: AT
            }
        );
    }

    #[test]
    fn a_record_without_a_previous_holder_still_reads_and_one_with_it_round_trips() {
        let old = br#"{"v":1,"holder":"h","ttl_ms":1000,"acquired_at":"2026-10-18T12:00:00Z","written_at":"2026-10-18T12:00:00Z","prev":0}"#;
        let Ok(Entry::Held { record, .. }) =
            decode_entry(3, AT, headers(&[(HEADER_EVENT, "acquired")]), old)
        else {
            panic!("a version-1 record without previous_holder reads")
        };
        assert_eq!(record.previous_holder, None);
        let moved = LeaseRecord {
            previous_holder: Some("a".into()),
            ..record
        };
        let body = serde_json::to_vec(&moved).unwrap();
        let Ok(Entry::Held { record, .. }) =
            decode_entry(4, AT, headers(&[(HEADER_EVENT, "acquired")]), &body)
        else {
            panic!("a transfer record reads")
        };
        assert_eq!(record, moved);
    }

    #[test]
    fn a_record_without_a_principal_still_reads_and_one_with_it_round_trips() {
        let old = br#"{"v":1,"holder":"h","ttl_ms":1000,"acquired_at":"2026-10-18T12:00:00Z","written_at":"2026-10-18T12:00:00Z","prev":0}"#;
        let Ok(Entry::Held { record, .. }) =
            decode_entry(3, AT, headers(&[(HEADER_EVENT, "renewed")]), old)
        else {
            panic!("a version-1 record without principal reads")
        };
        assert_eq!(record.principal, None);
        let body = serde_json::to_string(&record).unwrap();
        assert!(!body.contains("principal"), "none is not written: {body}");
        let bound = LeaseRecord {
            principal: Some("team-a".into()),
            ..record
        };
        let body = serde_json::to_vec(&bound).unwrap();
        let Ok(Entry::Held { record, .. }) =
            decode_entry(4, AT, headers(&[(HEADER_EVENT, "renewed")]), &body)
        else {
            panic!("a record with a principal reads")
        };
        assert_eq!(record, bound);
        let tombstone = br#"{"v":1,"holder":"h","released_at":"2026-10-18T12:00:00Z","prev":2,"principal":"team-a"}"#;
        let released = [(HEADER_EVENT, "released"), (HEADER_KV_OPERATION, "PURGE")];
        let Ok(Entry::Free {
            released: Some(tombstone),
            ..
        }) = decode_entry(5, AT, headers(&released), tombstone)
        else {
            panic!("a tombstone with a principal reads")
        };
        assert_eq!(tombstone.principal.as_deref(), Some("team-a"));
    }

    #[test]
    fn unparsable_or_foreign_records_are_corrupt() {
        assert!(decode_entry(3, AT, headers(&[(HEADER_EVENT, "renewed")]), b"{").is_err());
        assert!(decode_entry(3, AT, headers(&[]), b"{}").is_err());
        let future = br#"{"v":2,"holder":"h","ttl_ms":1000,"acquired_at":"2026-10-18T12:00:00Z","written_at":"2026-10-18T12:00:00Z","prev":0}"#;
        let err = decode_entry(3, AT, headers(&[(HEADER_EVENT, "renewed")]), future).unwrap_err();
        assert!(err.contains("version 2"), "{err}");
    }
}
