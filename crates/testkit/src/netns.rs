//! Network namespaces a cluster test creates for itself, so it can cut one
//! node off from its peers without touching the host's network.
//!
//! One hub namespace holds two bridges: the client LAN joins the root
//! namespace (one veth, whose root end gets an address) to every node, and
//! the route LAN joins the nodes to each other. Each node lives in its own
//! namespace with one leg on each LAN, listening for clients on the first
//! and for routes on the second. Partitioning a node takes its route leg
//! down: it keeps its clients but cannot reach its peers. Nothing is routed
//! or forwarded: the root namespace only ever talks to the client LAN.
//!
//! Addresses come from the RFC 2544 benchmarking range: the client LAN of
//! instance `x` is 198.18.x.0/24, its route LAN 198.19.x.0/24. An instance
//! claims `x` by creating its hub namespace `dnl<x>-hub`, which fails if
//! another test (in any process) holds it; everything is deleted on drop,
//! panics included.

use std::process::Command;

/// Why the machine cannot give a test its own namespaces (not root, no
/// `ip`, no netns support), in one line.
pub type Unsupported = String;

/// A hub and one namespace per node, deleted on drop.
pub struct Network {
    x: u8,
    nodes: usize,
}

/// Runs `ip` with `args`, returning its stderr on failure.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|err| format!("ip {}: {err}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Network {
    /// Creates the hub and `nodes` node namespaces with their links, or
    /// says why this machine cannot.
    pub fn create(nodes: usize) -> Result<Self, Unsupported> {
        // Start the search at a per-process spot so parallel test binaries
        // rarely race for the same subnet; a lost race just moves on.
        let start = (std::process::id() % 250) as usize;
        let mut last = String::new();
        for step in 0..250 {
            let x = ((start + step) % 250) as u8;
            match ip(&["netns", "add", &format!("dnl{x}-hub")]) {
                Ok(()) => {
                    let network = Network { x, nodes: 0 };
                    return network.build(nodes);
                }
                // Taken by another instance: try the next one.
                Err(err) if err.contains("File exists") => last = err,
                Err(err) => return Err(err),
            }
        }
        Err(format!("no free instance subnet: {last}"))
    }

    fn build(mut self, nodes: usize) -> Result<Self, Unsupported> {
        let hub = self.hub();
        let root_end = format!("dnl{}", self.x);
        ip(&["-n", &hub, "link", "set", "lo", "up"])?;
        for bridge in ["cbr", "rbr"] {
            ip(&["-n", &hub, "link", "add", bridge, "type", "bridge"])?;
            ip(&["-n", &hub, "link", "set", bridge, "up"])?;
        }
        // The root namespace's one leg on the client LAN.
        ip(&[
            "link", "add", &root_end, "type", "veth", "peer", "name", "root", "netns", &hub,
        ])?;
        ip(&["-n", &hub, "link", "set", "root", "master", "cbr", "up"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.root_address()),
            "dev",
            &root_end,
        ])?;
        ip(&["link", "set", &root_end, "up"])?;
        for i in 0..nodes {
            let ns = self.namespace(i);
            ip(&["netns", "add", &ns])?;
            self.nodes = i + 1;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            for (leg, bridge, address) in [
                ("c", "cbr", self.client_address(i)),
                ("r", "rbr", self.route_address(i)),
            ] {
                let hub_end = format!("{leg}{i}");
                ip(&[
                    "-n", &hub, "link", "add", &hub_end, "type", "veth", "peer", "name", leg,
                    "netns", &ns,
                ])?;
                ip(&["-n", &hub, "link", "set", &hub_end, "master", bridge, "up"])?;
                ip(&[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{address}/24"),
                    "dev",
                    leg,
                ])?;
                ip(&["-n", &ns, "link", "set", leg, "up"])?;
            }
        }
        Ok(self)
    }

    fn hub(&self) -> String {
        format!("dnl{}-hub", self.x)
    }

    /// The namespace node `i` runs in.
    pub fn namespace(&self, i: usize) -> String {
        format!("dnl{}-n{}", self.x, i + 1)
    }

    fn root_address(&self) -> String {
        format!("198.18.{}.254", self.x)
    }

    /// Where node `i` listens for clients, reachable from the root namespace.
    pub fn client_address(&self, i: usize) -> String {
        format!("198.18.{}.{}", self.x, i + 1)
    }

    /// Where node `i` listens for routes, reachable from its peers only.
    pub fn route_address(&self, i: usize) -> String {
        format!("198.19.{}.{}", self.x, i + 1)
    }

    /// Cuts node `i` off from its peers (`clients: false`), or from
    /// everyone (`clients: true`); its process runs on.
    pub fn partition(&self, i: usize, clients: bool) {
        self.set(i, "r", "down");
        if clients {
            self.set(i, "c", "down");
        }
    }

    /// Brings every link of node `i` back up.
    pub fn heal(&self, i: usize) {
        self.set(i, "r", "up");
        self.set(i, "c", "up");
    }

    fn set(&self, i: usize, leg: &str, state: &str) {
        ip(&["-n", &self.namespace(i), "link", "set", leg, state])
            .unwrap_or_else(|err| panic!("{err}"));
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veths in it and so their peers,
        // the root end included.
        for i in 0..self.nodes {
            let _ = ip(&["netns", "del", &self.namespace(i)]);
        }
        let _ = ip(&["netns", "del", &self.hub()]);
    }
}
