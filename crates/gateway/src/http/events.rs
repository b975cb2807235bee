//! `GET /v1/events`: Server-Sent Events of every lease change, read from
//! the gateway's one change subscription; `GET /v1/events/recent`: the
//! last changes it saw.
//!
//! `?key=K` keeps one key, `?ownership=true` drops `renewed`. A client
//! sending `Last-Event-ID: R` first gets the current state of every held
//! key whose revision is above R, then the live stream.
//!
//! Both answer `unsupported` or `unavailable` when the bucket cannot serve,
//! like every other lease endpoint: a 200 with an empty stream would tell a
//! watcher that nothing changes when nothing can.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Json, Router, middleware};
use futures::{Stream, StreamExt};
use serde::Deserialize;

use super::error::{ApiError, ReadFailures, RecentFailures};
use super::extract::QueryOf;
use super::{AppState, auth};
use crate::core::LeaseError;
use crate::events::{EncodedChange, Filter, RecentChanges, feed};
use crate::metrics::Op;
use crate::policy::Access;
use dagnats_leases_wire::names::HEADER_LAST_EVENT_ID;
use dagnats_leases_wire::request::{KeyPrefix, LeaseKey};

/// The events route, behind the read token.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/events", get(events))
        .route("/v1/events/recent", get(recent))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::reads))
}

/// The filters of an event stream.
#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    pub(crate) key: Option<LeaseKey>,
    #[serde(default)]
    pub(crate) ownership: bool,
}

/// Server-Sent Events of every lease change: events `acquired`, `renewed`,
/// `released`, `expired`; `id` is the revision; data is the lease (or, for
/// `released` and `expired`, the key, revision and last holder when known).
/// A live `acquired` written by a transfer also carries `previous_holder`,
/// the holder the lease was handed over from.
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(
        ("key" = Option<LeaseKey>, Query, nullable = false, description = "Only this key"),
        ("ownership" = Option<bool>, Query, nullable = false, description = "Drop `renewed` events"),
        ("Last-Event-ID" = Option<u64>, Header, nullable = false, description = "Resume: first the current state of every held key with a higher revision"),
    ),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "The event stream (heartbeat comments when idle)", content_type = "text/event-stream", body = String),
        ReadFailures,
    ))]
pub(crate) async fn events(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
    QueryOf(query): QueryOf<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    access.admit_read(Op::Events, query.key.as_ref().map(LeaseKey::as_str))?;
    s.core.ready()?;
    let after = last_event_id(&headers)?;
    let filter = Filter {
        key: query.key,
        ownership: query.ownership,
        access: access.clone(),
    };
    // Subscribed before the state is read, so no change falls in between.
    let live = s.events.subscribe(filter);
    let resume = match after {
        Some(after) => s
            .core
            .held(&KeyPrefix::default(), &|key| access.reads(key))
            .await?
            .leases
            .into_iter()
            .filter(|(_, lease)| lease.revision > after)
            .map(|(event, lease)| EncodedChange::held(event, &lease))
            .collect(),
        None => Vec::new(),
    };
    let stream = feed(live, after.unwrap_or(0), resume, s.stop.clone()).map(|change| {
        Ok(Event::default()
            .event(change.kind.as_str())
            .id(change.revision.to_string())
            .data(change.data.as_str()))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(s.heartbeat).text("heartbeat")))
}

/// The last changes this gateway saw (at most 2,000, oldest first), so a
/// freshly opened dashboard can draw the recent past. Each is the change
/// event (`event`, `key`, `revision`, `holder`, `lease` for acquired and
/// renewed, and `previous_holder` for an acquired written by a transfer)
/// with `at`, when this gateway received it.
#[utoipa::path(get, path = "/v1/events/recent", tag = "events",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Recent changes, oldest first", body = RecentChanges),
        RecentFailures,
    ))]
pub(crate) async fn recent(
    State(s): State<AppState>,
    Extension(access): Extension<Access>,
) -> Result<Json<RecentChanges>, ApiError> {
    access.admit_any_key(Op::Recent)?;
    s.core.ready()?;
    Ok(Json(s.events.recent(|key| access.reads(key))))
}

/// The revision a reconnecting client saw last.
fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, LeaseError> {
    let Some(value) = headers.get(HEADER_LAST_EVENT_ID) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .and_then(|v| u64::try_from(v).ok())
        .map(Some)
        .ok_or_else(|| {
            LeaseError::Invalid(format!(
                "Last-Event-ID must be a revision, from 0 to {}",
                i64::MAX
            ))
        })
}
