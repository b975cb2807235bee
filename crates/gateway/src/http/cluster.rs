//! `/v1/cluster`: the NATS nodes, the bucket's stream leader and replicas,
//! and the live gateways, as this gateway sees them now.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router, middleware};

use super::error::ClusterFailures;
use super::{AppState, auth};
use crate::cluster::{self, ClusterView};

/// The cluster route, behind the read token like the dashboard's data.
pub fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/cluster", get(view))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth::reads))
}

/// The cluster: the NATS nodes this gateway knows, the `KV_leases` stream's
/// leader and each replica's state and lag (`leader: null` and an `error`
/// when no leader answers), and every gateway that answers
/// `$SRV.PING.dagnats-api` within 300 ms, with versions. Always 200: a
/// cluster in trouble is what this shows.
#[utoipa::path(get, path = "/v1/cluster", tag = "cluster",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "What this gateway sees of the cluster", body = ClusterView),
        ClusterFailures,
    ))]
pub async fn view(State(s): State<AppState>) -> Json<ClusterView> {
    Json(cluster::view(&s.client, &s.instance).await)
}
