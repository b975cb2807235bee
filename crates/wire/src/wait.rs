//! What a caller's `Dagnats-Lease-Wait-Ms` ([`HEADER_WAIT_MS`]) asks of a
//! gateway, in one place for the gateway that honours it and the client
//! that decides when to send it.
//!
//! [`HEADER_WAIT_MS`]: crate::names::HEADER_WAIT_MS

use std::time::Duration;

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

/// Whether a key call whose caller still waits `wait` needs to say so:
/// not once [`CALL_BUDGET`] ends first, which the gateway keeps anyway.
/// Sent needlessly, the header costs a gateway about 5,000 instructions a
/// renew for its header map alone (callgrind), over 5 % of all it spends
/// on one.
pub fn shortens_a_key_call(wait: Duration) -> bool {
    budget_for(wait) < CALL_BUDGET
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
    fn a_wait_that_outlasts_the_budget_and_its_margin_shortens_no_key_call() {
        assert!(shortens_a_key_call(ms(4_699)));
        assert!(!shortens_a_key_call(ms(4_700)));
        assert!(!shortens_a_key_call(ms(5_000)));
        assert!(shortens_a_key_call(ms(2_500)));
        assert!(shortens_a_key_call(ms(0)));
    }
}
