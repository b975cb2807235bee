//! `dagnats-leases-wire`: what is on the wire of dagnats-leases, and
//! nothing else. A gateway, a holder library in any language, or a test
//! reads the same definitions here.
//!
//! # Layout
//!
//! - [`names`]: subjects, headers, the bucket and the queue group, each with
//!   the rule it comes from (docs/protocol.md).
//! - [`request`]: the requests of every subject, with the input bounds of
//!   docs/protocol.md enforced as they decode ([`request::decode`]).
//! - [`reply`]: what each call answers.
//! - [`kind`]: the error kinds with their HTTP statuses, and the error body.
//! - [`record`]: the versioned record a key holds in the bucket.
//! - [`history`]: the tenure history's requests, replies and records.
//! - [`change`]: decoding the change events republished for every write.
//! - [`service`]: the NATS services framework's discovery replies (ADR-32).
//! - [`timefmt`]: RFC 3339 timestamps in UTC.
//! - [`wait`]: the call budget, and what a caller's wait changes in it.
//!
//! serde only; with the feature `openapi`, the types also carry utoipa
//! schemas for the gateway's OpenAPI document.

pub mod change;
pub mod history;
pub mod kind;
pub mod names;
pub mod record;
pub mod reply;
pub mod request;
#[cfg(feature = "openapi")]
mod schema;
pub mod service;
pub mod timefmt;
pub mod wait;

pub use change::{ChangeEvent, ChangeKind};
pub use kind::{ErrorBody, Kind};
#[cfg(feature = "openapi")]
pub use schema::error_responses;
