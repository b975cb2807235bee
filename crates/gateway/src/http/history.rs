//! `/v1/history` and `/v1/leases/{key}/history`: the tenure history over
//! HTTP, with the same fields as `api.leases.history`, from the query
//! (docs/protocol.md, Tenure history).

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router, middleware};
use serde::Deserialize;
use serde_json::Value;

use super::error::{ApiError, ReadFailures};
use super::extract::{KeyPath, QueryOf, query_field};
use super::{AppState, auth};
use crate::metrics::Op;
use crate::policy::Access;
use dagnats_leases_wire::history::{HistoryRequest, TenureHistory};
use dagnats_leases_wire::request::{LeaseKey, from_fields};

/// The history routes, behind the read token.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/history", get(history))
        .route("/v1/leases/{key}/history", get(key_history))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::reads))
}

/// The query as text, checked as a [`HistoryRequest`] like a NATS body.
#[derive(Deserialize)]
pub(crate) struct HistoryQuery {
    key: Option<Value>,
    prefix: Option<Value>,
    since: Option<Value>,
    until: Option<Value>,
    before: Option<Value>,
    limit: Option<Value>,
}

impl HistoryQuery {
    /// The request, with `key` taken from the path when it is there.
    fn request(self, key: Option<String>) -> Result<HistoryRequest, ApiError> {
        let text = |value: Option<Value>| value.unwrap_or(Value::Null);
        Ok(from_fields([
            ("key", key.map_or_else(|| text(self.key), Value::from)),
            ("prefix", text(self.prefix)),
            ("since", text(self.since)),
            ("until", text(self.until)),
            ("before", text(self.before)),
            ("limit", query_field(self.limit)),
        ])?)
    }
}

/// History: the tenures of the keys asked for (every key, `key`, or
/// `prefix`) that overlap `since` to `until`, newest first; pass `next`
/// back as `before` for the next page.
#[utoipa::path(get, path = "/v1/history", tag = "history",
    params(HistoryRequest),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of tenures, newest first; `next` is null on the last page", body = TenureHistory),
        ReadFailures,
    ))]
pub(crate) async fn history(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    QueryOf(query): QueryOf<HistoryQuery>,
) -> Result<Json<TenureHistory>, ApiError> {
    answer(&s, &access, query.request(None)?).await
}

/// One key's history: its tenures newest first, with the same query as
/// `/v1/history` (a `key` in the query is the path's).
#[utoipa::path(get, path = "/v1/leases/{key}/history", tag = "history",
    params(
        ("key" = LeaseKey, Path, description = "The lease key"),
        ("prefix" = Option<String>, Query, description = "Only if the key starts with this prefix"),
        ("since" = Option<String>, Query, format = DateTime, description = "Only tenures that lasted until this time or later (RFC 3339)"),
        ("until" = Option<String>, Query, format = DateTime, description = "Only tenures that started at this time or earlier (RFC 3339)"),
        ("before" = Option<String>, Query, pattern = "^[0-9]{1,19}$", description = "The `next` of the previous page"),
        ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "At most this many tenures (1 to 1000; default 100)"),
    ),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of the key's tenures, newest first", body = TenureHistory),
        ReadFailures,
    ))]
pub(crate) async fn key_history(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    KeyPath(key): KeyPath,
    QueryOf(query): QueryOf<HistoryQuery>,
) -> Result<Json<TenureHistory>, ApiError> {
    answer(&s, &access, query.request(Some(key))?).await
}

/// `req`'s page, of the keys the caller may read.
async fn answer(
    s: &AppState,
    access: &Access,
    req: HistoryRequest,
) -> Result<Json<TenureHistory>, ApiError> {
    access.admit_read(Op::History, req.key.as_ref().map(LeaseKey::as_str))?;
    let visible = |key: &str| access.reads(key);
    Ok(Json(s.core.history(req, &visible).await?))
}
