//! `dagnats-leases`: leases over NATS. Replicas of a service elect a leader
//! or split shard ownership with a key that one holder owns for a bounded
//! time, kept in a JetStream KV bucket whose server enforces the TTL.
//!
//! # Layout
//!
//! - [`core`]: the lease operations of the seed, typed requests and
//!   replies, and the one error type that owns every wire `kind`. It knows
//!   nothing of transports.
//! - [`inbox`]: the owner hop of forward, a NATS request to the holder's
//!   inbox; the retry rule around it lives in the core.
//! - [`store`]: the `leases` bucket: provisioning, compare-and-set writes,
//!   reads through the stream leader, and whether it can serve right now.
//! - [`nats`]: the NATS front, `api.leases.*` in queue group
//!   `dagnats-leases`; it decodes, calls the core, encodes.
//! - [`client`]: the holder side for Rust services: typed calls, a lease
//!   keeper, an owner inbox and a fence gate. Same wire as any NATS client.
//! - [`http`]: the HTTP front over the same core: REST, forward, Server-Sent
//!   Events, health, readiness and metrics.
//! - [`events`]: the one change-event subscription per gateway, each change
//!   handed to the event-stream clients whose filter wants it.
//! - [`metrics`]: the Prometheus recorder and the helpers both fronts use.
//! - [`protocol`]: subjects, headers and names on the wire.
//! - [`config`], [`telemetry`]: settings and logs of `dagnats-leases serve`.
//! - [`cli`]: the ops commands (acquire, owner, watch, hold, ...).
//!
//! [`run`] wires them together; `main.rs` only parses the command line.

pub mod cli;
pub mod client;
pub mod config;
pub mod core;
pub mod events;
pub mod http;
pub mod inbox;
pub mod metrics;
pub mod nats;
pub mod protocol;
pub mod store;
pub mod telemetry;

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;
use core::LeaseCore;

/// How long one JetStream request may take before the call answers
/// `unavailable`; below a client's usual 5 s request timeout, so callers
/// hear why rather than time out.
const STORE_TIMEOUT: Duration = Duration::from_secs(4);

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

/// Runs the gateway until `shutdown` completes: provisions the bucket in the
/// background, answers the lease subjects and the HTTP API, then stops taking requests,
/// finishes the ones in flight and drains the NATS connection.
///
/// It starts even when NATS or JetStream is down (calls answer
/// `unavailable` until it is back) and returns an error only for settings
/// it cannot use or an existing bucket it must not touch.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    let options = config
        .nats
        .connect_options()
        .await
        .map_err(RunError::Settings)?;
    let http_settings = config.http().map_err(RunError::Settings)?;
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
    let tasks = TaskTracker::new();
    let (store, provisioner) = store::store(client.clone(), config.bucket(), STORE_TIMEOUT);
    let core = LeaseCore::new(store, inbox::OwnerInbox::new(client.clone()));
    let mut provisioning = tokio::spawn(store::keep_provisioned(provisioner, stop.child_token()));

    let events = events::Events::new(http_settings.sse_buffer);
    let relay = tokio::spawn({
        let (client, events, core, stop) =
            (client.clone(), events.clone(), core.clone(), stop.clone());
        async move {
            // Subscribing waits for NATS; stopping must not.
            let subscribed = tokio::select! {
                () = stop.cancelled() => return,
                subscribed = events::subscribe(&client) => subscribed,
            };
            match subscribed {
                Ok(sub) => events::relay(sub, events, core, stop).await,
                Err(err) => tracing::error!(%err, "could not subscribe to the change events"),
            }
        }
    });
    let state = http::AppState {
        core: core.clone(),
        client: client.clone(),
        events,
        tokens: http::auth::Tokens {
            write: http_settings.write_token.clone(),
            read: http_settings.read_token.clone(),
        },
        metrics: metrics::handle(),
        heartbeat: http_settings.heartbeat,
        stop: stop.clone(),
    };
    let app = http::app(state, &http_settings);
    tracing::info!("HTTP listening on {http_addr}");
    let http_server = tokio::spawn(http::serve(listener, app, stop.clone()));

    let front = tokio::spawn({
        let (client, tasks, stop) = (client.clone(), tasks.clone(), stop.clone());
        async move {
            match nats::subscribe(&client).await {
                Ok(subs) => {
                    tracing::info!("serving lease requests on api.leases.*");
                    nats::serve(client, core, subs, tasks, stop).await;
                }
                Err(err) => tracing::error!(%err, "could not subscribe to the lease subjects"),
            }
        }
    });

    let outcome = tokio::select! {
        () = shutdown => Ok(()),
        refused = &mut provisioning => match refused {
            Ok(Err(refusal)) => Err(RunError::from(refusal)),
            Ok(Ok(())) => Ok(()),
            Err(panic) => Err(RunError::Nats(format!("provisioning task failed: {panic}"))),
        },
    };
    tracing::info!("shutting down: no new requests, finishing the ones in flight");
    stop.cancel();
    // Draining the subscriptions needs the server's answer; while NATS is
    // unreachable there is nothing to drain, so do not wait forever.
    if tokio::time::timeout(NATS_GRACE, front).await.is_err() {
        tracing::warn!("NATS did not confirm the unsubscribe in time");
    }
    // HTTP stops taking requests and finishes the ones in flight; event
    // streams end at `stop`.
    let _ = http_server.await;
    let _ = relay.await;
    // In-flight calls end on their own timeouts (store and forward).
    tasks.close();
    tasks.wait().await;
    provisioning.abort();
    let flushed = tokio::time::timeout(NATS_GRACE, client.flush()).await;
    if !matches!(flushed, Ok(Ok(()))) {
        tracing::warn!("could not flush the last replies");
    }
    let drained = tokio::time::timeout(NATS_GRACE, client.drain()).await;
    if !matches!(drained, Ok(Ok(()))) {
        tracing::warn!("could not drain the NATS connection");
    }
    tracing::info!("stopped");
    outcome
}
