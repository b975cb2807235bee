//! How a failure leaves the HTTP front: the `{"error", "kind"}` body of a
//! core [`LeaseError`], or of the front's own failures (401, 404, 405,
//! 413), with the status of its kind from the one table of kinds
//! ([`Kind::http_status`]). There is no other mapping.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::core::{ForwardError, LeaseError};
use dagnats_leases_wire::kind::{ErrorBody, Kind};

/// A failed HTTP call: the wire body and the status of its kind.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: u16,
    body: ErrorBody,
}

/// The kind of a failed response, left in its extensions for the metrics
/// middleware (successes have none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailedKind(pub(crate) &'static str);

impl From<LeaseError> for ApiError {
    fn from(err: LeaseError) -> Self {
        ApiError {
            status: err.kind().http_status(),
            body: err.body(),
        }
    }
}

impl From<dagnats_leases_wire::request::Invalid> for ApiError {
    fn from(invalid: dagnats_leases_wire::request::Invalid) -> Self {
        LeaseError::from(invalid).into()
    }
}

impl From<ForwardError> for ApiError {
    fn from(err: ForwardError) -> Self {
        ApiError {
            status: err.error.kind().http_status(),
            body: err.body(),
        }
    }
}

impl ApiError {
    /// A failure of the HTTP front itself: `unauthorized`, `not_found`,
    /// `method_not_allowed` or `body_too_large`.
    pub(crate) fn front(kind: Kind, error: impl Into<String>) -> Self {
        ApiError {
            status: kind.http_status(),
            body: ErrorBody {
                error: error.into(),
                kind,
                holder: None,
                revision: None,
            },
        }
    }

    /// `err`'s body with another status: only `/readyz`, where every reason
    /// for not being ready is a 503.
    pub(crate) fn with_status(status: u16, err: LeaseError) -> Self {
        ApiError {
            status,
            body: err.body(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let kind = self.body.kind.name();
        let mut response = (status, Json(self.body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response.extensions_mut().insert(FailedKind(kind));
        response
    }
}

/// Declares the documented failures of operations as lists of kinds; each
/// list is a utoipa `IntoResponses` whose statuses come from the kind table,
/// the same one [`ApiError`] answers with.
macro_rules! failures {
    ($($(#[$doc:meta])* $name:ident = [$($kind:ident),* $(,)?];)*) => {$(
        $(#[$doc])*
        pub(crate) struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::response::Response>,
            > {
                use dagnats_leases_wire::Kind::*;
                dagnats_leases_wire::error_responses(&[$($kind),*])
            }
        }
    )*};
}

failures! {
    /// Acquire: a JSON body, no fence to check; `forbidden` under a policy.
    AcquireFailures = [
        Invalid, Unauthorized, Forbidden, BodyTooLarge, Internal, Unsupported, Unavailable,
    ];
    /// Renew, release and transfer: `lost` when the fence does not match.
    FencedFailures = [
        Invalid, Unauthorized, Forbidden, Lost, BodyTooLarge, Internal, Unsupported, Unavailable,
    ];
    /// Owner, list and the event stream: reads of the bucket.
    ReadFailures = [Invalid, Unauthorized, Forbidden, Internal, Unsupported, Unavailable];
    /// Revoke: `not_held` when nobody holds the key.
    RevokeFailures = [Invalid, Unauthorized, Forbidden, NotHeld, Internal, Unsupported, Unavailable];
    /// Forward: every kind of the hop to the owner.
    ForwardFailures = [
        Invalid, Unauthorized, Forbidden, NotHeld, OwnerRejected, PayloadTooLarge, BodyTooLarge,
        Internal, Unsupported, OwnerUnavailable, ReplyTooLarge, Unavailable, OwnerTimeout,
    ];
    /// The recent changes: no request to check.
    RecentFailures = [Unauthorized, Forbidden, Unsupported, Unavailable];
    /// The cluster view: it reports trouble in its body, never as a failure.
    ClusterFailures = [Unauthorized];
}
