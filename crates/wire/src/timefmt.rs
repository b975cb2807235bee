//! RFC 3339 timestamps in UTC with a `Z` suffix and millisecond precision.
//!
//! Milliseconds are truncated, never rounded up, so an `expires_at` written
//! here is never later than the instant it was computed from.
//!
//! Every reply, record and change event carries two or three of these, so
//! the layout written here and the one nats-server writes (UTC, `Z`, up to
//! nanoseconds) are formatted and parsed by hand; anything else goes to
//! `time`'s RFC 3339 parser, whose answers (and errors) stay the reference.

use std::fmt;

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

const FORMAT: &[time::format_description::BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const LEN: usize = 24;

/// `at` as the wire shows it, e.g. `2026-10-18T12:00:15.250Z`.
pub fn format(at: OffsetDateTime) -> String {
    match written(at) {
        Some(bytes) => ascii(&bytes).to_string(),
        None => at
            .to_offset(UtcOffset::UTC)
            .format(FORMAT)
            .expect("a UTC timestamp always formats"),
    }
}

/// The wire layout of `at`, for years 0 to 9999 (the others have no
/// four-digit year). Written by hand: the general formatters cost a renew
/// more than the whole of its timestamp work should.
fn written(at: OffsetDateTime) -> Option<[u8; LEN]> {
    let at = at.to_offset(UtcOffset::UTC);
    let (year, month, day) = at.to_calendar_date();
    let year = u32::try_from(year).ok().filter(|y| *y <= 9999)?;
    let (hour, minute, second, milli) = at.to_hms_milli();
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut value: u32| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, u8::from(month).into());
    put(8, 2, day.into());
    put(11, 2, hour.into());
    put(14, 2, minute.into());
    put(17, 2, second.into());
    put(20, 3, milli.into());
    Some(out)
}

/// `at` as the wire carries it: truncated to the millisecond, so a
/// timestamp kept in memory equals the one read back from what it wrote.
pub fn truncated(at: OffsetDateTime) -> OffsetDateTime {
    let nanos = at.nanosecond();
    at.replace_nanosecond(nanos - nanos % 1_000_000)
        .expect("fewer nanoseconds are still a valid time")
}

fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("digits and separators are ASCII")
}

/// Parses any RFC 3339 timestamp.
pub fn parse(text: &str) -> Result<OffsetDateTime, time::error::Parse> {
    match parse_utc(text.as_bytes()) {
        Some(at) => Ok(at),
        None => OffsetDateTime::parse(text, &Rfc3339),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z` with 1 to 9 fraction digits: what this
/// module and nats-server write. `None` for anything else, including an
/// invalid date or time, which the general parser then answers.
fn parse_utc(text: &[u8]) -> Option<OffsetDateTime> {
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        text.get(range)?.iter().try_fold(0u32, |n, b| {
            b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
        })
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if text.len() < 20 || separators.iter().any(|&(i, c)| text[i] != c) {
        return None;
    }
    let nanos = match (text[19], text.last()) {
        (b'Z', _) if text.len() == 20 => 0,
        (b'.', Some(b'Z')) if (22..=30).contains(&text.len()) => {
            let fraction = text.len() - 21;
            digits(20..20 + fraction)? * 10u32.pow(9 - fraction as u32)
        }
        _ => return None,
    };
    let month = Month::try_from(u8::try_from(digits(5..7)?).ok()?).ok()?;
    let year = i32::try_from(digits(0..4)?).ok()?;
    let date = Date::from_calendar_date(year, month, digits(8..10)? as u8).ok()?;
    let hms = [digits(11..13)?, digits(14..16)?, digits(17..19)?].map(|n| n as u8);
    let time = Time::from_hms_nano(hms[0], hms[1], hms[2], nanos).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_utc())
}

/// `#[serde(with = "timefmt")]` for timestamp fields.
pub fn serialize<S: Serializer>(at: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    match written(*at) {
        Some(bytes) => s.serialize_str(ascii(&bytes)),
        None => s.serialize_str(&format(*at)),
    }
}

/// See [`serialize`]. Reads the string in place where the input allows.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OffsetDateTime, D::Error> {
    struct Timestamp;
    impl serde::de::Visitor<'_> for Timestamp {
        type Value = OffsetDateTime;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<OffsetDateTime, E> {
            parse(text).map_err(E::custom)
        }
    }
    d.deserialize_str(Timestamp)
}

/// `#[serde(with = "timefmt::option")]` for a timestamp that may be null.
pub mod option {
    use super::*;

    /// See [`super::serialize`]; `None` is null.
    pub fn serialize<S: Serializer>(at: &Option<OffsetDateTime>, s: S) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => super::serialize(at, s),
            None => s.serialize_none(),
        }
    }

    /// See [`super::deserialize`]; null is `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        #[derive(serde::Deserialize)]
        struct At(#[serde(with = "super")] OffsetDateTime);
        Ok(Option::<At>::deserialize(d)?.map(|At(at)| at))
    }
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
    fn truncating_keeps_what_the_wire_carries() {
        let at = datetime!(2026-10-18 12:00:15.250_999_999 UTC);
        assert_eq!(truncated(at), datetime!(2026-10-18 12:00:15.250 UTC));
        assert_eq!(parse(&format(at)).unwrap(), truncated(at));
    }

    #[test]
    fn parses_what_it_formats() {
        let at = datetime!(2026-10-18 12:00:15.250 UTC);
        assert_eq!(parse(&format(at)).unwrap(), at);
    }

    #[test]
    fn formats_as_the_general_formatter_does() {
        let general = |at: OffsetDateTime| at.to_offset(UtcOffset::UTC).format(FORMAT).unwrap();
        for at in [
            datetime!(2026-10-18 14:00:15.2509 +02:00),
            datetime!(0000-01-01 00:00:00 UTC),
            datetime!(1969-12-31 23:59:59.9999 UTC),
            datetime!(2024-02-29 23:59:59.999999999 UTC),
            datetime!(9999-12-31 23:59:59.999 UTC),
            datetime!(2026-01-01 00:30:00 +01:00),
        ] {
            assert_eq!(format(at), general(at), "{at}");
        }
    }

    #[test]
    fn parses_as_the_general_parser_does() {
        for text in [
            "2026-10-18T12:00:15.250Z",
            "2026-10-18T12:00:15Z",
            "2026-10-18T12:00:15.1Z",
            "2026-10-18T12:00:15.123456789Z",
            "2024-02-29T23:59:59.999Z",
            "2026-10-18T14:00:15.250+02:00",
            "2026-10-18t12:00:15.250z",
            "2026-10-18T12:00:15.1234567890Z",
            "2026-10-18 12:00:15.250Z",
        ] {
            let general = OffsetDateTime::parse(text, &Rfc3339).unwrap();
            assert_eq!(parse(text).unwrap(), general, "{text}");
        }
    }

    #[test]
    fn refuses_what_the_general_parser_refuses_with_its_error() {
        for text in [
            "2026-02-30T12:00:15.250Z",
            "2026-13-18T12:00:15.250Z",
            "2026-10-18T24:00:15.250Z",
            "2026-10-18T12:00:15.Z",
            "2026-10-18T23:59:60.250Z",
            "2026-10-18T12:00:15.250",
            "",
        ] {
            let general = OffsetDateTime::parse(text, &Rfc3339).unwrap_err();
            assert_eq!(
                parse(text).unwrap_err().to_string(),
                general.to_string(),
                "{text}"
            );
        }
    }

    #[test]
    fn a_timestamp_field_reads_a_string_only() {
        #[derive(serde::Deserialize, Debug)]
        struct Field {
            #[serde(with = "super")]
            #[allow(dead_code)]
            at: OffsetDateTime,
        }
        let read = |json: &str| serde_json::from_str::<Field>(json).map(|f| f.at);
        assert_eq!(
            read(r#"{"at":"2026-10-18T12:00:15.250Z"}"#).unwrap(),
            datetime!(2026-10-18 12:00:15.250 UTC)
        );
        // Escaped input cannot be borrowed; it is read all the same.
        assert_eq!(
            read(r#"{"at":"2026-10-18T12:00:15.250\u005a"}"#).unwrap(),
            datetime!(2026-10-18 12:00:15.250 UTC)
        );
        let err = read(r#"{"at":5}"#).unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid type: integer `5`, expected a string at line 1 column 7"
        );
    }
}
