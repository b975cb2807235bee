//! The holder side, for Rust services: a typed client for the five lease
//! subjects, a keeper that holds a lease, an owner inbox that applies the
//! seed's rejection rules, and a fence gate for downstream stores.
//!
//! It talks the same wire as any NATS client would; nothing here is needed
//! to hold a lease, it only saves writing the calls by hand.
//!
//! - [`LeaseClient`]: acquire, renew, release, owner, forward.
//! - [`LeaseKeeper`]: acquire (optionally waiting), renew every ttl/3, and a
//!   watch of "am I the owner, at which fence".
//! - [`serve_inbox`]: answers forwarded requests only while entitled to.
//! - [`FenceGate`]: accepts a write only if its fence is the highest seen.
//! - [`ChangeEvent`]: the change events of `dagnats.lease.changed.<key>`.

mod calls;
mod fence;
mod inbox;
mod keeper;

pub use crate::events::{ChangeEvent, EventKind};
pub use calls::{ClientError, Kind, LeaseClient};
pub use fence::{FenceGate, StaleFence};
pub use inbox::{InboxRequest, serve_inbox};
pub use keeper::{KeeperOptions, LeaseKeeper, Ownership};
