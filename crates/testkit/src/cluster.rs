//! A three-node nats-server cluster on loopback: JetStream clustered over
//! routes, free ports, a temp store dir per node, `sync_interval: always`,
//! and the faults a test injects (kill -9, restart, SIGSTOP/SIGCONT).
//! Where the machine allows, [`Cluster::start_isolated`] runs each node in
//! its own network namespace instead ([`crate::netns`]), so a test can also
//! partition one. Gateways on it provision the bucket at 3 replicas.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::gateway::Gateway;
use crate::nats::{client, server_binary, try_js_api};
use crate::netns::{Network, Unsupported};
use crate::{Log, eventually, free_ports, within};

/// Nodes in a cluster: the smallest that survives losing one.
pub const NODES: usize = 3;

/// One node: its ports, config and store stay the same across restarts.
pub struct Node {
    pub name: String,
    pub url: String,
    /// Where its monitoring endpoint listens.
    host: String,
    pub http_port: u16,
    /// The network namespace it runs in, if the cluster is isolated.
    netns: Option<String>,
    config: PathBuf,
    child: Option<Child>,
    /// The current process's stderr.
    pub log: Log,
    /// The stderr of earlier processes of this node, before restarts.
    past: Vec<Log>,
}

impl Node {
    fn launch(&mut self) {
        // `ip netns exec` execs the server, so the child's pid is the
        // server's and kill -9 and SIGSTOP reach it.
        let mut command = match &self.netns {
            Some(ns) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", ns]).arg(server_binary());
                command
            }
            None => Command::new(server_binary()),
        };
        let mut child = command
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting nats-server");
        self.past.push(std::mem::take(&mut self.log));
        self.log.follow(child.stderr.take().unwrap());
        self.child = Some(child);
    }

    /// Everything the node wrote to stderr, across restarts.
    pub fn all_logs(&self) -> String {
        let mut text: Vec<String> = self.past.iter().map(Log::text).collect();
        text.push(self.log.text());
        text.join("\n")
    }

    async fn wait_ready(&self) {
        self.log
            .wait_for("Server is ready", Duration::from_secs(15))
            .await
            .unwrap_or_else(|| panic!("{} did not start:\n{}", self.name, self.log.text()));
    }

    /// The current process's id, if it runs: the benchmark reads each
    /// node's CPU time from `/proc/<pid>`.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process runs (it may be paused).
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    /// kill -9: a crash. The store dir is kept.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed node again on the same ports and store.
    pub async fn restart(&mut self) {
        self.kill();
        self.launch();
        self.wait_ready().await;
    }

    /// SIGSTOP: the process freezes with its connections open, like a long
    /// GC pause or a frozen VM.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT: a paused node carries on where it stopped.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("node is running");
        let status = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {}", self.name);
    }

    /// The monitoring endpoint's `/connz`: the node's client connections.
    pub fn connz(&self) -> Option<Value> {
        self.monitoring("/connz?limit=1024")
    }

    /// The monitoring endpoint's `/varz`: the node's totals (messages and
    /// bytes in and out, clients, routes).
    pub fn varz(&self) -> Option<Value> {
        self.monitoring("/varz")
    }

    /// GET `path` from the node's monitoring endpoint, as JSON.
    fn monitoring(&self, path: &str) -> Option<Value> {
        let mut stream = TcpStream::connect((self.host.as_str(), self.http_port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()
    }

    /// How many gateways (connections named `dagnats-leases`) are on this node.
    pub fn gateways(&self) -> usize {
        self.connz().map_or(0, |connz| {
            connz["connections"].as_array().map_or(0, |conns| {
                conns
                    .iter()
                    .filter(|c| c["name"] == "dagnats-leases")
                    .count()
            })
        })
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SIGKILL ends a paused process too.
        self.kill();
    }
}

/// Where one node listens: clients and monitoring on one address, routes
/// on another (the same on loopback).
struct Addresses {
    client: (String, u16),
    http: (String, u16),
    route: (String, u16),
}

/// Three nodes clustered over loopback routes, or over a route LAN of their
/// own when isolated. Fields drop in order: nodes first, then their
/// namespaces, then their stores.
pub struct Cluster {
    pub nodes: Vec<Node>,
    network: Option<Network>,
    _dir: TempDir,
}

impl Cluster {
    /// Starts three nodes on loopback and waits until JetStream answers on each.
    pub async fn start() -> Self {
        let ports = free_ports(3 * NODES);
        let at = |i: usize| (String::from("127.0.0.1"), ports[i]);
        let addresses = (0..NODES)
            .map(|i| Addresses {
                client: at(i),
                route: at(NODES + i),
                http: at(2 * NODES + i),
            })
            .collect();
        Self::launch(addresses, None).await
    }

    /// Starts three nodes, each in a network namespace of its own, so that
    /// [`Cluster::partition`] can cut one off; or says why the machine
    /// does not allow it. Each namespace has its own ports, so the
    /// standard ones serve.
    pub async fn start_isolated() -> Result<Self, Unsupported> {
        let network = Network::create(NODES)?;
        let addresses = (0..NODES)
            .map(|i| Addresses {
                client: (network.client_address(i), 4222),
                http: (network.client_address(i), 8222),
                route: (network.route_address(i), 6222),
            })
            .collect();
        Ok(Self::launch(addresses, Some(network)).await)
    }

    async fn launch(addresses: Vec<Addresses>, network: Option<Network>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let route_urls: Vec<String> = addresses
            .iter()
            .map(|a| format!("\"nats-route://{}:{}\"", a.route.0, a.route.1))
            .collect();
        let mut nodes = Vec::new();
        for (i, a) in addresses.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let store = dir.path().join(&name);
            let config = dir.path().join(format!("{name}.conf"));
            std::fs::write(
                &config,
                node_config(&name, a, &store, &route_urls.join(", ")),
            )
            .unwrap();
            let mut node = Node {
                name,
                url: format!("nats://{}:{}", a.client.0, a.client.1),
                host: a.http.0.clone(),
                http_port: a.http.1,
                netns: network.as_ref().map(|n| n.namespace(i)),
                config,
                child: None,
                log: Log::default(),
                past: Vec::new(),
            };
            node.launch();
            nodes.push(node);
        }
        for node in &nodes {
            node.wait_ready().await;
        }
        let cluster = Cluster {
            nodes,
            network,
            _dir: dir,
        };
        for node in &cluster.nodes {
            let client = client(&node.url).await;
            let answers = within(JETSTREAM_READY, || async {
                let info = try_js_api(&client, "INFO", json!({})).await?;
                info.get("error").is_none().then_some(())
            });
            // It ran out once in a fresh-machine rehearsal, with nothing
            // to tell why: the nodes' logs can.
            if answers.await.is_none() {
                panic!(
                    "JetStream did not answer on {} within {JETSTREAM_READY:?}:{}",
                    node.name,
                    cluster.logs()
                );
            }
        }
        cluster
    }

    /// Every node's log, across restarts, each under its name.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|node| format!("\n== node {}\n{}\n", node.name, node.all_logs()))
            .collect()
    }

    /// Cuts node `i` off from its peers: it keeps its clients (and its
    /// gateways) but its routes are gone. Needs [`Cluster::start_isolated`].
    pub fn partition(&self, i: usize) {
        self.network().partition(i, false);
    }

    /// Cuts node `i` off from everyone, clients included.
    pub fn isolate(&self, i: usize) {
        self.network().partition(i, true);
    }

    /// Brings node `i`'s links back up.
    pub fn heal(&self, i: usize) {
        self.network().heal(i);
    }

    fn network(&self) -> &Network {
        self.network
            .as_ref()
            .expect("partitions need Cluster::start_isolated")
    }

    /// Every node's client URL, comma-separated, as `NATS_URL` takes them.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A client that fails over between every node.
    pub async fn client(&self) -> async_nats::Client {
        self.connect(async_nats::ConnectOptions::new()).await
    }

    /// A holder's client: [`Cluster::client`] pinging every 2 s, as
    /// docs/operations.md tells holders to, so it leaves a silent node
    /// within seconds.
    pub async fn holder_client(&self) -> async_nats::Client {
        let options = async_nats::ConnectOptions::new().ping_interval(Duration::from_secs(2));
        self.connect(options).await
    }

    async fn connect(&self, options: async_nats::ConnectOptions) -> async_nats::Client {
        options
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connect(self.nodes.iter().map(|n| n.url.clone()).collect::<Vec<_>>())
            .await
            .expect("connecting to the cluster")
    }

    /// Index of the node that leads `KV_leases`, asked through `client`.
    pub async fn stream_leader(&self, client: &async_nats::Client) -> Option<usize> {
        let info = try_js_api(client, "STREAM.INFO.KV_leases", json!({})).await?;
        let leader = info["cluster"]["leader"].as_str()?;
        self.nodes.iter().position(|n| n.name == leader)
    }

    /// Waits until `KV_leases` has a leader and all 3 replicas are current.
    pub async fn wait_healthy(&self, client: &async_nats::Client, timeout: Duration) -> usize {
        eventually("a healthy KV_leases", timeout, || async {
            let info = try_js_api(client, "STREAM.INFO.KV_leases", json!({})).await?;
            let leader = info["cluster"]["leader"].as_str()?;
            let replicas = info["cluster"]["replicas"].as_array()?;
            let current = replicas
                .iter()
                .filter(|r| r["current"] == true && r["offline"] != true)
                .count();
            (current == NODES - 1).then_some(())?;
            self.nodes.iter().position(|n| n.name == leader)
        })
        .await
    }
}

/// How long a new cluster's nodes may take to answer JetStream: the meta
/// group's first election, on a machine busy with other tests.
const JETSTREAM_READY: Duration = Duration::from_secs(30);

/// A node's config. `sync_interval: always` because with the default lazy
/// fsync a crashed node can lose acknowledged writes (Jepsen, NATS 2.12.1)
/// and so hand out a fence twice.
/// The route address is also advertised, so the route URLs the nodes
/// gossip are the ones on the route LAN. Route pings every second, two
/// unanswered, as docs/operations.md recommends: a cut route is closed in
/// 2 to 3 s rather than up to a minute, so requests stop being routed
/// into the cut.
fn node_config(name: &str, a: &Addresses, store: &std::path::Path, routes: &str) -> String {
    let (client, http, route) = (&a.client, &a.http, &a.route);
    format!(
        r#"server_name: {name}
listen: "{}:{}"
http: "{}:{}"
jetstream {{
  store_dir: "{store}"
  sync_interval: always
}}
cluster {{
  name: leases
  listen: "{}:{}"
  advertise: "{}:{}"
  routes: [{routes}]
  ping_interval: "1s"
  ping_max: 2
}}
"#,
        client.0,
        client.1,
        http.0,
        http.1,
        route.0,
        route.1,
        route.0,
        route.1,
        store = store.display()
    )
}

/// A gateway on `urls` (one URL or a comma-separated list) with the bucket
/// at 3 replicas, once it serves and the bucket is ready.
pub async fn gateway(urls: &str) -> Gateway {
    gateway_with(urls, &["--replicas", "3"]).await
}

/// [`gateway`] started with `args` instead of `--replicas 3` alone.
pub async fn gateway_with(urls: &str, args: &[&str]) -> Gateway {
    let gateway = Gateway::spawn(urls, args, &[]);
    gateway.wait_serving().await;
    gateway.wait_ready(Duration::from_secs(30)).await;
    gateway
}
