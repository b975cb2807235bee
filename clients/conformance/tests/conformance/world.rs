//! The real processes a scenario runs against: a nats-server with a
//! gateway (shared by every scenario that only reads and writes its own
//! keys, or a scenario's own when it pauses the gateway, loads a policy or
//! runs on a server too old), or a bare nats-server with no gateway at all.

use std::time::Duration;

use dagnats_leases_testkit::{Gateway, NatsServer};
use serde_json::Value;

use crate::driver::signal_process;
use crate::transcript::Transcript;

/// A nats-server, a gateway on it, and the runner's own connection.
pub struct World {
    pub server: NatsServer,
    pub gateway: Gateway,
    pub client: async_nats::Client,
}

impl World {
    pub async fn start() -> World {
        Self::start_with(&[]).await
    }

    /// [`start`](Self::start), the gateway with `args` (e.g. a policy).
    pub async fn start_with(args: &[&str]) -> World {
        let server = NatsServer::start().await;
        let gateway = Gateway::start_with(&server.url, args, &[]).await;
        let client = dagnats_leases_testkit::nats::client(&server.url).await;
        World {
            server,
            gateway,
            client,
        }
    }

    /// A nats-server older than 2.11 (no bucket) and a gateway on it,
    /// once the gateway answers `unsupported`.
    pub async fn on_an_older_server() -> World {
        let server = NatsServer::old().await;
        let gateway = Gateway::spawn(&server.url, &[], &[]);
        gateway.wait_serving().await;
        let client = dagnats_leases_testkit::nats::client(&server.url).await;
        let world = World {
            server,
            gateway,
            client,
        };
        let owner = serde_json::json!({"key": "k"});
        dagnats_leases_testkit::eventually("unsupported", Duration::from_secs(10), || async {
            (world.call("owner", owner.clone()).await["kind"] == "unsupported").then_some(())
        })
        .await;
        world
    }

    /// `api.leases.<op>` with a JSON body, sent by the runner itself (not
    /// through the library under test); the reply as JSON.
    pub async fn call(&self, op: &str, body: Value) -> Value {
        let request = self.client.request(
            format!("api.leases.{op}"),
            serde_json::to_vec(&body).unwrap().into(),
        );
        let reply = tokio::time::timeout(Duration::from_secs(10), request)
            .await
            .unwrap_or_else(|_| panic!("runner: no reply to {op} {body} within 10 s"))
            .unwrap_or_else(|err| panic!("runner: {op} {body}: {err}"));
        serde_json::from_slice(&reply.payload).expect("the gateway answers JSON")
    }

    /// Pauses (`STOP`) or resumes (`CONT`) the gateway's process.
    pub fn signal_gateway(&self, signal: &str, transcript: &Transcript) {
        transcript.note("runner", format!("SIG{signal} gateway"));
        signal_process(self.gateway.pid(), signal);
    }
}

/// A nats-server with neither JetStream nor a gateway, and the runner's
/// connection to it.
pub struct Bare {
    pub server: NatsServer,
    pub client: async_nats::Client,
}

impl Bare {
    pub async fn start() -> Bare {
        let server = NatsServer::without_jetstream().await;
        let client = dagnats_leases_testkit::nats::client(&server.url).await;
        Bare { server, client }
    }
}
