//! The tenure history on the wire: what `api.leases.history` (and HTTP
//! `GET /v1/history`) is asked and answers (docs/protocol.md, Tenure
//! history).
//!
//! A tenure is one holder's hold of a key, from the acquire (or the
//! transfer) that gave it the key to its end; `tenure` is the revision that
//! started it, the fence a holder keeps for as long as it lasts.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::request::{KeyPrefix, LeaseKey, WholeNumber};
use crate::timefmt;

/// How a tenure ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum TenureEnd {
    /// The holder released it.
    Released,
    /// Its TTL ran out: the server's expiry marker freed the key.
    Expired,
    /// The holder handed it to another holder, whose tenure starts at the
    /// same revision.
    Transferred,
    /// An operator took it from the holder.
    Revoked,
}

impl TenureEnd {
    /// Every end, in the order the docs list them.
    pub const ALL: [TenureEnd; 4] = [
        TenureEnd::Released,
        TenureEnd::Expired,
        TenureEnd::Transferred,
        TenureEnd::Revoked,
    ];

    /// The wire spelling, e.g. `transferred`.
    pub fn as_str(self) -> &'static str {
        match self {
            TenureEnd::Released => "released",
            TenureEnd::Expired => "expired",
            TenureEnd::Transferred => "transferred",
            TenureEnd::Revoked => "revoked",
        }
    }
}

/// One holder's hold of one key. `ended_at`, `end` and `end_revision` are
/// null while it lasts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Tenure {
    pub key: String,
    pub holder: String,
    /// The revision that started it: the holder's fence from its acquire
    /// (or the transfer that gave it the key).
    pub tenure: u64,
    /// When it started, as the acquire's reply said.
    #[serde(with = "timefmt")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub acquired_at: OffsetDateTime,
    /// When it ended: the server's timestamp of the write (or expiry
    /// marker) that ended it; null while it lasts.
    #[serde(with = "timefmt::option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime, required = true))]
    pub ended_at: Option<OffsetDateTime>,
    /// How it ended; null while it lasts.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub end: Option<TenureEnd>,
    /// The revision of the write (or marker) that ended it; null while it lasts.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub end_revision: Option<u64>,
    /// How many times the holder renewed it.
    pub renewals: u64,
}

/// Reply to `api.leases.history`: tenures newest first (by `tenure`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenureHistory {
    pub tenures: Vec<Tenure>,
    /// Pass it back as `before` for the next page; null on the last one.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next: Option<String>,
}

/// The most tenures one history reply may be asked for.
pub const MAX_HISTORY_LIMIT: u64 = 1_000;
/// How many tenures a history reply holds when `limit` is absent.
pub const DEFAULT_HISTORY_LIMIT: u64 = 100;

/// How many tenures one history reply may carry: 1 to 1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WholeNumber", into = "u64")]
pub struct HistoryLimit(u64);

impl TryFrom<u64> for HistoryLimit {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        if !(1..=MAX_HISTORY_LIMIT).contains(&value) {
            return Err(format!(
                "limit must be a whole number from 1 to {MAX_HISTORY_LIMIT}, got {value}"
            ));
        }
        Ok(HistoryLimit(value))
    }
}

impl TryFrom<WholeNumber> for HistoryLimit {
    type Error = String;
    fn try_from(number: WholeNumber) -> Result<Self, String> {
        HistoryLimit::try_from(number.get())
    }
}

impl From<HistoryLimit> for u64 {
    fn from(limit: HistoryLimit) -> u64 {
        limit.0
    }
}

impl Default for HistoryLimit {
    fn default() -> Self {
        HistoryLimit(DEFAULT_HISTORY_LIMIT)
    }
}

impl HistoryLimit {
    /// The limit as a count.
    pub fn get(self) -> usize {
        self.0 as usize
    }
}

/// Where a page of history starts: a previous reply's `next`. Today the
/// `tenure` of the last tenure that reply held; callers treat it as opaque.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Cursor(u64);

impl TryFrom<String> for Cursor {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        match text.parse::<u64>() {
            Ok(tenure) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(Cursor(tenure)),
            _ => Err(format!(
                "before must be the next of an earlier history reply, got {text:?}"
            )),
        }
    }
}

impl From<Cursor> for String {
    fn from(cursor: Cursor) -> String {
        cursor.0.to_string()
    }
}

impl Cursor {
    /// The page after the one whose last tenure is `tenure`.
    pub fn after(tenure: u64) -> Self {
        Cursor(tenure)
    }

    /// Whether a tenure belongs after this cursor (its `tenure` is lower).
    pub fn admits(self, tenure: u64) -> bool {
        tenure < self.0
    }
}

/// An RFC 3339 instant of a history query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Instant(OffsetDateTime);

impl TryFrom<String> for Instant {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        timefmt::parse(&text)
            .map(Instant)
            .map_err(|err| format!("{text:?} is not an RFC 3339 time: {err}"))
    }
}

impl From<Instant> for String {
    fn from(at: Instant) -> String {
        timefmt::format(at.0)
    }
}

impl Instant {
    /// The instant itself.
    pub fn get(self) -> OffsetDateTime {
        self.0
    }
}

/// `api.leases.history`: the tenures of one key (`key`) or of the keys
/// starting with `prefix`, that overlap `since` to `until` (each
/// optional), newest first, a page of `limit` at a time after `before`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(try_from = "HistoryFields")]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct HistoryRequest {
    /// Only this key's tenures.
    #[cfg_attr(feature = "openapi", param(value_type = Option<LeaseKey>))]
    pub key: Option<LeaseKey>,
    /// Only tenures of keys starting with this prefix.
    #[cfg_attr(feature = "openapi", param(value_type = Option<KeyPrefix>))]
    pub prefix: Option<KeyPrefix>,
    /// Only tenures that lasted until this time or later (RFC 3339).
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, format = DateTime))]
    pub since: Option<Instant>,
    /// Only tenures that started at this time or earlier (RFC 3339); not
    /// before `since`.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, format = DateTime))]
    pub until: Option<Instant>,
    /// The `next` of the previous page.
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, pattern = "^[0-9]{1,19}$"))]
    pub before: Option<Cursor>,
    /// At most this many tenures (1 to 1000; default 100).
    #[cfg_attr(feature = "openapi", param(value_type = Option<u64>, minimum = 1, maximum = 1000))]
    pub limit: Option<HistoryLimit>,
}

/// A history request's fields before the rule that spans two of them.
#[derive(Deserialize)]
struct HistoryFields {
    #[serde(default)]
    key: Option<LeaseKey>,
    #[serde(default)]
    prefix: Option<KeyPrefix>,
    #[serde(default)]
    since: Option<Instant>,
    #[serde(default)]
    until: Option<Instant>,
    #[serde(default)]
    before: Option<Cursor>,
    #[serde(default)]
    limit: Option<HistoryLimit>,
}

impl TryFrom<HistoryFields> for HistoryRequest {
    type Error = String;
    fn try_from(f: HistoryFields) -> Result<Self, String> {
        if let (Some(since), Some(until)) = (f.since, f.until)
            && since.get() > until.get()
        {
            return Err(format!(
                "since ({}) must not be after until ({})",
                String::from(since),
                String::from(until)
            ));
        }
        Ok(HistoryRequest {
            key: f.key,
            prefix: f.prefix,
            since: f.since,
            until: f.until,
            before: f.before,
            limit: f.limit,
        })
    }
}

impl HistoryRequest {
    /// The page size asked for, or the default.
    pub fn page_size(&self) -> usize {
        self.limit.unwrap_or_default().get()
    }

    /// Whether a tenure of `key` is asked for (key and prefix both apply).
    pub fn wants_key(&self, key: &str) -> bool {
        self.key.as_ref().is_none_or(|k| k.as_str() == key)
            && self.prefix.as_ref().is_none_or(|p| p.matches(key))
    }

    /// Whether `tenure` is on this page's side of the cursor and overlaps
    /// `since` to `until`.
    pub fn wants(&self, tenure: &Tenure) -> bool {
        self.wants_key(&tenure.key)
            && self.before.is_none_or(|c| c.admits(tenure.tenure))
            && self
                .since
                .is_none_or(|since| tenure.ended_at.is_none_or(|end| end >= since.get()))
            && self
                .until
                .is_none_or(|until| tenure.acquired_at <= until.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Invalid, decode};
    use time::macros::datetime;

    fn invalid(body: &str) -> String {
        match decode::<HistoryRequest>(body.as_bytes()) {
            Err(Invalid(msg)) => msg,
            Ok(req) => panic!("{body} decoded: {req:?}"),
        }
    }

    #[test]
    fn an_empty_request_asks_for_everything_a_hundred_at_a_time() {
        let req: HistoryRequest = decode(b"{}").unwrap();
        assert_eq!(req.page_size(), 100);
        assert!(req.key.is_none() && req.prefix.is_none() && req.before.is_none());
        let nulls =
            r#"{"key":null,"prefix":null,"since":null,"until":null,"before":null,"limit":null}"#;
        let req: HistoryRequest = decode(nulls.as_bytes()).unwrap();
        assert_eq!(req.page_size(), 100);
    }

    #[test]
    fn every_bad_field_is_invalid_and_named() {
        for (body, names) in [
            (
                r#"{"since":"yesterday"}"#,
                "\"yesterday\" is not an RFC 3339 time",
            ),
            (
                r#"{"until":"2026-13-01T00:00:00Z"}"#,
                "not an RFC 3339 time",
            ),
            (r#"{"since":5}"#, "invalid type"),
            (
                r#"{"since":"2026-10-18T12:00:01Z","until":"2026-10-18T12:00:00Z"}"#,
                "since (2026-10-18T12:00:01.000Z) must not be after until",
            ),
            (r#"{"key":"a.b"}"#, "key must be 1 to 128 bytes"),
            (r#"{"key":""}"#, "key must be 1 to 128 bytes"),
            (r#"{"prefix":"a*"}"#, "prefix must be 1 to 128 bytes"),
            (
                r#"{"limit":0}"#,
                "limit must be a whole number from 1 to 1000, got 0",
            ),
            (r#"{"limit":1001}"#, "got 1001"),
            (r#"{"limit":2.5}"#, "a whole number"),
            (r#"{"limit":"10"}"#, "a whole number"),
            (
                r#"{"before":"x1"}"#,
                "before must be the next of an earlier history reply",
            ),
            (r#"{"before":"-1"}"#, "before must be the next"),
            (r#"{"before":"+1"}"#, "before must be the next"),
            (r#"{"before":7}"#, "invalid type"),
        ] {
            let said = invalid(body);
            assert!(said.contains(names), "{body}: {said}");
        }
    }

    #[test]
    fn since_equal_to_until_is_one_instant() {
        let body =
            r#"{"since":"2026-10-18T12:00:00Z","until":"2026-10-18T12:00:00Z","limit":1000}"#;
        let req: HistoryRequest = decode(body.as_bytes()).unwrap();
        assert_eq!(req.page_size(), 1000);
    }

    fn tenure(key: &str, tenure: u64, from: OffsetDateTime, to: Option<OffsetDateTime>) -> Tenure {
        Tenure {
            key: key.into(),
            holder: "h".into(),
            tenure,
            acquired_at: from,
            ended_at: to,
            end: to.map(|_| TenureEnd::Released),
            end_revision: to.map(|_| tenure + 1),
            renewals: 0,
        }
    }

    #[test]
    fn a_query_wants_the_tenures_that_overlap_its_window_below_its_cursor() {
        let body = r#"{"prefix":"job","since":"2026-10-18T12:00:00Z","until":"2026-10-18T13:00:00Z","before":"50"}"#;
        let req: HistoryRequest = decode(body.as_bytes()).unwrap();
        let noon = datetime!(2026-10-18 12:00 UTC);
        let one = datetime!(2026-10-18 13:00 UTC);
        let ended_before = tenure(
            "job-1",
            10,
            noon - time::Duration::HOUR,
            Some(noon - time::Duration::SECOND),
        );
        let ended_at_since = tenure("job-1", 11, noon - time::Duration::HOUR, Some(noon));
        let still_held = tenure("job-1", 12, noon - time::Duration::HOUR, None);
        let started_after = tenure("job-1", 13, one + time::Duration::SECOND, None);
        let started_at_until = tenure("job-1", 14, one, None);
        let other_prefix = tenure("web-1", 15, noon, None);
        let past_cursor = tenure("job-1", 50, noon, None);
        assert!(!req.wants(&ended_before));
        assert!(req.wants(&ended_at_since));
        assert!(req.wants(&still_held));
        assert!(!req.wants(&started_after));
        assert!(req.wants(&started_at_until));
        assert!(!req.wants(&other_prefix));
        assert!(!req.wants(&past_cursor));
    }

    #[test]
    fn an_open_tenure_has_null_ends_on_the_wire() {
        let open = tenure("k", 3, datetime!(2026-10-18 12:00 UTC), None);
        let json = serde_json::to_value(&open).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "key": "k", "holder": "h", "tenure": 3,
                "acquired_at": "2026-10-18T12:00:00.000Z",
                "ended_at": null, "end": null, "end_revision": null, "renewals": 0
            })
        );
        let back: Tenure = serde_json::from_value(json).unwrap();
        assert_eq!(back, open);
    }

    #[test]
    fn a_cursor_is_the_text_of_a_tenure() {
        let cursor = Cursor::after(42);
        assert_eq!(String::from(cursor), "42");
        assert_eq!(Cursor::try_from("42".to_string()), Ok(cursor));
        assert!(cursor.admits(41) && !cursor.admits(42));
    }
}
