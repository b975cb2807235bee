//! `/v1/leases`: acquire, renew, release, transfer, owner and list over
//! HTTP. The bodies are the NATS replies; the key comes from the path.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router, middleware};
use serde::Deserialize;
use serde_json::Value;

use super::error::{AcquireFailures, ApiError, FencedFailures, ReadFailures, RevokeFailures};
use super::extract::{KeyPath, LeaseJson, QueryOf, header_ms, query_field};
use super::{AppState, auth};
use crate::core::ListBounds;
use crate::metrics::Op;
use crate::policy::Access;
use dagnats_leases_wire::names::HEADER_WAITED_MS;
use dagnats_leases_wire::reply::{Grant, LeaseList, Owner, Released};
use dagnats_leases_wire::request::{
    AcquireRequest, LeaseKey, ListRequest, OwnerRequest, ReleaseRequest, RenewRequest,
    TransferRequest, from_fields,
};

type Reply<T> = Result<Json<T>, ApiError>;

/// The lease routes, each behind the token its kind of call needs.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    let writes = Router::new()
        .route("/v1/leases/{key}/acquire", post(acquire))
        .route("/v1/leases/{key}/renew", post(renew))
        .route("/v1/leases/{key}/release", post(release))
        .route("/v1/leases/{key}/transfer", post(transfer))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::writes));
    let reads = middleware::from_fn_with_state(state.clone(), auth::reads);
    let writes_layer = middleware::from_fn_with_state(state.clone(), auth::writes);
    let one = get(owner)
        .route_layer(reads.clone())
        .merge(delete(revoke).route_layer(writes_layer));
    let lists = Router::new()
        .route("/v1/leases", get(list))
        .route_layer(reads);
    writes.route("/v1/leases/{key}", one).merge(lists)
}

/// Acquire: grant the key if nobody holds it (`granted: false` names the
/// holder); the holder asking again gets its lease back unchanged.
#[utoipa::path(post, path = "/v1/leases/{key}/acquire", tag = "leases",
    params(
        ("key" = LeaseKey, Path, description = "The lease key"),
        ("Dagnats-Lease-Waited-Ms" = Option<u64>, Header, nullable = false, maximum = 9223372036854775807_f64, description = "On each try of a wait for the key: milliseconds since the first try (0 on it), so a grant counts how long its holder waited"),
    ),
    request_body(content = AcquireRequest, content_type = "application/json"),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The lease, granted or naming the current holder", body = Grant),
        AcquireFailures,
    ))]
pub(crate) async fn acquire(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    headers: HeaderMap,
    LeaseJson(req): LeaseJson<AcquireRequest>,
) -> Reply<Grant> {
    let caller = access.admit(Op::Acquire, req.key.as_str())?;
    let waited = header_ms(&headers, HEADER_WAITED_MS)?;
    Ok(Json(s.core.acquire_waited(req, &caller, waited).await?))
}

/// Renew: extend the lease to `ttl_ms` from now, if you hold it at
/// `revision`; the reply carries the new fence. `lost`: stop acting as
/// owner.
#[utoipa::path(post, path = "/v1/leases/{key}/renew", tag = "leases",
    params(("key" = LeaseKey, Path, description = "The lease key")),
    request_body(content = RenewRequest, content_type = "application/json"),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The renewed lease", body = Grant),
        FencedFailures,
    ))]
pub(crate) async fn renew(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    LeaseJson(req): LeaseJson<RenewRequest>,
) -> Reply<Grant> {
    let caller = access.admit(Op::Renew, req.key.as_str())?;
    Ok(Json(s.core.renew(req, &caller).await?))
}

/// Release: free the key under the same fence check as renew.
#[utoipa::path(post, path = "/v1/leases/{key}/release", tag = "leases",
    params(("key" = LeaseKey, Path, description = "The lease key")),
    request_body(content = ReleaseRequest, content_type = "application/json"),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Released; `revision` is the release write's fence", body = Released),
        FencedFailures,
    ))]
pub(crate) async fn release(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    LeaseJson(req): LeaseJson<ReleaseRequest>,
) -> Reply<Released> {
    let caller = access.admit(Op::Release, req.key.as_str())?;
    Ok(Json(s.core.release(req, &caller).await?))
}

/// Transfer: hand the lease you hold at `revision` to `to`, in one
/// compare-and-set write: a new, higher fence and a new tenure for `to`,
/// with no moment in between when the key is free. `lost` when `holder`
/// does not hold the key at `revision`; `to` equal to `holder` is `invalid`.
#[utoipa::path(post, path = "/v1/leases/{key}/transfer", tag = "leases",
    params(("key" = LeaseKey, Path, description = "The lease key")),
    request_body(content = TransferRequest, content_type = "application/json"),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The new lease: `holder` is `to`, `granted: true`", body = Grant),
        FencedFailures,
    ))]
pub async fn transfer(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    LeaseJson(req): LeaseJson<TransferRequest>,
) -> Reply<Grant> {
    let caller = access.admit_transfer(&req)?;
    Ok(Json(s.core.transfer(req, &caller).await?))
}

/// Owner: who holds the key, read through the stream leader.
#[utoipa::path(get, path = "/v1/leases/{key}", tag = "leases",
    params(("key" = LeaseKey, Path, description = "The lease key")),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The lease, or `{\"held\": false, \"key\"}`", body = Owner),
        ReadFailures,
    ))]
pub(crate) async fn owner(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    KeyPath(key): KeyPath,
) -> Reply<Owner> {
    let req: OwnerRequest = from_fields([("key", Value::from(key))])?;
    access.admit(Op::Owner, req.key.as_str())?;
    Ok(Json(s.core.owner(req).await?))
}

/// Revoke: free a stuck lease whoever holds it, with a new, higher fence,
/// so the holder's fence is stale everywhere; a `released` event names the
/// holder; `not_held` when nobody holds the key. An operator's action: it
/// needs the write token.
#[utoipa::path(delete, path = "/v1/leases/{key}", tag = "leases",
    params(("key" = LeaseKey, Path, description = "The lease key")),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Revoked; `holder` is the holder it was taken from, `revision` the new fence", body = Released),
        RevokeFailures,
    ))]
pub(crate) async fn revoke(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    KeyPath(key): KeyPath,
) -> Reply<Released> {
    let req: OwnerRequest = from_fields([("key", Value::from(key))])?;
    access.admit(Op::Revoke, req.key.as_str())?;
    Ok(Json(s.core.revoke(req).await?))
}

/// The list query as text, checked as a [`ListRequest`] like a NATS body.
#[derive(Deserialize)]
pub struct ListQuery {
    prefix: Option<Value>,
    after: Option<Value>,
    limit: Option<Value>,
}

/// List: the held leases, ordered by key, each read through the stream
/// leader. Without `limit`, every one of them; with it, a page, and `next`
/// to pass back as `after` for the following one.
#[utoipa::path(get, path = "/v1/leases", tag = "leases",
    params(ListRequest),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The held leases; `next` is null at the end", body = LeaseList),
        ReadFailures,
    ))]
pub(crate) async fn list(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    QueryOf(query): QueryOf<ListQuery>,
) -> Reply<LeaseList> {
    access.admit_any_key(Op::List)?;
    let req: ListRequest = from_fields([
        ("prefix", query.prefix.unwrap_or(Value::Null)),
        ("after", query.after.unwrap_or(Value::Null)),
        ("limit", query_field(query.limit)),
    ])?;
    let visible = |key: &str| access.reads(key);
    Ok(Json(
        s.core.list(req, ListBounds::default(), &visible).await?,
    ))
}
