//! Replies: what acquire, renew, release, owner, list and forward answer,
//! and the data of `released` and `expired` change events.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::request::Payload;
use crate::timefmt;

/// The highest revision a reply carries: fences start near 1.7e15 and stay
/// below 2^53, exact as JSON numbers in every language (docs/protocol.md,
/// Storage: the leases bucket). A client reads a higher one as no reply of
/// this protocol.
pub const MAX_REVISION: u64 = (1 << 53) - 1;

/// Reply to list: held leases, ordered by key, each as owner reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseList {
    pub leases: Vec<Lease>,
    /// The last key of this page when more leases follow (pass it back as
    /// `after`); null when this page reaches the end.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next: Option<String>,
    /// Keys whose record does not parse, ordered: they are left out of
    /// `leases` (one bad record never takes a listing down), their owner
    /// read answers `internal`, and a revoke clears them. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrupt: Vec<String>,
}

/// A held lease, as acquire, renew and owner report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    /// Always true: this key has a holder.
    pub held: bool,
    pub key: String,
    pub holder: String,
    /// The fencing token: the key's KV revision.
    pub revision: u64,
    /// Start of the tenure; renew keeps it.
    #[serde(with = "timefmt")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub acquired_at: OffsetDateTime,
    /// Advisory: the server's TTL is what frees the key, never earlier than this.
    #[serde(with = "timefmt")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
    pub expires_at: OffsetDateTime,
    pub ttl_ms: u64,
}

/// Reply to acquire and renew. `granted: false` is a normal answer that
/// names the current holder, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Grant {
    pub granted: bool,
    #[serde(flatten)]
    pub lease: Lease,
}

/// Reply to owner: the lease, or `{"held": false, "key": K}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum Owner {
    Held(Lease),
    Free(FreeKey),
}

/// A key nobody holds. No other field ever: that is what tells it from a
/// lease in the OpenAPI document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FreeKey {
    /// Always false.
    #[serde(deserialize_with = "always_false")]
    pub held: bool,
    pub key: String,
}

/// `held` of a free key: a reply saying `held: true` without the lease's
/// fields is unreadable, never a free key.
fn always_false<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match bool::deserialize(d)? {
        false => Ok(false),
        true => Err(serde::de::Error::custom("a free key has held: false")),
    }
}

/// Reply to release; `revision` is the fence of the release write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Released {
    /// Always true.
    pub released: bool,
    /// Always false.
    pub held: bool,
    pub key: String,
    pub holder: String,
    pub revision: u64,
}

/// Data of a `released` or `expired` change event: the key, the revision
/// of the write that freed it, and its last holder when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseEnded {
    pub key: String,
    pub revision: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
}

/// Reply to forward: the owner's reply body, and who answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Forwarded {
    pub key: String,
    pub holder: String,
    pub revision: u64,
    /// The owner's reply body (base64 in JSON).
    pub payload: Payload,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_reply_held_true_without_the_lease_is_unreadable() {
        let free: Owner = serde_json::from_str(r#"{"held": false, "key": "k"}"#).unwrap();
        assert!(matches!(free, Owner::Free(FreeKey { held: false, .. })));
        let half = serde_json::from_str::<Owner>(r#"{"held": true, "key": "k"}"#);
        assert!(half.is_err(), "{half:?}");
    }
}
