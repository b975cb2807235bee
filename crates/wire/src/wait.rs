//! What a caller's `Dagnats-Lease-Wait-Ms` ([`HEADER_WAIT_MS`]) asks of a
//! gateway, in one place for the gateway that honours it and the client
//! that decides when to send it.
//!
//! [`HEADER_WAIT_MS`]: crate::names::HEADER_WAIT_MS

use std::time::Duration;

use crate::names::{
    SUBJECT_ACQUIRE, SUBJECT_FORWARD, SUBJECT_OWNER, SUBJECT_RELEASE, SUBJECT_RENEW,
    SUBJECT_TRANSFER,
};

/// How long a gateway lets a key call (acquire, renew, release, owner,
/// transfer) take in all before it answers `unavailable`, whether or not
/// its caller says how long it waits: below the 5 s request timeout of the
/// client library and of `nats request`, with room for the reply's way
/// back. Forward is bounded by its own `timeout_ms`, a list by its page
/// and a caller's wait alone.
pub const CALL_BUDGET: Duration = Duration::from_millis(4_500);

/// Room left for the reply's way back to a caller that said how long it
/// waits: a route hop or two, and scheduling on a busy machine; a tenth of
/// the wait when that is less, so a short wait is not spent on the margin.
const REPLY_MARGIN: Duration = Duration::from_millis(200);

/// The budget of a call whose caller still waits `wait` for its answer:
/// [`CALL_BUDGET`], or less, so that a copy sent late still hears
/// `unavailable` in time.
pub fn budget_for(wait: Duration) -> Duration {
    let margin = REPLY_MARGIN.min(wait / 10);
    (wait - margin).min(CALL_BUDGET)
}

/// The subjects of the calls on one key, which a gateway bounds with
/// [`CALL_BUDGET`] whether or not their caller says how long it waits.
pub const KEY_CALL_SUBJECTS: [&str; 5] = [
    SUBJECT_ACQUIRE,
    SUBJECT_RENEW,
    SUBJECT_RELEASE,
    SUBJECT_TRANSFER,
    SUBJECT_OWNER,
];

/// Whether a caller still waiting `wait` for a call on `subject` bounds it
/// by saying so: never a forward (its own `timeout_ms` bounds it); a key
/// call only when `wait` cuts [`CALL_BUDGET`] short, which the gateway
/// keeps anyway; a list, which nothing else bounds, and any other subject
/// always. The client leaves the header out where it does not bound the
/// call, and the gateway arms no timer for it there: a header map is a
/// cost on every call that carries one.
pub fn bounds(subject: &str, wait: Duration) -> bool {
    if subject == SUBJECT_FORWARD {
        false
    } else if KEY_CALL_SUBJECTS.contains(&subject) {
        budget_for(wait) < CALL_BUDGET
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_callers_wait_leaves_room_for_the_reply_and_never_raises_the_budget() {
        assert_eq!(budget_for(ms(2_000)), ms(1_800));
        assert_eq!(budget_for(ms(1_500)), ms(1_350));
        assert_eq!(budget_for(ms(300)), ms(270));
        assert_eq!(budget_for(ms(0)), ms(0));
        assert_eq!(budget_for(ms(4_700)), ms(4_500));
        assert_eq!(budget_for(ms(60_000)), CALL_BUDGET);
    }

    #[test]
    fn a_wait_bounds_a_key_call_only_short_of_the_budget_and_its_margin() {
        for subject in KEY_CALL_SUBJECTS {
            assert!(!bounds(subject, ms(60_000)), "{subject}");
            assert!(!bounds(subject, ms(5_000)), "{subject}");
            assert!(!bounds(subject, ms(4_700)), "{subject}");
            assert!(bounds(subject, ms(4_699)), "{subject}");
            assert!(bounds(subject, ms(2_500)), "{subject}");
            assert!(bounds(subject, ms(0)), "{subject}");
        }
    }

    #[test]
    fn a_wait_always_bounds_a_list_and_never_a_forward() {
        use crate::names::SUBJECT_LIST;
        assert!(bounds(SUBJECT_LIST, ms(60_000)));
        assert!(bounds("api.leases.brand_new", ms(60_000)));
        assert!(!bounds(SUBJECT_FORWARD, ms(500)));
    }
}
