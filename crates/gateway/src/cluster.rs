//! The cluster as this gateway sees it, for `GET /v1/cluster`, `/readyz`
//! and `/metrics`: the NATS nodes its connection knows, the bucket's stream
//! leader and each replica's state, and the gateways that answer
//! `$SRV.PING` (ADR-32).
//!
//! Everything is read live, on request: the server's INFO of the
//! connection, one `STREAM.INFO` (answered by the stream leader, asked
//! through the store) and one ping collected for [`PING_WINDOW`].

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::Client;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::metrics;
use crate::nats::service::{Instance, VERSION};
use dagnats_leases_wire::names::{SERVICE_VERB_PING, STREAM, service_subjects};
use dagnats_leases_wire::service::PingResponse;

/// How long pings are collected: gateways on the same cluster answer
/// within milliseconds; one that has not answered by then is not counted.
pub const PING_WINDOW: Duration = Duration::from_millis(300);

/// What `GET /v1/cluster` answers.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClusterView {
    /// The gateway that answered.
    pub gateway: GatewayInstance,
    /// The NATS servers this gateway's connection knows.
    pub nodes: Vec<NatsNode>,
    /// The bucket's stream, its leader and replicas.
    pub stream: StreamView,
    /// Every gateway that answered `$SRV.PING.dagnats-api` within the
    /// window (this one included), ordered by id.
    pub gateways: Vec<GatewayInstance>,
}

/// One instance of the `dagnats-api` service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, ToSchema)]
pub struct GatewayInstance {
    /// Its ADR-32 instance id: `$SRV.INFO.dagnats-api.<id>` reaches it.
    pub id: String,
    /// Its version.
    pub version: String,
}

/// A NATS server this gateway can connect to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NatsNode {
    /// `host:port` of its client listener.
    pub url: String,
    /// Whether this gateway is connected to it now.
    pub connected: bool,
    /// Its server name; known for the server this gateway is connected to.
    pub name: Option<String>,
    /// Its nats-server version; known for the server this gateway is
    /// connected to.
    pub version: Option<String>,
}

/// The `KV_leases` stream.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StreamView {
    /// `KV_leases`.
    pub name: String,
    /// The name of the NATS cluster, when the server runs in one.
    pub cluster: Option<String>,
    /// The server that leads the stream; `null` when none does (then no
    /// lease call can be served, and `/readyz` says so).
    pub leader: Option<String>,
    /// Every replica, the leader first.
    pub replicas: Vec<Replica>,
    /// Why the stream could not be read, when it could not.
    pub error: Option<String>,
}

/// One replica of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Replica {
    /// The server that holds it.
    pub name: String,
    /// Whether it leads the stream.
    pub leader: bool,
    /// Whether it has caught up with the leader.
    pub current: bool,
    /// Whether the leader has lost sight of it.
    pub offline: bool,
    /// Nanoseconds since the leader last heard from it (`null` for the
    /// leader itself).
    pub active_ns: Option<u64>,
    /// Operations it is behind the leader.
    pub lag: u64,
}

impl StreamView {
    /// Whether the stream has a leader, hence can serve.
    pub fn has_leader(&self) -> bool {
        self.leader.is_some()
    }

    /// Sets the stream's gauges to this view.
    pub fn record_metrics(&self) {
        let replicas: Vec<_> = self
            .replicas
            .iter()
            .map(|replica| metrics::ReplicaGauge {
                name: &replica.name,
                lag: replica.lag,
                current: replica.current,
            })
            .collect();
        metrics::stream(self.has_leader(), &replicas);
    }

    fn unreadable(error: String) -> Self {
        StreamView {
            name: STREAM.to_string(),
            cluster: None,
            leader: None,
            replicas: Vec::new(),
            error: Some(error),
        }
    }
}

/// The whole view: nodes, stream and live gateways (read at once).
pub async fn view(client: &Client, instance: &Instance) -> ClusterView {
    let (stream, gateways) = tokio::join!(stream(client), live_gateways(client));
    ClusterView {
        gateway: GatewayInstance {
            id: instance.id().to_string(),
            version: VERSION.to_string(),
        },
        nodes: nodes(client),
        stream,
        gateways,
    }
}

/// The servers of the connection's INFO: the one it is connected to, and
/// every other one it advertises in `connect_urls`.
pub fn nodes(client: &Client) -> Vec<NatsNode> {
    let info = client.server_info();
    let connected = client.connection_state() == async_nats::connection::State::Connected;
    let own = format!("{}:{}", info.host, info.port);
    // A server listening on every interface advertises its real addresses
    // in connect_urls, but its INFO host is the unspecified one.
    let unspecified = matches!(info.host.as_str(), "0.0.0.0" | "::" | "[::]");
    let is_own =
        |url: &str| url == own || (unspecified && url.ends_with(&format!(":{}", info.port)));
    let mut urls: BTreeSet<String> = info.connect_urls.iter().cloned().collect();
    if !urls.iter().any(|url| is_own(url)) {
        urls.insert(own.clone());
    }
    let mut nodes: Vec<NatsNode> = urls
        .into_iter()
        .map(|url| {
            let own = is_own(&url);
            NatsNode {
                connected: own && connected,
                name: own.then(|| info.server_name.clone()),
                version: own.then(|| info.version.clone()),
                url,
            }
        })
        .collect();
    // The server this gateway is connected to first, the others by URL.
    nodes.sort_by_key(|node| node.name.is_none());
    nodes
}

#[derive(Deserialize)]
struct StreamInfo {
    error: Option<ApiError>,
    cluster: Option<ClusterInfo>,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct ClusterInfo {
    name: Option<String>,
    leader: Option<String>,
    #[serde(default)]
    replicas: Vec<PeerInfo>,
}

#[derive(Deserialize)]
struct PeerInfo {
    name: String,
    #[serde(default)]
    current: bool,
    #[serde(default)]
    offline: bool,
    #[serde(default)]
    active: u64,
    #[serde(default)]
    lag: u64,
}

/// The stream's leader and replicas, from the leader's `STREAM.INFO`.
pub async fn stream(client: &Client) -> StreamView {
    let reply = match crate::store::stream_info(client).await {
        Ok(reply) => reply,
        Err(reason) => return StreamView::unreadable(reason),
    };
    let info: StreamInfo = match serde_json::from_value(reply) {
        Ok(info) => info,
        Err(err) => return StreamView::unreadable(format!("stream info reply: {err}")),
    };
    if let Some(err) = info.error {
        return StreamView::unreadable(err.description);
    }
    match info.cluster {
        Some(cluster) => clustered(cluster),
        // A server outside any cluster leads every stream it holds.
        None => {
            let server = client.server_info().server_name;
            clustered(ClusterInfo {
                name: None,
                leader: Some(server),
                replicas: Vec::new(),
            })
        }
    }
}

fn clustered(cluster: ClusterInfo) -> StreamView {
    let leader = cluster.leader.clone().map(|name| Replica {
        name,
        leader: true,
        current: true,
        offline: false,
        active_ns: None,
        lag: 0,
    });
    let followers = cluster.replicas.into_iter().map(|peer| Replica {
        name: peer.name,
        leader: false,
        current: peer.current,
        offline: peer.offline,
        active_ns: Some(peer.active),
        lag: peer.lag,
    });
    StreamView {
        name: STREAM.to_string(),
        cluster: cluster.name,
        leader: cluster.leader,
        replicas: leader.into_iter().chain(followers).collect(),
        error: None,
    }
}

/// Every `dagnats-api` instance that answers a ping within [`PING_WINDOW`].
pub async fn live_gateways(client: &Client) -> Vec<GatewayInstance> {
    // `$SRV.PING.dagnats-api`: every instance of the service, no other.
    let [_, by_name, _] = service_subjects(SERVICE_VERB_PING, "");
    let inbox = client.new_inbox();
    let Ok(mut replies) = client.subscribe(inbox.clone()).await else {
        return Vec::new();
    };
    if client
        .publish_with_reply(by_name, inbox, "".into())
        .await
        .is_err()
    {
        return Vec::new();
    }
    let deadline = tokio::time::Instant::now() + PING_WINDOW;
    let mut found = BTreeSet::new();
    while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, replies.next()).await {
        if let Ok(pong) = serde_json::from_slice::<PingResponse>(&msg.payload) {
            found.insert(GatewayInstance {
                id: pong.service.id,
                version: pong.service.version,
            });
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_comes_first_among_the_replicas() {
        let view = clustered(ClusterInfo {
            name: Some("leases".into()),
            leader: Some("n2".into()),
            replicas: vec![PeerInfo {
                name: "n1".into(),
                current: false,
                offline: true,
                active: 5,
                lag: 3,
            }],
        });
        assert_eq!(view.leader.as_deref(), Some("n2"));
        let names: Vec<_> = view
            .replicas
            .iter()
            .map(|r| (r.name.as_str(), r.leader))
            .collect();
        assert_eq!(names, [("n2", true), ("n1", false)]);
        assert_eq!(view.replicas[1].active_ns, Some(5));
        assert_eq!((view.replicas[1].lag, view.replicas[1].offline), (3, true));
    }

    #[test]
    fn a_stream_without_a_leader_cannot_serve() {
        let view = clustered(ClusterInfo {
            name: Some("leases".into()),
            leader: None,
            replicas: Vec::new(),
        });
        assert!(!view.has_leader());
        assert!(view.replicas.is_empty());
    }
}
