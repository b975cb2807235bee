//! A caller's count of milliseconds, as both fronts take it from a header
//! (`Dagnats-Lease-Wait-Ms`, `Dagnats-Lease-Waited-Ms`).

use std::time::Duration;

use super::LeaseError;

/// Whole milliseconds up to `i64::MAX`: the OpenAPI document declares the
/// headers `int64`, so a larger number is as invalid as a word.
pub(crate) fn header_millis(name: &str, text: &str) -> Result<Duration, LeaseError> {
    text.parse::<u64>()
        .ok()
        .filter(|ms| i64::try_from(*ms).is_ok())
        .map(Duration::from_millis)
        .ok_or_else(|| {
            LeaseError::Invalid(format!(
                "{name} must be a whole number of milliseconds up to {}, not {text:?}",
                i64::MAX
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_millisecond_header_takes_zero_to_i64_max_and_nothing_else() {
        assert_eq!(header_millis("H", "0").unwrap(), Duration::ZERO);
        assert_eq!(
            header_millis("H", "9223372036854775807").unwrap(),
            Duration::from_millis(i64::MAX as u64)
        );
        for bad in ["9223372036854775808", "-1", "1.5", "", " 1", "ten"] {
            let err = header_millis("H", bad).unwrap_err();
            assert_eq!(err.kind(), dagnats_leases_wire::Kind::Invalid, "{bad:?}");
        }
    }
}
