//! The one error type of the lease core: it owns each wire `kind`.
//!
//! Both fronts turn a [`LeaseError`] into the same `{"error", "kind"}` body;
//! causes that callers must not see (server answers, parse failures) are
//! logged here, once, and replaced by a plain sentence.

use dagnats_leases_wire::kind::{ErrorBody, Kind};

/// A failed lease call, one variant per wire `kind` a lease operation can
/// answer (docs/protocol.md, Error kinds). The HTTP front's own failures
/// (401, 404, 405, 413) are the HTTP front's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LeaseError {
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
    /// `internal` too: the call was still running when the gateway's
    /// shutdown grace ran out ("dagnats stopping mid-call is internal").
    /// Its outcome is unknown, as after any `internal`.
    #[error("the gateway is stopping; the call may or may not have taken effect")]
    Stopping,
    /// `not_held` (forward): nobody holds the key.
    #[error("nobody holds {0}")]
    NotHeld(String),
    /// `owner_unavailable` (forward): no responder on the owner's inbox,
    /// after the retries the protocol allows.
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
    /// `forbidden`: under a policy, the caller may not do this (no right
    /// on the key, another principal's tenure, or no principal at all).
    #[error("{0}")]
    Forbidden(String),
}

/// A failed forward: the error, and the owner dagnats last tried, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ForwardError {
    pub(crate) error: LeaseError,
    pub(crate) tried: Option<Tried>,
}

/// An owner a forward was sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tried {
    pub(crate) holder: String,
    pub(crate) revision: u64,
}

impl From<dagnats_leases_wire::request::Invalid> for LeaseError {
    fn from(invalid: dagnats_leases_wire::request::Invalid) -> Self {
        LeaseError::Invalid(invalid.0)
    }
}

impl From<dagnats_leases_wire::request::Invalid> for ForwardError {
    fn from(invalid: dagnats_leases_wire::request::Invalid) -> Self {
        LeaseError::from(invalid).into()
    }
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
    pub(crate) fn body(&self) -> ErrorBody {
        let mut body = self.error.body();
        if let Some(tried) = &self.tried {
            body.holder = Some(tried.holder.clone());
            body.revision = Some(tried.revision);
        }
        body
    }
}

impl LeaseError {
    /// The wire `kind`; its HTTP status comes with it
    /// ([`Kind::http_status`]).
    pub(crate) fn kind(&self) -> Kind {
        match self {
            LeaseError::Invalid(_) => Kind::Invalid,
            LeaseError::Lost(_) => Kind::Lost,
            LeaseError::Unsupported { .. } => Kind::Unsupported,
            LeaseError::Unavailable(_) => Kind::Unavailable,
            LeaseError::Internal | LeaseError::Stopping => Kind::Internal,
            LeaseError::NotHeld(_) => Kind::NotHeld,
            LeaseError::OwnerUnavailable(_) => Kind::OwnerUnavailable,
            LeaseError::OwnerTimeout(_) => Kind::OwnerTimeout,
            LeaseError::OwnerRejected(_) => Kind::OwnerRejected,
            LeaseError::ReplyTooLarge(_) => Kind::ReplyTooLarge,
            LeaseError::PayloadTooLarge(_) => Kind::PayloadTooLarge,
            LeaseError::Forbidden(_) => Kind::Forbidden,
        }
    }

    /// Logs `cause` and returns [`LeaseError::Internal`], so the cause is
    /// recorded exactly where it is hidden from the caller.
    pub(crate) fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        LeaseError::Internal
    }

    /// The wire body of this error.
    pub(crate) fn body(&self) -> ErrorBody {
        ErrorBody {
            error: self.to_string(),
            kind: self.kind(),
            holder: None,
            revision: None,
        }
    }
}
