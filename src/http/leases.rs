//! `/v1/leases`: acquire, renew, release, owner and list over HTTP. The
//! bodies are the NATS replies; the key comes from the path.

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use serde_json::Value;

use super::error::ApiError;
use super::extract::{KeyPath, LeaseJson, QueryOf};
use super::{AppState, auth};
use crate::core::model::{
    AcquireRequest, Grant, LeaseList, ListRequest, Owner, ReleaseRequest, Released, RenewRequest,
    from_fields,
};

type Reply<T> = Result<Json<T>, ApiError>;

/// The lease routes, each behind the token its kind of call needs.
pub fn router(state: &AppState) -> Router<AppState> {
    let writes = Router::new()
        .route("/v1/leases/{key}/acquire", post(acquire))
        .route("/v1/leases/{key}/renew", post(renew))
        .route("/v1/leases/{key}/release", post(release))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::writes));
    let reads = Router::new()
        .route("/v1/leases/{key}", get(owner))
        .route("/v1/leases", get(list))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::reads));
    writes.merge(reads)
}

async fn acquire(
    State(s): State<AppState>,
    LeaseJson(req): LeaseJson<AcquireRequest>,
) -> Reply<Grant> {
    Ok(Json(s.core.acquire(req).await?))
}

async fn renew(State(s): State<AppState>, LeaseJson(req): LeaseJson<RenewRequest>) -> Reply<Grant> {
    Ok(Json(s.core.renew(req).await?))
}

async fn release(
    State(s): State<AppState>,
    LeaseJson(req): LeaseJson<ReleaseRequest>,
) -> Reply<Released> {
    Ok(Json(s.core.release(req).await?))
}

async fn owner(State(s): State<AppState>, KeyPath(key): KeyPath) -> Reply<Owner> {
    let req = from_fields([("key", Value::from(key))])?;
    Ok(Json(s.core.owner(req).await?))
}

async fn list(State(s): State<AppState>, QueryOf(req): QueryOf<ListRequest>) -> Reply<LeaseList> {
    Ok(Json(s.core.list(req).await?))
}
