//! `dagnats-leases`: the gateway. Replicas of a service elect a leader or
//! split shard ownership with a key that one holder owns for a bounded
//! time, kept in a JetStream KV bucket whose server enforces the TTL.
//!
//! # Layout
//!
//! - `core`: the lease operations (docs/protocol.md, Operations) and the one
//!   error type that owns every wire `kind` ([`dagnats_leases_wire::Kind`] has
//!   the table). It reaches the bucket and the owner hop only through the seams
//!   it owns (`core/ports.rs`: `Records`, `OwnerHop`), and knows no transport
//!   and nothing of the fronts.
//! - `store`: the `leases` bucket behind `Records`: provisioning,
//!   compare-and-set writes, reads through the stream leader, and whether
//!   it can serve right now; `store/jsapi.rs` is the one JetStream caller.
//! - `owner_hop`: forward's one NATS request to the holder's inbox, behind
//!   `OwnerHop`; the retry rule around it lives in the core.
//! - `events`: the one change-event subscription per gateway, each change
//!   handed to the event-stream clients whose filter wants it.
//! - `policy`: authorization (docs/protocol.md, Authorization): the policy
//!   file's principals, and what one request's caller may do, which both
//!   fronts check before they call the core; `tenant_events` republishes
//!   change events to the tenant accounts that may read them.
//! - `nats`: the NATS front, `api.leases.*` in queue group `dagnats-leases`;
//!   it decodes, calls the core, encodes; and the gateway as an instance of
//!   the NATS service `dagnats-api` (`$SRV.PING`, `INFO`, `STATS`).
//! - `http`: the HTTP front over the same core: REST, forward, Server-Sent
//!   Events, docs, health, readiness, metrics and the dashboard.
//! - `cluster`: what the gateway sees of the cluster (nodes, the stream's
//!   leader and replicas, live gateways) for `/v1/cluster` and `/readyz`.
//! - `metrics` (its `Op` enum owns every `op` label), `telemetry`,
//!   [`config`]: counters, logs and settings.
//! - [`cli`]: the ops commands (acquire, owner, watch, hold, ...), on the
//!   holder library `dagnats-leases-client`.
//!
//! Wire types live in `dagnats-leases-wire`. [`start`] wires the parts
//! together and returns a [`Running`] gateway; `main.rs` only parses the
//! command line.

pub mod cli;
mod cluster;
pub mod config;
mod core;
mod events;
mod history;
mod http;
mod metrics;
mod nats;
mod owner_hop;
mod policy;
mod settings;
mod store;
mod telemetry;
mod tenant_events;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;
use core::LeaseCore;
pub use telemetry::init as init_logs;

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// How long shutdown waits on NATS (unsubscribe, flush, drain).
const NATS_GRACE: Duration = Duration::from_secs(5);

/// Why the gateway stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid settings: {0}")]
    Settings(String),
    #[error(transparent)]
    Refused(#[from] store::Refusal),
    #[error("NATS: {0}")]
    Nats(String),
}

/// A gateway that is running: where it listens, whether it serves yet, and
/// how to stop it.
pub struct Running {
    http_addr: SocketAddr,
    serving: watch::Receiver<bool>,
    core: LeaseCore,
    stop: CancellationToken,
    done: JoinHandle<Result<(), RunError>>,
}

impl Running {
    /// The address the HTTP API is bound to (the port `:0` picked).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    /// Whether lease calls are answered now: the lease subjects are
    /// subscribed and the bucket is ready. `Err` names why not, as
    /// `/readyz` does.
    pub fn readiness(&self) -> Result<(), String> {
        if !*self.serving.borrow() {
            return Err("the lease subjects are not subscribed yet".into());
        }
        self.core.ready().map_err(|err| err.to_string())?;
        self.core.history_ready().map_err(|err| err.to_string())
    }

    /// Waits until the lease subjects are subscribed (the bucket may still
    /// be unavailable or unsupported: calls are answered either way).
    pub async fn serving(&self) {
        let mut serving = self.serving.clone();
        let _ = serving.wait_for(|serving| *serving).await;
    }

    /// Stops taking requests, finishes the ones in flight, drains NATS.
    pub async fn stop(self) -> Result<(), RunError> {
        self.stop.cancel();
        self.stopped().await
    }

    /// Waits until the gateway stops: after [`stop`](Self::stop), or on its
    /// own when the bucket turns out to be one it must not run on.
    pub async fn stopped(self) -> Result<(), RunError> {
        self.done.await.unwrap_or_else(|panic| {
            Err(RunError::Nats(format!("the gateway task failed: {panic}")))
        })
    }
}

/// Runs the gateway until `shutdown` completes (see [`start`]).
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let running = start(config).await?;
    let stop = running.stop.clone();
    tokio::select! {
        () = shutdown => running.stop().await,
        () = stop.cancelled() => running.stopped().await,
    }
}

/// Starts the gateway: binds HTTP, connects to NATS, provisions the bucket
/// in the background and answers the lease subjects and the HTTP API until
/// [`Running::stop`]; then it stops taking requests, finishes the ones in
/// flight and drains the NATS connection.
///
/// It starts even when NATS or JetStream is down (calls answer
/// `unavailable` until it is back) and fails only for settings it cannot
/// use; an existing bucket it must not touch stops it later, with the
/// reason ([`Running::stopped`]).
pub async fn start(config: Config) -> Result<Running, RunError> {
    let options = config
        .nats
        .connect_options()
        .await
        .map_err(RunError::Settings)?;
    let http_settings = config.http().map_err(RunError::Settings)?;
    let policy = config.policy().map_err(RunError::Settings)?;
    let listener = tokio::net::TcpListener::bind(config.http_addr)
        .await
        .map_err(|err| {
            RunError::Settings(format!("DAGNATS_HTTP_ADDR {}: {err}", config.http_addr))
        })?;
    let http_addr = listener
        .local_addr()
        .map_err(|err| RunError::Settings(format!("DAGNATS_HTTP_ADDR: {err}")))?;
    let options = options
        .retry_on_initial_connect()
        .max_reconnects(None)
        .event_callback(|event| async move {
            match event {
                async_nats::Event::Connected => {
                    metrics::nats_connected(true);
                    tracing::info!("connected to NATS")
                }
                async_nats::Event::Disconnected => {
                    metrics::nats_connected(false);
                    tracing::warn!("disconnected from NATS")
                }
                other => tracing::info!(event = %other, "NATS connection event"),
            }
        });
    let client = options
        .connect(config.nats.servers())
        .await
        .map_err(|err| RunError::Nats(err.to_string()))?;

    let stop = CancellationToken::new();
    // Fires `shutdown_grace` after `stop`: calls still running answer
    // `internal` rather than keep the process (and their callers) waiting.
    let give_up = CancellationToken::new();
    let tasks = TaskTracker::new();
    let (store, provisioner) = store::store(client.clone(), config.bucket());
    let mut core = LeaseCore::new(
        Arc::new(store),
        Arc::new(owner_hop::OwnerInbox::new(client.clone(), policy.clone())),
    );
    let history = history::start(client.clone(), config.history(), stop.child_token());
    let history_writer = history.map(|(tenures, writer)| {
        core = core.clone().with_history(Arc::new(tenures));
        writer
    });
    let mut provisioning = tokio::spawn(store::keep_provisioned(provisioner, stop.child_token()));

    let events = events::Events::new(http_settings.sse_buffer);
    let relay = tokio::spawn({
        let (client, events, core, stop) =
            (client.clone(), events.clone(), core.clone(), stop.clone());
        let tenants = policy.clone().filter(|policy| policy.has_accounts());
        async move {
            // Subscribing waits for NATS; stopping must not.
            let subscribed = tokio::select! {
                () = stop.cancelled() => return,
                subscribed = events::subscribe_changes(&client) => subscribed,
            };
            let relay = match subscribed {
                Ok(sub) => events::relay(sub, events, core, stop.clone()),
                Err(err) => {
                    return tracing::error!(%err, "could not subscribe to the change events");
                }
            };
            let Some(policy) = tenants else {
                return relay.await;
            };
            match tenant_events::subscribe(&client).await {
                Ok(sub) => {
                    let republish = tenant_events::republish(client, sub, policy, stop);
                    futures::future::join(relay, republish).await;
                }
                Err(err) => {
                    tracing::error!(%err, "could not subscribe to republish change events for tenants");
                    relay.await
                }
            }
        }
    });
    let (serving_tx, serving) = watch::channel(false);
    let instance = nats::service::Instance::new();
    let state = http::AppState {
        instance: instance.clone(),
        serving: serving.clone(),
        core: core.clone(),
        client: client.clone(),
        events,
        tokens: http::auth::Tokens::new(
            http_settings.write_token.as_deref(),
            http_settings.read_token.as_deref(),
            policy.clone(),
        ),
        metrics: metrics::handle(),
        heartbeat: http_settings.heartbeat,
        stop: stop.clone(),
        give_up: give_up.clone(),
    };
    let app = http::app(state, &http_settings);
    tracing::info!("HTTP listening on {http_addr}");
    let http_server = tokio::spawn(http::serve(listener, app, stop.clone()));

    let front = tokio::spawn({
        let (client, core, tasks, stop, give_up) = (
            client.clone(),
            (core.clone(), policy),
            tasks.clone(),
            stop.clone(),
            give_up.clone(),
        );
        async move {
            let subscribed = async {
                let subs = nats::subscribe_endpoints(&client).await?;
                let discovery = nats::service::subscribe_discovery(&client, &instance).await?;
                Ok::<_, async_nats::Error>((subs, discovery))
            };
            match subscribed.await {
                Ok((subs, discovery)) => {
                    tracing::info!(
                        service = dagnats_leases_wire::names::SERVICE_NAME,
                        id = instance.id(),
                        "serving lease requests on api.leases.*"
                    );
                    serving_tx.send_replace(true);
                    let discovery = nats::service::serve(
                        client.clone(),
                        instance.clone(),
                        discovery,
                        stop.clone(),
                    );
                    let front = nats::serve(client, core, instance, subs, tasks, stop, give_up);
                    futures::future::join(front, discovery).await;
                }
                Err(err) => tracing::error!(%err, "could not subscribe to the lease subjects"),
            }
        }
    });

    let grace = config.shutdown_grace();
    let done = tokio::spawn({
        let stop = stop.clone();
        async move {
            let outcome = tokio::select! {
                () = stop.cancelled() => Ok(()),
                refused = &mut provisioning => match refused {
                    Ok(Err(refusal)) => Err(RunError::from(refusal)),
                    Ok(Ok(())) => Ok(()),
                    Err(panic) => Err(RunError::Nats(format!("provisioning task failed: {panic}"))),
                },
            };
            Parts {
                stop,
                give_up,
                grace,
                front,
                http_server,
                relay,
                history_writer,
                tasks,
                provisioning,
                client,
            }
            .shut_down()
            .await;
            outcome
        }
    });
    Ok(Running {
        http_addr,
        serving,
        core,
        stop,
        done,
    })
}

/// The tasks and connection of a running gateway, for [`Parts::shut_down`].
struct Parts {
    stop: CancellationToken,
    give_up: CancellationToken,
    grace: Duration,
    front: JoinHandle<()>,
    http_server: JoinHandle<()>,
    relay: JoinHandle<()>,
    /// Hands the history over to another gateway as it stops.
    history_writer: Option<JoinHandle<()>>,
    tasks: TaskTracker,
    provisioning: JoinHandle<Result<(), store::Refusal>>,
    client: async_nats::Client,
}

impl Parts {
    /// Stops taking requests, finishes the ones in flight, drains NATS.
    async fn shut_down(self) {
        tracing::info!("shutting down: no new requests, finishing the ones in flight");
        self.stop.cancel();
        // "dagnats stopping mid-call is internal": past the grace, calls still
        // running answer so, on both fronts, instead of holding the exit.
        let (grace, give_up) = (self.grace, self.give_up);
        let give_up_later = tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            give_up.cancel();
        });
        // Draining the subscriptions needs the server's answer; while NATS is
        // unreachable there is nothing to drain, so do not wait forever.
        if tokio::time::timeout(NATS_GRACE, self.front).await.is_err() {
            tracing::warn!("NATS did not confirm the unsubscribe in time");
        }
        // HTTP stops taking requests and finishes the ones in flight; event
        // streams end at `stop`.
        let _ = self.http_server.await;
        let _ = self.relay.await;
        if let Some(writer) = self.history_writer
            && tokio::time::timeout(NATS_GRACE, writer).await.is_err()
        {
            tracing::warn!("the history writer did not stop in time");
        }
        // In-flight calls end on their own timeouts (store and forward), or at
        // the grace.
        self.tasks.close();
        self.tasks.wait().await;
        give_up_later.abort();
        self.provisioning.abort();
        let flushed = tokio::time::timeout(NATS_GRACE, self.client.flush()).await;
        if !matches!(flushed, Ok(Ok(()))) {
            tracing::warn!("could not flush the last replies");
        }
        let drained = tokio::time::timeout(NATS_GRACE, self.client.drain()).await;
        if !matches!(drained, Ok(Ok(()))) {
            tracing::warn!("could not drain the NATS connection");
        }
        tracing::info!("stopped");
    }
}
