//! Keeps the gateway's connection on a node that sees its cluster.
//!
//! A node cut off from its peers but not from its clients keeps the
//! gateways connected to it: their pings still answer. They can serve no
//! call there (the stream leader is on the other side), and if every
//! gateway sits on that node the other side has none: its callers get
//! `no responders`, and calls the queue group routed over a route that was
//! cut but not yet closed get nothing (the fault run saw both). nats-server
//! says which nodes a node sees in the `connect_urls` of the INFO it sends
//! every new connection, and drops a peer from it once their route closes.
//! So every [`PROBE_EVERY`] the gateway reads the INFO of each node of
//! `NATS_URL` on a connection of its own, and when the node it is on lists
//! fewer nodes than another reachable node does, twice in a row, it
//! reconnects to one of the nodes that list the most, picked at random so
//! the gateways of a cut node do not all land on one. Nodes that see the same
//! cluster never trigger a move, so a killed node, whose peers all lose it
//! alike, does not.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{Client, ConnectOptions, ReconnectToServer, ServerAddr};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

/// How often the nodes are probed.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a node has to accept a connection and send its INFO: a frozen
/// or unreachable node counts as not seen.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Probes in a row that must find a better node before the gateway moves:
/// right after a heal, routes come back one at a time.
const CONFIRMATIONS: u32 = 2;

/// What a node's INFO tells of it.
#[derive(Debug, Deserialize)]
pub(crate) struct NodeView {
    server_id: String,
    #[serde(default)]
    connect_urls: Vec<String>,
}

/// Which of the nodes `seen` the gateway, connected to the node `current`,
/// should move to: one of those that list the most nodes, if that is more
/// than `current` lists; `pick` chooses among them, so gateways that move
/// at once spread out instead of all landing on one node.
pub(crate) fn move_to(current: &str, seen: &[NodeView], pick: usize) -> Option<usize> {
    let here = seen.iter().find(|node| node.server_id == current)?;
    let most = seen.iter().map(|node| node.connect_urls.len()).max()?;
    if most <= here.connect_urls.len() {
        return None;
    }
    let best: Vec<usize> = (0..seen.len())
        .filter(|&i| seen[i].connect_urls.len() == most)
        .collect();
    Some(best[pick % best.len()])
}

/// A number that differs from gateway to gateway and move to move.
fn pick() -> usize {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos());
    (nanos as usize / 1000) ^ std::process::id() as usize
}

/// Where the next reconnection goes once a move chose a node.
#[derive(Clone, Default)]
pub(crate) struct Steer(Arc<Mutex<Option<(String, u16)>>>);

impl Steer {
    /// `options` whose next reconnection goes to the node a move chose
    /// (once; after that, and if it fails, async-nats picks as always).
    pub(crate) fn steering(&self, options: ConnectOptions) -> ConnectOptions {
        let chosen = self.0.clone();
        options.reconnect_to_server_callback(move |servers, _info| {
            let target = chosen.lock().expect("steer lock").take();
            async move {
                let (host, port) = target?;
                let server = servers
                    .into_iter()
                    .find(|s| s.addr.host() == host && s.addr.port() == port)?;
                Some(ReconnectToServer {
                    addr: server.addr,
                    delay: Some(Duration::ZERO),
                })
            }
        })
    }

    fn choose(&self, addr: &ServerAddr) {
        *self.0.lock().expect("steer lock") = Some((addr.host().to_string(), addr.port()));
    }
}

/// Probes `servers` (`NATS_URL`) until `stop`, moving `client` when its
/// node sees less of the cluster than another (module doc).
pub(crate) async fn keep_on_the_larger_side(
    client: Client,
    steer: Steer,
    servers: Vec<String>,
    stop: CancellationToken,
) {
    let servers: Vec<ServerAddr> = servers
        .iter()
        .filter_map(|url| ServerAddr::from_str(url).ok())
        .collect();
    if servers.len() < 2 {
        return;
    }
    let mut in_a_row = 0;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PROBE_EVERY) => {}
        }
        let probes = futures::future::join_all(servers.iter().map(probe)).await;
        let (addrs, seen): (Vec<&ServerAddr>, Vec<NodeView>) = servers
            .iter()
            .zip(probes)
            .filter_map(|(addr, view)| Some((addr, view?)))
            .unzip();
        let current = client.server_info();
        let Some(best) = move_to(&current.server_id, &seen, pick()) else {
            in_a_row = 0;
            continue;
        };
        in_a_row += 1;
        if in_a_row < CONFIRMATIONS {
            continue;
        }
        in_a_row = 0;
        let to = addrs[best];
        tracing::warn!(
            from = current.server_name,
            to = to.host(),
            "this NATS node sees fewer nodes than another: moving"
        );
        crate::metrics::nats_moved();
        steer.choose(to);
        if let Err(err) = client.force_reconnect().await {
            tracing::warn!(%err, "could not reconnect");
        }
    }
}

/// The INFO the node at `addr` sends a new connection, if it sends one in
/// time.
async fn probe(addr: &ServerAddr) -> Option<NodeView> {
    let read = async {
        let stream = tokio::net::TcpStream::connect((addr.host(), addr.port()))
            .await
            .ok()?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await.ok()?;
        serde_json::from_str(line.strip_prefix("INFO ")?.trim()).ok()
    };
    tokio::time::timeout(PROBE_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, urls: &[&str]) -> NodeView {
        NodeView {
            server_id: id.into(),
            connect_urls: urls.iter().map(|u| u.to_string()).collect(),
        }
    }

    #[test]
    fn a_gateway_on_a_node_that_lost_its_peers_moves_to_one_of_those_that_see_more() {
        let seen = [
            node("n1", &["a", "b"]),
            node("n2", &["a", "b"]),
            node("n3", &["c"]),
        ];
        for pick in 0..4 {
            assert_eq!(move_to("n3", &seen, pick), Some(pick % 2));
        }
        assert_eq!(move_to("n1", &seen, 0), None, "n1 sees as much as anyone");
    }

    #[test]
    fn nodes_that_see_the_same_cluster_keep_their_gateways() {
        // n3 killed: n1 and n2 both lost it.
        let seen = [node("n1", &["a", "b"]), node("n2", &["a", "b"])];
        assert_eq!(move_to("n1", &seen, 0), None);
        let all = [node("n1", &["a", "b", "c"]), node("n2", &["a", "b", "c"])];
        assert_eq!(move_to("n2", &all, 1), None);
    }

    #[test]
    fn a_node_not_probed_is_never_left_on_a_guess() {
        // Connected through a URL not in NATS_URL, or its probe failed.
        let seen = [node("n1", &["a", "b"]), node("n2", &["a"])];
        assert_eq!(move_to("n9", &seen, 0), None);
    }
}
