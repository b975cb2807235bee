//! The call budget: how long one key call (acquire, renew, release, owner,
//! transfer, revoke) may take in all before it answers `unavailable`.
//!
//! Each JetStream request has its own timeout (4 s), below a client's usual
//! 5 s request timeout, but a call can make several: a read, its barrier,
//! a write, and again after a lost compare-and-set. While JetStream is slow
//! or electing a leader they add up past the client's timeout, and the
//! caller is left with no answer at all. The budget bounds their sum, so
//! the caller hears `unavailable` in time and retries. A retried acquire,
//! renew, release or transfer gets the outcome of a write that landed
//! after the budget ran out (seed; contract.md section 2); a retried
//! revoke answers `not_held`.
//!
//! Forward is bounded by its own `timeout_ms` instead ("timeout_ms bounds
//! the whole call"), and a list by its page size.

use std::time::Duration;

use super::error::LeaseError;

/// Below the 5 s request timeout of the client library and of
/// `nats request`, with room for the reply's way back.
pub(crate) const CALL_BUDGET: Duration = Duration::from_millis(4_500);

/// Room left for the reply's way back to a caller that said how long it
/// waits: a route hop or two, and scheduling on a busy machine; a tenth of
/// the wait when that is less, so a short wait is not spent on the margin.
const REPLY_MARGIN: Duration = Duration::from_millis(200);

/// The budget of a call whose caller waits `wait` for its answer (the
/// client library sends it with every copy of a call): [`CALL_BUDGET`],
/// or less, so that a copy sent late still hears `unavailable` in time.
pub(crate) fn for_caller_waiting(wait: Duration) -> Duration {
    let margin = REPLY_MARGIN.min(wait / 10);
    (wait - margin).min(CALL_BUDGET)
}

/// The answer of a call cut when `budget` ran out.
pub(crate) fn ran_out(budget: Duration) -> LeaseError {
    LeaseError::Unavailable(format!(
        "the call did not finish within {} ms: JetStream is slow or electing a leader; it may have taken effect; retry later",
        budget.as_millis()
    ))
}

/// `call`'s answer, or `unavailable` once [`CALL_BUDGET`] runs out. The
/// call is dropped there: a write it sent may still land, as after any
/// `unavailable`.
pub(super) async fn within_budget<T>(
    call: impl Future<Output = Result<T, LeaseError>>,
) -> Result<T, LeaseError> {
    tokio::time::timeout(CALL_BUDGET, call)
        .await
        .unwrap_or_else(|_| Err(ran_out(CALL_BUDGET)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_wait_leaves_room_for_the_reply_and_never_raises_the_budget() {
        let ms = Duration::from_millis;
        assert_eq!(for_caller_waiting(ms(2_000)), ms(1_800));
        assert_eq!(for_caller_waiting(ms(1_500)), ms(1_350));
        assert_eq!(for_caller_waiting(ms(300)), ms(270));
        assert_eq!(for_caller_waiting(ms(0)), ms(0));
        assert_eq!(for_caller_waiting(ms(4_700)), ms(4_500));
        assert_eq!(for_caller_waiting(ms(60_000)), CALL_BUDGET);
    }
}
