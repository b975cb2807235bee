//! A record of the history stream: one tenure as the history knew it when
//! it wrote the record, and what it needs to go on from there after a
//! restart (docs/protocol.md, Tenure history).
//!
//! A key's records are the messages of its subject, oldest first: a
//! tenure's record when it starts, perhaps again later with more
//! renewals, and one when it ends. The last record of a tenure is what it
//! is.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use dagnats_leases_wire::history::Tenure;
use dagnats_leases_wire::timefmt;

/// The only version of the history record this gateway writes and reads.
pub(crate) const STORED_VERSION: u32 = 1;

/// The last write of a tenure the history saw: when the lease it wrote
/// would run out, for an end the history never saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LastWrite {
    pub(crate) ttl_ms: u64,
    /// The writing gateway's clock when it sent it (the record's own).
    #[serde(with = "timefmt")]
    pub(crate) written_at: OffsetDateTime,
}

impl LastWrite {
    /// When the lease this write granted runs out.
    pub(crate) fn due(&self) -> OffsetDateTime {
        self.written_at + std::time::Duration::from_millis(self.ttl_ms)
    }
}

/// One message of the history stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stored {
    pub(crate) v: u32,
    #[serde(flatten)]
    pub(crate) tenure: Tenure,
    /// The bucket revision of the key whose change this record reflects:
    /// a change at or below it is already in the history.
    pub(crate) seen: u64,
    #[serde(flatten)]
    pub(crate) last: LastWrite,
}

impl Stored {
    /// A record of `tenure` as of the change at revision `seen`.
    pub(crate) fn new(tenure: Tenure, seen: u64, last: LastWrite) -> Self {
        Stored {
            v: STORED_VERSION,
            tenure,
            seen,
            last,
        }
    }

    /// Reads a record; one this gateway cannot read is named with its
    /// sequence in the history stream.
    pub(crate) fn parse(seq: u64, body: &[u8]) -> Result<Stored, String> {
        let stored: Stored = serde_json::from_slice(body)
            .map_err(|err| format!("history record {seq} does not parse: {err}"))?;
        if stored.v != STORED_VERSION {
            return Err(format!(
                "history record {seq} has version {}, this gateway reads {STORED_VERSION}",
                stored.v
            ));
        }
        Ok(stored)
    }

    /// Whether the tenure is still open in this record.
    pub(crate) fn is_open(&self) -> bool {
        self.tenure.end.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dagnats_leases_wire::history::TenureEnd;
    use time::macros::datetime;

    #[test]
    fn a_record_is_the_tenure_plus_what_the_history_goes_on_from() {
        let at = datetime!(2026-10-18 12:00 UTC);
        let stored = Stored::new(
            Tenure {
                key: "k".into(),
                holder: "h".into(),
                tenure: 4,
                acquired_at: at,
                ended_at: Some(at),
                end: Some(TenureEnd::Released),
                end_revision: Some(7),
                renewals: 2,
            },
            7,
            LastWrite {
                ttl_ms: 15_000,
                written_at: at,
            },
        );
        let json = serde_json::to_value(&stored).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "v": 1, "key": "k", "holder": "h", "tenure": 4,
                "acquired_at": "2026-10-18T12:00:00.000Z",
                "ended_at": "2026-10-18T12:00:00.000Z", "end": "released",
                "end_revision": 7, "renewals": 2, "seen": 7,
                "ttl_ms": 15000, "written_at": "2026-10-18T12:00:00.000Z"
            })
        );
        let bytes = serde_json::to_vec(&stored).unwrap();
        assert_eq!(Stored::parse(9, &bytes), Ok(stored));
        assert!(Stored::parse(9, b"{").unwrap_err().contains("record 9"));
    }
}
