//! Shard groups: split `count` shards of work among the live members of a
//! group, each shard a lease, with no coordinator.
//!
//! Shard `i` of group `G` is the lease on key `G-<i>`; each member also
//! holds a membership lease on `G-member-<holder>`, so a crashed member
//! drops out by TTL. Every member reads the same member set and computes
//! the same assignment ([`assign`]). A member takes the shards assigned to
//! it when their holder lets go, and gives up the ones that are no longer
//! its own by transfer to their new owner, so tenures follow each other
//! with no gap; on [`ShardGroup::shutdown`] it hands every shard over.

pub mod assign;
mod group;

pub use group::{Owned, ShardGroup, ShardOptions, ShardTenure};
