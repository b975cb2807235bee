//! Endpoints for operators: liveness, readiness and Prometheus metrics.
//! They need no token, so probes and scrapers work without one.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::ApiError;
use crate::cluster;
use crate::core::LeaseError;
use crate::metrics;
use dagnats_leases_wire::kind::ErrorBody;

/// `/healthz`, `/readyz` and `/metrics`.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(render_metrics))
}

/// The body of a `200` from `/healthz` (`ok`) or `/readyz` (`ready`).
#[derive(Serialize, ToSchema)]
pub(crate) struct Status {
    status: &'static str,
}

/// Liveness: the process is up and serving HTTP.
#[utoipa::path(get, path = "/healthz", tag = "ops",
    security(),
    responses((status = 200, description = "`{\"status\": \"ok\"}`", body = Status)))]
pub(crate) async fn healthz() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// Readiness: NATS is connected and the bucket can serve (its stream has a
/// leader, as `/v1/cluster` shows it); else 503 naming why (`unavailable`,
/// or `unsupported` on a server older than 2.11).
#[utoipa::path(get, path = "/readyz", tag = "ops",
    security(),
    responses(
        (status = 200, description = "`{\"status\": \"ready\"}`", body = Status),
        (status = 503, description = "`unavailable` or `unsupported`", body = ErrorBody),
    ))]
pub(crate) async fn readyz(State(s): State<AppState>) -> Result<Json<Status>, ApiError> {
    if s.client.connection_state() != async_nats::connection::State::Connected {
        return Err(LeaseError::Unavailable("not connected to NATS".into()).into());
    }
    if !*s.serving.borrow() {
        return Err(
            LeaseError::Unavailable("the lease subjects are not subscribed yet".into()).into(),
        );
    }
    s.core.ready().map_err(|err| match err {
        // Readiness is a 503 whatever the reason; the kind says which.
        LeaseError::Unsupported { .. } => ApiError::with_status(503, err),
        other => other.into(),
    })?;
    s.core.history_ready()?;
    let stream = cluster::stream(&s.client).await;
    stream.record_metrics();
    if !stream.has_leader() {
        let why = stream.error.as_deref().unwrap_or("no leader elected");
        return Err(LeaseError::Unavailable(format!(
            "the leases bucket has no stream leader: {why}"
        ))
        .into());
    }
    Ok(Json(Status { status: "ready" }))
}

/// Prometheus metrics: requests by front, op and kind, latency histograms,
/// forward attempts, event-stream clients, NATS connection state, and the
/// stream's leader and replicas as `/v1/cluster` shows them.
#[utoipa::path(get, path = "/metrics", tag = "ops",
    security(),
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
pub(crate) async fn render_metrics(State(s): State<AppState>) -> impl IntoResponse {
    metrics::nats_connected(
        s.client.connection_state() == async_nats::connection::State::Connected,
    );
    cluster::stream(&s.client).await.record_metrics();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}
