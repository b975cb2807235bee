//! One interleaving of the retry rule (docs/protocol.md, Forwarding to the
//! owner), placed by the proxy: a
//! forward's first attempt finds no responder on the old holder's inbox,
//! and before the gateway re-reads the lease the old holder releases, a new
//! one acquires and serves its inbox. Both forward fronts run it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::FutureExt;
use serde_json::{Value, json};

use super::owner::{Answer, Owner};
use super::proxy::Proxy;
use super::{Gateway, NatsServer, call, client};

/// The key taken over.
pub const KEY: &str = "k";
/// Holds the key first, with nobody on its inbox.
const OLD: &str = "old";
/// Takes the key over while the first attempt is held.
const NEW: &str = "new";
/// What the caller forwards.
const PAYLOAD: &str = "ping";

/// A gateway connected through a proxy, `old` holding [`KEY`] with no inbox
/// subscriber, and the takeover hooked onto the gateway's publish to
/// `old`'s inbox.
pub struct Takeover {
    /// Kept for the test's length; the gateway reaches it through `proxy`.
    server: NatsServer,
    proxy: Proxy,
    pub gateway: Gateway,
    /// Connected straight to the server, as the holders are.
    pub client: async_nats::Client,
    /// How many publishes to `old`'s inbox the proxy held.
    held: Arc<AtomicUsize>,
    /// `new`'s acquire reply and its inbox, once the hook ran.
    new: Arc<OnceLock<(Value, Owner)>>,
}

impl Takeover {
    /// Starts it all; the hook is in place when this returns.
    pub async fn start() -> Takeover {
        let server = NatsServer::start().await;
        let client = client(&server.url).await;
        assert!(
            client.server_info().connect_urls.is_empty(),
            "a lone server advertises no other URL, so the gateway cannot go around the proxy"
        );
        let proxy = Proxy::start(&server.url).await;
        let gateway = Gateway::start(&proxy.url).await;
        let old = acquire(&client, OLD).await;
        let held = Arc::new(AtomicUsize::new(0));
        let new = Arc::new(OnceLock::new());
        let hook = {
            let (client, held, new) = (client.clone(), held.clone(), new.clone());
            move || {
                let (client, held, new) = (client.clone(), held.clone(), new.clone());
                let release = json!({"key": KEY, "holder": OLD, "revision": old["revision"]});
                async move {
                    // A second attempt at `old` is only counted: it has
                    // nothing left to hand over.
                    if held.fetch_add(1, Ordering::SeqCst) > 0 {
                        return;
                    }
                    let released = call(&client, "release", release).await;
                    assert_eq!(released["released"], true, "{released}");
                    let lease = acquire(&client, NEW).await;
                    let owner = Owner::start(&client, NEW, Answer::Echo).await;
                    assert!(new.set((lease, owner)).is_ok(), "one takeover");
                }
                .boxed()
            }
        };
        proxy.hold_publishes(&[&format!("dagnats.lease.inbox.{OLD}.")], Arc::new(hook));
        Takeover {
            server,
            proxy,
            gateway,
            client,
            held,
            new,
        }
    }

    /// The forward body, less the key (HTTP takes it from the path).
    pub fn forward_body() -> Value {
        json!({"payload": STANDARD.encode(PAYLOAD), "timeout_ms": 10000})
    }

    /// Asserts `reply` is `new`'s answer and nothing else, after exactly one
    /// attempt at each owner, all through the proxy.
    pub fn assert_the_new_owner_answered(&self, reply: &Value) {
        let (lease, owner) = self.new.get().expect("the takeover ran");
        let fence = lease["revision"].to_string();
        assert_eq!(
            reply,
            &json!({"key": KEY, "holder": NEW, "revision": lease["revision"],
                    "payload": STANDARD.encode(format!("echo:{fence}:{PAYLOAD}"))})
        );
        assert_eq!(
            owner.fences(),
            vec![Some(fence)],
            "one request, new's fence"
        );
        assert_eq!(
            self.held.load(Ordering::SeqCst),
            1,
            "one publish to old's inbox was held"
        );
        let inbox_publishes: Vec<String> = self
            .proxy
            .published()
            .into_iter()
            .filter(|subject| subject.starts_with("dagnats.lease.inbox."))
            .collect();
        assert_eq!(
            inbox_publishes,
            [
                format!("dagnats.lease.inbox.{OLD}.{KEY}"),
                format!("dagnats.lease.inbox.{NEW}.{KEY}"),
            ]
        );
        assert_eq!(self.proxy.connections(), 1, "the gateway never reconnected");
    }
}

/// `holder` acquires [`KEY`]; the grant.
async fn acquire(client: &async_nats::Client, holder: &str) -> Value {
    let lease = call(
        client,
        "acquire",
        json!({"key": KEY, "holder": holder, "ttl_ms": 30000}),
    )
    .await;
    assert_eq!(lease["granted"], true, "{lease}");
    lease
}
