//! The one error type of the lease core: it owns each wire `kind`.
//!
//! Both fronts turn a [`LeaseError`] into the same `{"error", "kind"}` body;
//! causes that callers must not see (server answers, parse failures) are
//! logged here, once, and replaced by a plain sentence.

use serde::Serialize;

/// A failed lease call, one variant per wire `kind` of contract.md section 4.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// `invalid`: the body is not JSON, or a field is missing, mistyped or
    /// out of bounds.
    #[error("{0}")]
    Invalid(String),
    /// `lost`: the caller is not the holder at that fence.
    #[error("{0}")]
    Lost(String),
    /// `unsupported`: the server is older than 2.11, so there is no bucket.
    #[error("leases need nats-server 2.11 or newer (per-key TTL); this server is {server_version}")]
    Unsupported { server_version: String },
    /// `unavailable`: JetStream cannot be reached right now; retry later.
    #[error("{0}")]
    Unavailable(String),
    /// `internal`: a corrupt record or an unexpected server answer. The
    /// sentence is generic; the cause went to the log.
    #[error("internal error; the gateway log has the details")]
    Internal,
}

/// The body of every failed call: `{"error": "...", "kind": "..."}`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ErrorBody {
    /// A sentence for humans.
    pub error: String,
    /// The stable, machine-readable reason.
    pub kind: &'static str,
}

impl LeaseError {
    /// The wire `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            LeaseError::Invalid(_) => "invalid",
            LeaseError::Lost(_) => "lost",
            LeaseError::Unsupported { .. } => "unsupported",
            LeaseError::Unavailable(_) => "unavailable",
            LeaseError::Internal => "internal",
        }
    }

    /// The HTTP status that goes with the kind (contract.md section 4).
    pub fn http_status(&self) -> u16 {
        match self {
            LeaseError::Invalid(_) => 400,
            LeaseError::Lost(_) => 409,
            LeaseError::Unsupported { .. } => 501,
            LeaseError::Unavailable(_) => 503,
            LeaseError::Internal => 500,
        }
    }

    /// Logs `cause` and returns [`LeaseError::Internal`], so the cause is
    /// recorded exactly where it is hidden from the caller.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        LeaseError::Internal
    }

    /// The wire body of this error.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.to_string(),
            kind: self.kind(),
        }
    }
}
