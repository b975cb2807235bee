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
//! after the budget ran out (docs/protocol.md, Operations); a retried
//! revoke answers `not_held`.
//!
//! Forward is bounded by its own `timeout_ms` instead ("timeout_ms bounds
//! the whole call"), and a list by its page size.

use std::time::Duration;

use super::error::LeaseError;

pub(crate) use dagnats_leases_wire::wait::CALL_BUDGET;

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
