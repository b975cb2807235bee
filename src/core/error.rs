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
    /// `not_held` (forward): nobody holds the key.
    #[error("nobody holds {0}")]
    NotHeld(String),
    /// `owner_unavailable` (forward): no responder on the owner's inbox,
    /// after the retries the seed allows.
    #[error("{0}")]
    OwnerUnavailable(String),
    /// `owner_timeout` (forward): the owner did not answer in time. Never
    /// retried: the owner may have processed the request.
    #[error("{0}")]
    OwnerTimeout(String),
    /// `owner_rejected` (forward): every attempt was answered
    /// `Dagnats-Lease-Reject: stale`.
    #[error("{0}")]
    OwnerRejected(String),
    /// `reply_too_large` (forward): the owner's reply does not fit
    /// max_payload once base64-encoded.
    #[error("{0}")]
    ReplyTooLarge(String),
    /// `payload_too_large` (forward): the decoded payload does not fit the
    /// owner hop.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// `unauthorized` (HTTP only): a missing or wrong bearer token.
    #[error("{0}")]
    Unauthorized(String),
    /// `not_found` (HTTP only): no route has this path.
    #[error("{0}")]
    NotFound(String),
    /// `method_not_allowed` (HTTP only): the path exists, the method does not.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// `body_too_large` (HTTP only): the request body is over the
    /// gateway's limit, before anything reads it.
    #[error("{0}")]
    BodyTooLarge(String),
}

/// The body of every failed call: `{"error": "...", "kind": "..."}`. A
/// forward failure also names the owner it last tried.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct ErrorBody {
    /// A sentence for humans.
    pub error: String,
    /// The stable, machine-readable reason.
    #[schema(value_type = String, example = "invalid")]
    pub kind: &'static str,
    /// Forward only: the holder last tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Forward only: the fence of the holder last tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
}

/// A failed forward: the error, and the owner dagnats last tried, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardError {
    pub error: LeaseError,
    pub tried: Option<Tried>,
}

/// An owner a forward was sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tried {
    pub holder: String,
    pub revision: u64,
}

impl From<LeaseError> for ForwardError {
    fn from(error: LeaseError) -> Self {
        ForwardError { error, tried: None }
    }
}

impl From<LeaseError> for ErrorBody {
    fn from(err: LeaseError) -> Self {
        err.body()
    }
}

impl From<ForwardError> for ErrorBody {
    fn from(err: ForwardError) -> Self {
        err.body()
    }
}

impl ForwardError {
    /// The wire body, with `holder` and `revision` of the owner last tried.
    pub fn body(&self) -> ErrorBody {
        let mut body = self.error.body();
        if let Some(tried) = &self.tried {
            body.holder = Some(tried.holder.clone());
            body.revision = Some(tried.revision);
        }
        body
    }
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
            LeaseError::NotHeld(_) => "not_held",
            LeaseError::OwnerUnavailable(_) => "owner_unavailable",
            LeaseError::OwnerTimeout(_) => "owner_timeout",
            LeaseError::OwnerRejected(_) => "owner_rejected",
            LeaseError::ReplyTooLarge(_) => "reply_too_large",
            LeaseError::PayloadTooLarge(_) => "payload_too_large",
            LeaseError::Unauthorized(_) => "unauthorized",
            LeaseError::NotFound(_) => "not_found",
            LeaseError::MethodNotAllowed(_) => "method_not_allowed",
            LeaseError::BodyTooLarge(_) => "body_too_large",
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
            LeaseError::NotHeld(_) => 404,
            LeaseError::OwnerUnavailable(_) => 502,
            LeaseError::OwnerTimeout(_) => 504,
            LeaseError::OwnerRejected(_) => 409,
            LeaseError::ReplyTooLarge(_) => 502,
            LeaseError::PayloadTooLarge(_) => 413,
            LeaseError::Unauthorized(_) => 401,
            LeaseError::NotFound(_) => 404,
            LeaseError::MethodNotAllowed(_) => 405,
            LeaseError::BodyTooLarge(_) => 413,
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
            holder: None,
            revision: None,
        }
    }
}
