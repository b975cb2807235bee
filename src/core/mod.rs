//! The lease core: the seed's operations, with no knowledge of transports.
//!
//! Fronts decode a request into a [`model`] type (which can only hold valid
//! input), call [`LeaseCore`], and encode the reply or the [`LeaseError`].

mod error;
mod known;
mod leases;
pub mod model;
pub mod timefmt;

pub use error::{ErrorBody, LeaseError};
pub use leases::LeaseCore;
