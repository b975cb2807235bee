//! `dagnats-leases-client`: the holder side of dagnats-leases, for Rust
//! services. It talks the same wire as any NATS client would; nothing here
//! is needed to hold a lease, it only saves writing the calls by hand. It
//! depends on the wire crate and async-nats, never on the gateway.
//!
//! # Layout
//!
//! - [`LeaseClient`] (`calls`): acquire, renew, release, owner, forward,
//!   transfer and list as typed calls, refusing out-of-bounds input before
//!   sending.
//! - [`LeaseKeeper`] (`keeper`): acquire (optionally waiting), renew every
//!   ttl/3, and a watch of "am I the owner, at which fence".
//! - [`serve_inbox`] (`inbox`, and [`OwnerInbox`] to know when it is
//!   subscribed): the owner's side of forward, answering only
//!   while entitled to.
//! - [`FenceGate`] (`fence`): accepts a write only if its fence is the
//!   highest seen.
//! - [`changes`]: the change events of `dagnats.lease.changed.<key>`.
//! - [`shards`]: shard groups: members split N shards among themselves,
//!   hand them over by transfer, and drop out by TTL when they crash.
//! - [`headers`]: the protocol's headers read whatever the case of their name.
//!
//! The wire types themselves are re-exported as [`wire`].

mod calls;
pub mod changes;
mod fence;
pub mod headers;
mod inbox;
mod keeper;
pub mod shards;

pub use calls::{ClientError, LeaseClient};
pub use dagnats_leases_wire as wire;
pub use dagnats_leases_wire::change::{ChangeEvent, ChangeKind};
pub use dagnats_leases_wire::kind::Kind;
pub use fence::{FenceGate, StaleFence};
pub use inbox::{InboxRequest, OwnerInbox, serve_inbox};
pub use keeper::{KeeperOptions, LeaseKeeper, Ownership};
