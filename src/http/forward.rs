//! `POST /v1/leases/{key}/forward`: deliver a request to the key's owner.
//!
//! JSON mode (`Content-Type: application/json`) takes and returns the NATS
//! bodies, payload in base64. Raw mode (any other content type) forwards the
//! body's bytes and returns the owner's bytes, naming the owner in
//! `Dagnats-Lease-Holder` and `Dagnats-Lease-Fence`; `?timeout_ms=` bounds it.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router, middleware};
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::extract::{Body, KeyPath, QueryOf, is_json};
use super::{AppState, auth};
use crate::core::model::{ForwardRequest, Payload, decode_keyed, from_fields};

/// The forward route, behind the write token.
pub fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/leases/{key}/forward", post(forward))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::writes))
}

/// Raw mode's query: `timeout_ms`, as in the JSON body.
#[derive(Deserialize)]
struct RawQuery {
    timeout_ms: Option<Value>,
}

async fn forward(
    State(s): State<AppState>,
    KeyPath(key): KeyPath,
    QueryOf(query): QueryOf<RawQuery>,
    headers: HeaderMap,
    Body(body): Body,
) -> Result<Response, ApiError> {
    if is_json(&headers) {
        let req: ForwardRequest = decode_keyed(&key, &body)?;
        return Ok(Json(s.core.forward(req).await?).into_response());
    }
    let timeout = query.timeout_ms.map(|t| match t {
        // The query is text: a number in it is read as one.
        Value::String(text) => text.parse::<u64>().map_or(Value::String(text), Value::from),
        other => other,
    });
    let mut req: ForwardRequest = from_fields([
        ("key", Value::from(key)),
        ("payload", Value::from("")),
        ("timeout_ms", timeout.unwrap_or(Value::Null)),
    ])?;
    req.payload = Payload(body);
    let reply = s.core.forward(req).await?;
    // `Dagnats-Lease-Holder` and `Dagnats-Lease-Fence` name the owner.
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (
            HeaderName::from_static("dagnats-lease-holder"),
            header_value(&reply.holder),
        ),
        (
            HeaderName::from_static("dagnats-lease-fence"),
            HeaderValue::from(reply.revision),
        ),
    ];
    Ok((headers, reply.payload.0).into_response())
}

/// A holder id is `[A-Za-z0-9_-]`, always a valid header value.
fn header_value(holder: &str) -> HeaderValue {
    HeaderValue::from_str(holder).expect("holder ids are header-safe")
}
