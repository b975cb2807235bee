//! The HTTP front: the lease API, change events, docs and operator
//! endpoints over axum. Like the NATS front it decodes, calls the one
//! [`LeaseCore`], encodes; every failure is the core's `{"error", "kind"}`
//! body with the status its kind owns.
//!
//! One module per resource, each exporting a router: [`leases`] (acquire,
//! renew, release, transfer, owner, list), [`forward`], [`events`] (SSE), [`ops`]
//! (health, readiness, metrics), [`docs`] (OpenAPI and the reference page),
//! [`dashboard`] (the bundled owner dashboard).
//! [`auth`] and [`extract`] are shared.

pub mod auth;
pub mod dashboard;
pub mod docs;
pub mod error;
pub mod events;
pub mod extract;
pub mod forward;
pub mod leases;
pub mod ops;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;
use tower_http::compression::CompressionLayer;
use tower_http::cors::CorsLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

use crate::core::{LeaseCore, LeaseError};
use crate::events::Events;
use crate::metrics::{self, Front};
use auth::Tokens;
use error::{ApiError, FailedKind};

/// Largest request body: room for a base64 payload at the largest
/// max_payload a server is usually given (8 MB); the owner hop's own limit
/// is checked by forward itself (`payload_too_large`).
pub const BODY_LIMIT: usize = 12 * 1024 * 1024;

/// Longest any request may take to answer: above forward's 30 s maximum.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(35);

/// What the HTTP front takes from the settings.
#[derive(Clone)]
pub struct HttpSettings {
    pub write_token: Option<String>,
    pub read_token: Option<String>,
    /// Browser origins allowed; empty means no CORS headers.
    pub cors_origins: Vec<HeaderValue>,
    /// Interval of heartbeat comments on idle event streams.
    pub heartbeat: Duration,
    /// Changes buffered per event-stream client before it is dropped.
    pub sse_buffer: usize,
}

/// What every handler shares; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// Whether the NATS front has subscribed the lease subjects.
    pub serving: tokio::sync::watch::Receiver<bool>,
    pub core: LeaseCore,
    pub client: async_nats::Client,
    pub events: Events,
    pub tokens: Tokens,
    pub metrics: PrometheusHandle,
    pub heartbeat: Duration,
    /// Ends every event stream when the gateway stops.
    pub stop: CancellationToken,
}

/// The whole HTTP application.
pub fn app(state: AppState, settings: &HttpSettings) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let router = Router::new()
        .merge(leases::router(&state))
        .merge(forward::router(&state))
        .merge(events::router(&state))
        .merge(ops::router())
        .merge(docs::router())
        .merge(dashboard::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
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
        }))
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
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([
                HeaderName::from_static("dagnats-lease-holder"),
                HeaderName::from_static("dagnats-lease-fence"),
            ]),
    )
}

/// Serves `app` on `listener` until `stop`, then finishes the requests in
/// flight (event streams end at `stop` too).
pub async fn serve(listener: tokio::net::TcpListener, app: Router, stop: CancellationToken) {
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
    LeaseError::NotFound("no such endpoint; see /docs".into()).into()
}

async fn method_not_allowed() -> ApiError {
    LeaseError::MethodNotAllowed("this endpoint does not take that method; see /docs".into()).into()
}

/// Counts every request by operation and outcome, through the same helper
/// as the NATS front.
async fn measure(req: Request, next: Next) -> Response {
    let op = op_name(
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

/// The operation a route serves, as metrics label it.
fn op_name(route: Option<&str>, delete: bool) -> &'static str {
    match route {
        Some("/v1/leases/{key}/acquire") => "acquire",
        Some("/v1/leases/{key}/renew") => "renew",
        Some("/v1/leases/{key}/release") => "release",
        Some("/v1/leases/{key}/forward") => "forward",
        Some("/v1/leases/{key}/transfer") => "transfer",
        Some("/v1/leases/{key}") if delete => "revoke",
        Some("/v1/leases/{key}") => "owner",
        Some("/v1/leases") => "list",
        Some("/v1/events") => "events",
        Some("/v1/events/recent") => "recent",
        Some(_) => "ops",
        None => "unrouted",
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
