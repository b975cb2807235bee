//! `POST /v1/leases/{key}/forward`: deliver a request to the key's owner.
//!
//! JSON mode (`Content-Type: application/json`) takes and returns the NATS
//! bodies, payload in base64. Raw mode (any other content type) forwards the
//! body's bytes and returns the owner's bytes, naming the owner in
//! `Dagnats-Lease-Holder` and `Dagnats-Lease-Fence`; `?timeout_ms=` bounds it.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router, middleware};
use serde::Deserialize;
use serde_json::Value;

use super::error::{ApiError, ForwardFailures};
use super::extract::{Body, KeyPath, QueryOf, is_json, query_field};
use super::{AppState, auth, header_name};
use crate::metrics::Op;
use crate::policy::Access;
use dagnats_leases_wire::names::{HEADER_FENCE, HEADER_HOLDER};
use dagnats_leases_wire::reply::Forwarded;
use dagnats_leases_wire::request::{
    ForwardRequest, ForwardTimeout, LeaseKey, Payload, decode_keyed, from_fields,
};

/// The forward route, behind the write token.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/leases/{key}/forward", post(forward))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::writes))
}

/// Raw mode's query: `timeout_ms`, as in the JSON body.
#[derive(Deserialize)]
pub(crate) struct RawQuery {
    pub(crate) timeout_ms: Option<Value>,
}

/// Forward: deliver a request to whoever holds the key. JSON in, JSON out
/// (payload in base64); or raw: any other content type is forwarded as
/// bytes and the owner's bytes come back.
#[utoipa::path(post, path = "/v1/leases/{key}/forward", tag = "forward",
    params(
        ("key" = LeaseKey, Path, description = "The lease key"),
        ("timeout_ms" = Option<ForwardTimeout>, Query, nullable = false, description = "Raw mode: bounds the whole call (100 to 30000; default 5000)"),
    ),
    request_body(content(
        (ForwardRequest = "application/json"),
        (Body = "application/octet-stream"),
    )),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The owner's reply", content(
            (Forwarded = "application/json"),
            (Body = "application/octet-stream"),
        ), headers(
            ("Dagnats-Lease-Holder" = String, description = "Raw mode: the holder that answered"),
            ("Dagnats-Lease-Fence" = u64, description = "Raw mode: its fence"),
        )),
        ForwardFailures,
    ))]
pub(crate) async fn forward(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    KeyPath(key): KeyPath,
    QueryOf(query): QueryOf<RawQuery>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    if is_json(&headers) {
        let req: ForwardRequest = decode_keyed(&key, &body)?;
        access.admit(Op::Forward, req.key.as_str())?;
        return Ok(Json(s.core.forward(req).await?).into_response());
    }
    let mut req: ForwardRequest = from_fields([
        ("key", Value::from(key)),
        ("payload", Value::from("")),
        ("timeout_ms", query_field(query.timeout_ms)),
    ])?;
    req.payload = Payload(body);
    access.admit(Op::Forward, req.key.as_str())?;
    let reply = s.core.forward_raw(req).await?;
    // `Dagnats-Lease-Holder` and `Dagnats-Lease-Fence` name the owner.
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (header_name(HEADER_HOLDER), header_value(&reply.holder)),
        (header_name(HEADER_FENCE), HeaderValue::from(reply.revision)),
    ];
    Ok((headers, reply.payload.0).into_response())
}

/// A holder id is `[A-Za-z0-9_-]`, always a valid header value.
fn header_value(holder: &str) -> HeaderValue {
    HeaderValue::from_str(holder).expect("holder ids are header-safe")
}
