//! RFC 3339 timestamps in UTC with a `Z` suffix and millisecond precision.
//!
//! Milliseconds are truncated, never rounded up, so an `expires_at` written
//! here is never later than the instant it was computed from.

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

const FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// `at` as the wire shows it, e.g. `2026-10-18T12:00:15.250Z`.
///
/// Every reply and record carries two or three of these, and `time`'s
/// general formatter was a tenth of a renew's instructions (callgrind);
/// humantime writes this one layout directly, for the years it covers.
pub fn format(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    if (1970..=9999).contains(&at.year()) {
        humantime::format_rfc3339_millis(at.into()).to_string()
    } else {
        at.format(FORMAT).expect("a UTC timestamp always formats")
    }
}

/// Parses any RFC 3339 timestamp.
pub fn parse(text: &str) -> Result<OffsetDateTime, time::error::Parse> {
    OffsetDateTime::parse(text, &Rfc3339)
}

/// `#[serde(with = "timefmt")]` for timestamp fields.
pub fn serialize<S: Serializer>(at: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*at))
}

/// See [`serialize`].
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn formats_utc_with_z_and_truncated_millis() {
        let at = datetime!(2026-10-18 14:00:15.2509 +02:00);
        assert_eq!(format(at), "2026-10-18T12:00:15.250Z");
    }

    #[test]
    fn formats_years_before_1970_too() {
        let at = datetime!(1969-12-31 23:59:59.9999 UTC);
        assert_eq!(format(at), "1969-12-31T23:59:59.999Z");
        let at = datetime!(1970-01-01 00:00:00 UTC);
        assert_eq!(format(at), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn parses_what_it_formats() {
        let at = datetime!(2026-10-18 12:00:15.250 UTC);
        assert_eq!(parse(&format(at)).unwrap(), at);
    }
}
