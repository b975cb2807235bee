//! The lease core: the operations, with no knowledge of transports.
//!
//! Fronts decode a request into a wire request type (which can only hold
//! valid input), call [`LeaseCore`], and encode the reply or the
//! [`LeaseError`]. The core reaches the bucket, the owner hop and the
//! tenure history only through the seams it owns in [`ports`] (`Records`,
//! `OwnerHop`, `TenureLog`), so its decisions have unit tests over
//! in-memory fakes (`fakes.rs`, `tests.rs`, `forward/tests.rs`).
//!
//! One file per operation (`acquire`, `renew`, `release`, `revoke`,
//! `owner`, `transfer`, `list`, `forward`, `history`); the fencing rules
//! that renew, release and transfer share in `fencing`; whose tenure a
//! caller may act on, under a policy, in `caller`; the record reads and
//! writes and what the core learns from them in `records`, `known` and `written`;
//! store failures become wire errors in `store_errors`, once.

mod acquire;
mod budget;
mod caller;
mod error;
#[cfg(test)]
mod fakes;
mod fencing;
mod forward;
mod history;
mod known;
mod lease_core;
mod list;
mod millis;
mod owner;
pub(crate) mod ports;
mod records;
mod release;
mod renew;
mod revoke;
mod store_errors;
#[cfg(test)]
mod tenure_tests;
#[cfg(test)]
mod tests;
mod transfer;
mod written;

pub(crate) use budget::ran_out;
pub(crate) use caller::Caller;
pub(crate) use error::{ForwardError, LeaseError};
pub(crate) use lease_core::{LeaseCore, Tenancy};
pub(crate) use list::ListBounds;
pub(crate) use millis::header_millis;
