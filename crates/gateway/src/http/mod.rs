//! The HTTP front: the lease API, change events, docs and operator
//! endpoints over axum. Like the NATS front it decodes, calls the one
//! [`LeaseCore`], encodes; every failure is the core's `{"error", "kind"}`
//! body with the status its kind owns.
//!
//! One module per resource, each exporting a router: [`leases`] (acquire,
//! renew, release, transfer, owner, list), [`forward`], [`history`] (the
//! tenure history), [`events`] (SSE), [`ops`]
//! (health, readiness, metrics), [`cluster`] (nodes, stream, gateways), [`docs`] (OpenAPI and the reference page),
//! [`dashboard`] (the bundled owner dashboard).
//! [`auth`] and [`extract`] are shared.

pub(crate) mod auth;
pub(crate) mod cluster;
pub(crate) mod dashboard;
pub(crate) mod docs;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod extract;
pub(crate) mod forward;
pub(crate) mod history;
pub(crate) mod leases;
pub(crate) mod ops;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::compression::CompressionLayer;
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::core::{LeaseCore, LeaseError};
use crate::events::Events;
use crate::metrics::{self, Front, Op};
use crate::settings::HttpSettings;
use auth::Tokens;
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::names::{HEADER_FENCE, HEADER_HOLDER, HEADER_LAST_EVENT_ID};
use error::{ApiError, FailedKind};

/// Largest request body: room for a base64 payload at the largest
/// max_payload a server is usually given (8 MB); the owner hop's own limit
/// is checked by forward itself (`payload_too_large`).
pub(crate) const BODY_LIMIT: usize = 12 * 1024 * 1024;

/// Longest any request may take to answer: above forward's 30 s maximum.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(35);

/// What every handler shares; cheap to clone.
#[derive(Clone)]
pub(crate) struct AppState {
    /// This gateway as an instance of the `dagnats-api` service.
    pub(crate) instance: crate::nats::service::Instance,
    /// Whether the NATS front has subscribed the lease subjects.
    pub(crate) serving: tokio::sync::watch::Receiver<bool>,
    pub(crate) core: LeaseCore,
    pub(crate) client: async_nats::Client,
    pub(crate) events: Events,
    pub(crate) tokens: Tokens,
    pub(crate) metrics: PrometheusHandle,
    pub(crate) heartbeat: Duration,
    /// Ends every event stream when the gateway stops.
    pub(crate) stop: CancellationToken,
    /// Fires when the shutdown grace runs out: requests still running
    /// answer `internal` ("the gateway is stopping").
    pub(crate) give_up: CancellationToken,
}

/// The whole HTTP application.
pub(crate) fn app(state: AppState, settings: &HttpSettings) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let router = Router::new()
        .merge(leases::router(&state))
        .merge(forward::router(&state))
        .merge(history::router(&state))
        .merge(events::router(&state))
        .merge(cluster::router(&state))
        .merge(ops::router())
        .merge(docs::router())
        .merge(dashboard::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Inside `measure`, so a call stopped at the grace is counted.
        .layer(middleware::from_fn_with_state(state.clone(), stopping))
        .layer(middleware::from_fn(measure))
        .layer(middleware::from_fn(timeout))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
        .layer(CompressionLayer::new())
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let id = req
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), request_id = id)
        }).on_failure(log_failure))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid));
    if settings.cors_origins.is_empty() {
        return router;
    }
    router.layer(
        CorsLayer::new()
            .allow_origin(settings.cors_origins.clone())
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                axum::http::header::AUTHORIZATION,
                axum::http::header::CONTENT_TYPE,
                header_name(HEADER_LAST_EVENT_ID),
            ])
            .expose_headers([header_name(HEADER_HOLDER), header_name(HEADER_FENCE)]),
    )
}

/// An HTTP header name from the wire crate's spelling (HTTP/2 wants it in
/// lower case; `from_bytes` folds it).
pub(crate) fn header_name(name: &str) -> HeaderName {
    HeaderName::from_bytes(name.as_bytes()).expect("wire header names are valid")
}

/// Serves `app` on `listener` until `stop`, then finishes the requests in
/// flight (event streams end at `stop` too).
pub(crate) async fn serve(listener: tokio::net::TcpListener, app: Router, stop: CancellationToken) {
    // A Router served directly rebuilds its whole route table for every
    // connection (axum's `Router::with_state(())`), about 35 KB per open
    // event stream; the make-service hands each connection a cheap clone.
    let served = axum::serve(listener, app.into_make_service())
        .with_graceful_shutdown(stop.cancelled_owned())
        .await;
    if let Err(err) = served {
        tracing::error!(%err, "HTTP server failed");
    }
}

async fn not_found() -> ApiError {
    ApiError::front(Kind::NotFound, "no such endpoint; see /docs")
}

async fn method_not_allowed() -> ApiError {
    ApiError::front(
        Kind::MethodNotAllowed,
        "this endpoint does not take that method; see /docs",
    )
}

/// Counts every request by operation and outcome, through the same helper
/// as the NATS front.
async fn measure(req: Request, next: Next) -> Response {
    let op = op_of(
        req.extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str),
        req.method() == Method::DELETE,
    );
    let started = Instant::now();
    let response = next.run(req).await;
    let kind = response
        .extensions()
        .get::<FailedKind>()
        .map_or("ok", |kind| kind.0);
    metrics::request(Front::Http, op, kind, started.elapsed());
    response
}

/// The operation a route serves.
fn op_of(route: Option<&str>, delete: bool) -> Op {
    match route {
        Some("/v1/leases/{key}/acquire") => Op::Acquire,
        Some("/v1/leases/{key}/renew") => Op::Renew,
        Some("/v1/leases/{key}/release") => Op::Release,
        Some("/v1/leases/{key}/forward") => Op::Forward,
        Some("/v1/leases/{key}/transfer") => Op::Transfer,
        Some("/v1/history" | "/v1/leases/{key}/history") => Op::History,
        Some("/v1/leases/{key}") if delete => Op::Revoke,
        Some("/v1/leases/{key}") => Op::Owner,
        Some("/v1/leases") => Op::List,
        Some("/v1/events") => Op::Events,
        Some("/v1/events/recent") => Op::Recent,
        Some("/v1/cluster") => Op::Cluster,
        Some(_) => Op::Ops,
        None => Op::Unrouted,
    }
}

/// Answers `internal` ("the gateway is stopping") for a request still
/// running when the shutdown grace runs out, rather than holding the exit
/// or dropping the connection. An event stream has answered already; its
/// body ends at `stop`.
async fn stopping(
    State(s): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    tokio::select! {
        biased;
        response = next.run(req) => Ok(response),
        () = s.give_up.cancelled() => {
            tracing::warn!("a request was still running when the shutdown grace ran out");
            Err(LeaseError::Stopping.into())
        }
    }
}

/// Bounds how long a request may take to answer (an event stream's body
/// is not bounded, only its start).
async fn timeout(req: Request, next: Next) -> Result<Response, ApiError> {
    tokio::time::timeout(REQUEST_TIMEOUT, next.run(req))
        .await
        .map_err(|_| {
            LeaseError::Unavailable(format!(
                "no answer within {} s; retry later",
                REQUEST_TIMEOUT.as_secs()
            ))
            .into()
        })
}

/// Logs a failed HTTP call: `internal` as an error, `unavailable` (503) only
/// at debug, since the store logs each change of availability once and a
/// probe of `/readyz` while it lasts is not news; anything else as a warning.
fn log_failure(class: ServerErrorsFailureClass, latency: Duration, _span: &tracing::Span) {
    let latency_ms = latency.as_millis() as u64;
    match class {
        ServerErrorsFailureClass::StatusCode(StatusCode::INTERNAL_SERVER_ERROR) => {
            tracing::error!(latency_ms, "internal error")
        }
        ServerErrorsFailureClass::StatusCode(StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::debug!(latency_ms, "unavailable")
        }
        ServerErrorsFailureClass::StatusCode(status) => {
            tracing::warn!(latency_ms, %status, "failed")
        }
        ServerErrorsFailureClass::Error(err) => tracing::error!(latency_ms, %err, "failed"),
    }
}
