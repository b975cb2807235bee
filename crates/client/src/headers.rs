//! Header lookups that ignore the case of the name, as HTTP does.
//!
//! async-nats keys its `HeaderMap` by the exact bytes of the name, so an
//! owner whose client lower-cases header names (`dagnats-lease-reject`)
//! would not be found by `get("Dagnats-Lease-Reject")`. Both sides of
//! forward read the protocol's headers through here.

use async_nats::HeaderMap;

use dagnats_leases_wire::names::{HEADER_REJECT, REJECT_STALE};

/// The first value of header `name`, whatever the case of its spelling.
/// The exact spelling wins when a message carries several.
pub fn get<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    let headers = headers?;
    if let Some(value) = headers.get(name) {
        return Some(value.as_str());
    }
    headers
        .iter()
        .find(|(n, _)| AsRef::<str>::as_ref(*n).eq_ignore_ascii_case(name))
        .and_then(|(_, values)| values.first())
        .map(|v| v.as_str())
}

/// Whether a reply is a rejection, an empty body and the header
/// `Dagnats-Lease-Reject: stale`, name and value in any case
/// (docs/protocol.md, Forwarding to the owner).
pub fn is_stale_reject(headers: Option<&HeaderMap>) -> bool {
    headers.is_some_and(|headers| {
        headers.iter().any(|(name, values)| {
            AsRef::<str>::as_ref(name).eq_ignore_ascii_case(HEADER_REJECT)
                && values
                    .iter()
                    .any(|v| v.as_str().trim().eq_ignore_ascii_case(REJECT_STALE))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, *value);
        }
        headers
    }

    #[test]
    fn a_header_is_found_whatever_the_case_of_its_name() {
        for name in [
            "Dagnats-Lease-Fence",
            "dagnats-lease-fence",
            "DAGNATS-LEASE-FENCE",
        ] {
            let headers = map(&[(name, "7")]);
            assert_eq!(
                get(Some(&headers), "Dagnats-Lease-Fence"),
                Some("7"),
                "{name}"
            );
        }
        assert_eq!(
            get(Some(&map(&[("Other", "7")])), "Dagnats-Lease-Fence"),
            None
        );
        assert_eq!(get(None, "Dagnats-Lease-Fence"), None);
    }

    #[test]
    fn the_exact_spelling_wins_over_another_case() {
        let headers = map(&[("dagnats-lease-fence", "1"), ("Dagnats-Lease-Fence", "2")]);
        assert_eq!(get(Some(&headers), "Dagnats-Lease-Fence"), Some("2"));
    }

    #[test]
    fn a_stale_reject_is_recognised_in_any_case_of_name_and_value() {
        for (name, value) in [
            ("Dagnats-Lease-Reject", "stale"),
            ("dagnats-lease-reject", "STALE"),
            ("DAGNATS-LEASE-REJECT", "Stale"),
        ] {
            assert!(
                is_stale_reject(Some(&map(&[(name, value)]))),
                "{name}: {value}"
            );
        }
    }

    #[test]
    fn anything_else_is_not_a_reject() {
        for pairs in [
            vec![],
            vec![("Dagnats-Lease-Reject", "fresh")],
            vec![("Dagnats-Lease-Rejected", "stale")],
            vec![("Other", "stale")],
        ] {
            assert!(!is_stale_reject(Some(&map(&pairs))), "{pairs:?}");
        }
        assert!(!is_stale_reject(None));
    }
}
