//! `GET /v1/cluster`: the NATS nodes a gateway knows, the bucket's stream
//! leader and replicas, and the live gateways with their versions; and
//! `/readyz` agreeing with it when the stream has no leader.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::cluster::{self, Cluster};
use crate::common::service::collect_json;
use crate::common::{Gateway, Http, NatsServer, TwoGateways, assert_error, eventually};
use serde_json::{Value, json};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The instance ids that answer `$SRV.PING.dagnats-api`.
async fn pinged_ids(c: &async_nats::Client) -> BTreeSet<String> {
    collect_json(c, "$SRV.PING.dagnats-api")
        .await
        .iter()
        .map(|pong| pong["id"].as_str().unwrap().to_string())
        .collect()
}

/// The names of the servers holding a replica, the leader first.
fn replica_names(view: &Value) -> Vec<&str> {
    view["stream"]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn cluster_shows_the_server_the_stream_leader_and_both_gateways() {
    let two = TwoGateways::start().await;
    let (server, [a, _], c) = (&two.server, &two.gateways, &two.client);
    let ids = pinged_ids(c).await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    let info = c.server_info();

    let reply = Http::of(a).await.get("/v1/cluster").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let view = reply.body;
    let own = view["gateway"]["id"].as_str().unwrap();
    assert!(ids.contains(own), "{view}");
    assert_eq!(view["gateway"]["version"], VERSION);
    let listed: BTreeSet<String> = view["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            assert_eq!(g["version"], VERSION, "{g}");
            g["id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(listed, ids, "both gateways, as $SRV.PING finds them");
    assert_eq!(
        view["nodes"],
        json!([{"url": server.url.trim_start_matches("nats://"), "connected": true,
                "name": info.server_name, "version": info.version}]),
    );
    assert_eq!(
        view["stream"],
        json!({"name": "KV_leases", "cluster": null, "leader": info.server_name, "error": null,
               "replicas": [{"name": info.server_name, "leader": true, "current": true,
                             "offline": false, "active_ns": null, "lag": 0}]}),
    );
}

#[tokio::test]
async fn cluster_needs_the_read_token_when_one_is_set() {
    let server = NatsServer::start().await;
    let gateway =
        Gateway::start_with(&server.url, &[], &[("DAGNATS_HTTP_READ_TOKEN", "secret")]).await;
    let http = Http::of(&gateway).await;
    assert_error(&http.get("/v1/cluster").await, 401, "unauthorized");
    assert_eq!(
        http.with_token("secret").get("/v1/cluster").await.status,
        200
    );
}

#[tokio::test]
async fn a_three_node_cluster_shows_its_leader_and_three_replicas() {
    let cluster = Cluster::start().await;
    let gateway = cluster::gateway(&cluster.nodes[0].url).await;
    let c = cluster.client().await;
    let leader = cluster.wait_healthy(&c, Duration::from_secs(30)).await;
    let http = Http::of(&gateway).await;

    let view = http.get("/v1/cluster").await.body;
    assert_eq!(view["stream"]["cluster"], "leases", "{view}");
    assert_eq!(
        view["stream"]["leader"], cluster.nodes[leader].name,
        "{view}"
    );
    assert_eq!(view["stream"]["error"], Value::Null, "{view}");
    let names = replica_names(&view);
    assert_eq!(
        names[0], cluster.nodes[leader].name,
        "the leader first: {view}"
    );
    assert_eq!(
        names.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["n1", "n2", "n3"]),
        "{view}"
    );
    for replica in view["stream"]["replicas"].as_array().unwrap() {
        let is_leader = replica["name"] == cluster.nodes[leader].name;
        assert_eq!(replica["leader"], is_leader, "{replica}");
        assert_eq!(replica["current"], true, "{replica}");
        assert_eq!(replica["offline"], false, "{replica}");
        assert!(replica["lag"].is_u64(), "{replica}");
        assert_eq!(replica["active_ns"].is_u64(), !is_leader, "{replica}");
    }

    let urls: BTreeSet<&str> = cluster
        .nodes
        .iter()
        .map(|n| n.url.trim_start_matches("nats://"))
        .collect();
    let nodes = view["nodes"].as_array().unwrap();
    let listed: BTreeSet<&str> = nodes.iter().map(|n| n["url"].as_str().unwrap()).collect();
    assert_eq!(listed, urls, "every node the connection knows: {view}");
    let connected: Vec<&Value> = nodes.iter().filter(|n| n["connected"] == true).collect();
    assert_eq!(connected.len(), 1, "{view}");
    assert_eq!(connected[0]["name"], "n1", "{view}");
    assert!(
        connected[0]["version"].as_str().unwrap().starts_with("2."),
        "{view}"
    );
    let ids: Vec<&Value> = view["gateways"].as_array().unwrap().iter().collect();
    assert_eq!(ids.len(), 1, "{view}");
    assert_eq!(ids[0]["id"], view["gateway"]["id"], "{view}");
}

#[tokio::test]
async fn readyz_agrees_with_cluster_when_the_stream_has_no_leader() {
    let mut cluster = Cluster::start().await;
    let gateway = cluster::gateway(&cluster.nodes[0].url).await;
    let c = cluster.client().await;
    cluster.wait_healthy(&c, Duration::from_secs(30)).await;
    let http = Http::of(&gateway).await;
    assert_eq!(http.get("/readyz").await.status, 200);

    // Two of three nodes gone: no quorum, no stream leader.
    cluster.nodes[1].kill();
    cluster.nodes[2].kill();
    eventually("the leader to be gone", Duration::from_secs(30), || async {
        let view = http.get("/v1/cluster").await.body;
        view["stream"]["leader"].is_null().then_some(())
    })
    .await;
    let ready = http.get("/readyz").await;
    assert_error(&ready, 503, "unavailable");
    assert!(
        ready.body["error"]
            .as_str()
            .unwrap()
            .contains("no stream leader"),
        "{}",
        ready.body
    );
    let text = http.metrics().await;
    assert!(
        text.contains("dagnats_stream_has_leader 0"),
        "/metrics agrees"
    );
    for gone in ["n2", "n3"] {
        let line = format!("dagnats_stream_replica_current{{replica=\"{gone}\"}} 0");
        assert!(text.contains(&line), "{line} in\n{text}");
    }

    cluster.nodes[1].restart().await;
    cluster.nodes[2].restart().await;
    eventually("ready again", Duration::from_secs(60), || async {
        (http.get("/readyz").await.status == 200).then_some(())
    })
    .await;
    let view = http.get("/v1/cluster").await.body;
    assert!(view["stream"]["leader"].is_string(), "{view}");
    assert!(http.metrics().await.contains("dagnats_stream_has_leader 1"));
    eventually("every replica current", Duration::from_secs(30), || async {
        let text = http.metrics().await;
        ["n1", "n2", "n3"]
            .iter()
            .all(|n| {
                text.contains(&format!(
                    "dagnats_stream_replica_current{{replica=\"{n}\"}} 1"
                ))
            })
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn gateways_on_every_node_of_a_cluster_are_all_listed() {
    let cluster = Cluster::start().await;
    let mut gateways = Vec::new();
    for node in &cluster.nodes {
        gateways.push(cluster::gateway(&node.url).await);
    }
    let c = cluster.client().await;
    let ids = pinged_ids(&c).await;
    assert_eq!(ids.len(), 3, "one per node, across the routes: {ids:?}");
    for gateway in &gateways {
        let view = Http::of(gateway).await.get("/v1/cluster").await.body;
        let listed: BTreeSet<String> = view["gateways"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(listed, ids, "{view}");
    }
}
