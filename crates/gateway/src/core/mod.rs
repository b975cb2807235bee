//! The lease core: the seed's operations, with no knowledge of transports.
//!
//! Fronts decode a request into a [`model`] type (which can only hold valid
//! input), call [`LeaseCore`], and encode the reply or the [`LeaseError`].

mod error;
mod forward;
mod known;
mod leases;
mod list;
mod transfer;

pub use dagnats_leases_wire::kind::ErrorBody;
pub use error::{ForwardError, LeaseError};
pub use leases::LeaseCore;
pub use list::ListBounds;
