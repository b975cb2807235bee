//! The lease core: the seed's operations, with no knowledge of transports.
//!
//! Fronts decode a request into a wire request type (which can only hold
//! valid input), call [`LeaseCore`], and encode the reply or the
//! [`LeaseError`]. The core reaches the bucket and the owner hop only
//! through the seams it owns in [`ports`] (`Records`, `OwnerHop`), so its
//! decisions have unit tests over in-memory fakes (`fakes.rs`,
//! `leases/tests.rs`, `forward/tests.rs`).

mod budget;
mod error;
#[cfg(test)]
mod fakes;
mod forward;
mod known;
mod leases;
mod list;
pub(crate) mod ports;
mod transfer;
mod written;

pub(crate) use budget::ran_out;
pub(crate) use dagnats_leases_wire::kind::ErrorBody;
pub(crate) use error::{ForwardError, LeaseError};
pub(crate) use leases::LeaseCore;
pub(crate) use list::ListBounds;
