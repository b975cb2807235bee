//! How a failure leaves the HTTP front: the core's `{"error", "kind"}`
//! body with the status its [`LeaseError`] owns. There is no other mapping.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::core::{ErrorBody, ForwardError, LeaseError};

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
            status: err.http_status(),
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
            status: err.error.http_status(),
            body: err.body(),
        }
    }
}

impl ApiError {
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
