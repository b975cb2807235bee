//! The error kinds of docs/protocol.md, Error kinds, with the HTTP status of
//! each: the one table both fronts, the OpenAPI document and the client read.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The machine-readable reason of a failed call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The body is not JSON, or a field is missing, mistyped or out of bounds.
    Invalid,
    /// The caller is not the holder at that fence (renew, release, transfer).
    Lost,
    /// nats-server is older than 2.11: no bucket.
    Unsupported,
    /// JetStream cannot be reached right now; retry later.
    Unavailable,
    /// A corrupt record, an unexpected server answer, the gateway stopping.
    Internal,
    /// Forward: nobody holds the key.
    NotHeld,
    /// Forward: no responder on the owner's inbox, after the retries.
    OwnerUnavailable,
    /// Forward: the owner did not answer within `timeout_ms` (never retried).
    OwnerTimeout,
    /// Forward: the last attempt was rejected as stale.
    OwnerRejected,
    /// Forward: the owner's reply does not fit max_payload once base64-encoded.
    ReplyTooLarge,
    /// Forward: the decoded payload does not fit the owner hop.
    PayloadTooLarge,
    /// HTTP: a missing or wrong bearer token.
    Unauthorized,
    /// A policy is loaded and the caller's principal has no right for the
    /// operation on that key (or, over NATS, no principal matches).
    Forbidden,
    /// HTTP: no route has this path.
    NotFound,
    /// HTTP: the path exists, the method does not.
    MethodNotAllowed,
    /// HTTP: the request body is over the gateway's limit.
    BodyTooLarge,
    /// A kind this build does not know (a newer gateway sent it).
    Other(String),
}

impl Kind {
    /// Every kind this build knows, in the order of docs/protocol.md, Error
    /// kinds.
    pub const KNOWN: [Kind; 16] = [
        Kind::Invalid,
        Kind::Lost,
        Kind::Unsupported,
        Kind::Unavailable,
        Kind::Internal,
        Kind::NotHeld,
        Kind::OwnerUnavailable,
        Kind::OwnerTimeout,
        Kind::OwnerRejected,
        Kind::ReplyTooLarge,
        Kind::PayloadTooLarge,
        Kind::Unauthorized,
        Kind::Forbidden,
        Kind::NotFound,
        Kind::MethodNotAllowed,
        Kind::BodyTooLarge,
    ];

    /// The wire spelling, e.g. `owner_timeout`.
    pub fn as_str(&self) -> &str {
        match self {
            Kind::Other(kind) => kind,
            known => known.name(),
        }
    }

    /// The wire spelling of a kind this build knows, as a static label (for
    /// metrics); `other` for [`Kind::Other`].
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Invalid => "invalid",
            Kind::Lost => "lost",
            Kind::Unsupported => "unsupported",
            Kind::Unavailable => "unavailable",
            Kind::Internal => "internal",
            Kind::NotHeld => "not_held",
            Kind::OwnerUnavailable => "owner_unavailable",
            Kind::OwnerTimeout => "owner_timeout",
            Kind::OwnerRejected => "owner_rejected",
            Kind::ReplyTooLarge => "reply_too_large",
            Kind::PayloadTooLarge => "payload_too_large",
            Kind::Unauthorized => "unauthorized",
            Kind::Forbidden => "forbidden",
            Kind::NotFound => "not_found",
            Kind::MethodNotAllowed => "method_not_allowed",
            Kind::BodyTooLarge => "body_too_large",
            Kind::Other(_) => "other",
        }
    }

    /// The HTTP status that goes with the kind (docs/protocol.md, Error kinds).
    pub fn http_status(&self) -> u16 {
        match self {
            Kind::Invalid => 400,
            Kind::Lost => 409,
            Kind::Unsupported => 501,
            Kind::Unavailable => 503,
            Kind::Internal | Kind::Other(_) => 500,
            Kind::NotHeld => 404,
            Kind::OwnerUnavailable => 502,
            Kind::OwnerTimeout => 504,
            Kind::OwnerRejected => 409,
            Kind::ReplyTooLarge => 502,
            Kind::PayloadTooLarge => 413,
            Kind::Unauthorized => 401,
            Kind::Forbidden => 403,
            Kind::NotFound => 404,
            Kind::MethodNotAllowed => 405,
            Kind::BodyTooLarge => 413,
        }
    }

    /// The kind a wire spelling names ([`Kind::Other`] if unknown).
    pub fn parse(kind: &str) -> Kind {
        Kind::KNOWN
            .into_iter()
            .find(|known| known.as_str() == kind)
            .unwrap_or_else(|| Kind::Other(kind.to_string()))
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Kind::parse(&String::deserialize(d)?))
    }
}

/// The body of every failed call: `{"error": "...", "kind": "..."}`. A
/// forward failure also names the owner it last tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// A sentence for humans.
    pub error: String,
    /// The stable, machine-readable reason.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "invalid"))]
    pub kind: Kind,
    /// Forward only: the holder last tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Forward only: the fence of the holder last tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_kind_reads_back_as_itself() {
        for kind in Kind::KNOWN {
            assert_eq!(Kind::parse(kind.as_str()), kind);
        }
        assert_eq!(Kind::parse("brand_new"), Kind::Other("brand_new".into()));
    }

    #[test]
    fn an_error_body_round_trips_with_its_kind_spelled_out() {
        let body = ErrorBody {
            error: "gone".into(),
            kind: Kind::OwnerTimeout,
            holder: Some("h".into()),
            revision: Some(4),
        };
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(
            json,
            r#"{"error":"gone","kind":"owner_timeout","holder":"h","revision":4}"#
        );
        assert_eq!(serde_json::from_str::<ErrorBody>(&json).unwrap(), body);
    }
}
