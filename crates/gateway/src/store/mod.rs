//! The JetStream side: the `leases` bucket, its provisioning, and whether it
//! can serve right now.
//!
//! [`Store`] is what the core holds, as its [`Records`] seam. A background
//! task ([`keep_provisioned`]) keeps its availability current: ready,
//! degraded (it served, and its check cannot reach the stream now: calls
//! are still tried), unsupported (server older than 2.11), or unavailable
//! (JetStream off or unreachable before it ever served, or a bucket it
//! must not run on; retried). The store knows the core only through that seam
//! (`core::ports`).
//!
//! `jsapi.rs` is the only module that talks to JetStream (the tenure
//! history's `history` module reaches it through here too); `bucket.rs`
//! is the only one that turns its answers into the core's [`StoreError`].

mod bucket;
pub(crate) mod jsapi;
mod provision;
mod publisher;
pub(crate) mod pull;
mod snapshot;
mod turns;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::Client;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::core::ports::{Availability, Records, Snapshot, StoreError, Write};
use crate::settings::BucketSettings;
use bucket::Bucket;
use dagnats_leases_wire::names::STREAM;
use dagnats_leases_wire::record::Entry;
use jsapi::JetStream;
use provision::Provisioned;
pub(crate) use provision::Refusal;
use publisher::Publisher;

/// The bucket's stream as its leader describes it (`STREAM.INFO`), for
/// the cluster view: the reply, which may carry an `error`, or why there
/// is none.
pub(crate) async fn stream_info(client: &Client) -> Result<serde_json::Value, String> {
    JetStream::new(client.clone())
        .view(&format!("STREAM.INFO.{STREAM}"))
        .await
}

/// What the provisioner last found: a bucket handle while it is ready or
/// degraded.
#[derive(Clone)]
enum State {
    /// Behind an `Arc`: each store call takes the handle out of the watch,
    /// and one counter increment is the cheapest way to.
    Ready(Arc<Bucket>),
    /// The last pass could not reach the stream (no leader during an
    /// election, JetStream unreachable) after the bucket was ready: calls
    /// still go to it and get JetStream's own answers, so service resumes
    /// the moment the stream has a leader again rather than at the next
    /// pass, while readiness says `reason`.
    Degraded {
        bucket: Arc<Bucket>,
        reason: String,
    },
    Unsupported {
        server_version: String,
    },
    Unavailable(String),
}

/// The bucket as the core sees it ([`Records`]).
pub(crate) struct Store {
    state: watch::Receiver<State>,
    repair: Arc<Notify>,
    /// Shared with the provisioner and the bucket handle (see
    /// [`provision::first_seq`]).
    highest_seen: Arc<AtomicU64>,
}

impl Store {
    /// The handle of a ready bucket, or why there is none.
    fn bucket(&self) -> Result<Arc<Bucket>, StoreError> {
        match &*self.state.borrow() {
            State::Ready(bucket) | State::Degraded { bucket, .. } => Ok(bucket.clone()),
            State::Unsupported { server_version } => Err(StoreError::Unavailable(format!(
                "nats-server {server_version} has no per-key TTL"
            ))),
            State::Unavailable(reason) => Err(StoreError::Unavailable(reason.clone())),
        }
    }
}

impl Records for Store {
    fn availability(&self) -> Availability {
        match &*self.state.borrow() {
            State::Ready(_) => Availability::Ready,
            State::Unsupported { server_version } => Availability::Unsupported {
                server_version: server_version.clone(),
            },
            State::Unavailable(reason) => Availability::Unavailable(reason.clone()),
            State::Degraded { reason, .. } => Availability::Degraded(reason.clone()),
        }
    }

    fn last<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        let bucket = self.bucket();
        async move { bucket?.last(key).await }.boxed()
    }

    fn still_at<'a>(
        &'a self,
        key: &'a str,
        revision: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let bucket = self.bucket();
        async move { bucket?.still_at(key, revision).await }.boxed()
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        expected: u64,
        write: Write,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let bucket = self.bucket();
        async move { bucket?.write(key, expected, write).await }.boxed()
    }

    fn entries(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        let bucket = self.bucket();
        async move { bucket?.entries().await }.boxed()
    }

    /// Wakes the provisioner to check the bucket now.
    fn request_repair(&self) {
        self.repair.notify_one();
    }

    fn saw(&self, revision: u64) {
        self.highest_seen.fetch_max(revision, Ordering::Relaxed);
    }
}

/// The provisioner's half of a [`Store`].
pub(crate) struct Provisioner {
    client: Client,
    settings: BucketSettings,
    state: watch::Sender<State>,
    repair: Arc<Notify>,
    highest_seen: Arc<AtomicU64>,
}

/// A store and the provisioner that keeps it current.
pub(crate) fn store(client: Client, settings: BucketSettings) -> (Store, Provisioner) {
    let (state, rx) = watch::channel(State::Unavailable(
        "the leases bucket is not provisioned yet".into(),
    ));
    let repair = Arc::new(Notify::new());
    let highest_seen = Arc::new(AtomicU64::new(0));
    let store = Store {
        state: rx,
        repair: repair.clone(),
        highest_seen: highest_seen.clone(),
    };
    let provisioner = Provisioner {
        client,
        settings,
        state,
        repair,
        highest_seen,
    };
    (store, provisioner)
}

/// Retry delays while JetStream is unavailable: how long `/readyz` (and,
/// before the bucket ever served, every call) may go on answering
/// `unavailable` after the stream is back.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Keeps the bucket provisioned until `shutdown`, checking a ready one
/// every `recheck` (and an unsupported server's version, which may have
/// been upgraded). Returns the refusal if, before it ever served, the
/// existing bucket is one the gateway must not run on; once it has served,
/// a refusal is a reason to answer `unavailable` and try again, never to
/// stop.
pub(crate) async fn keep_provisioned(
    p: Provisioner,
    shutdown: CancellationToken,
) -> Result<(), Refusal> {
    let jetstream = JetStream::new(p.client.clone());
    let recheck = p.settings.recheck;
    let mut retry = RETRY_MIN;
    let mut last_note = String::new();
    // The first pass that finds the stream may scale it; later ones not.
    let mut scale = true;
    let mut served = false;
    loop {
        // A bucket found unfit blocks calls; one only out of reach does not.
        let mut refused = false;
        let first_seq = provision::first_seq(p.highest_seen.load(Ordering::Relaxed));
        let outcome = if p.client.connection_state() == async_nats::connection::State::Connected {
            let server_version = p.client.server_info().version;
            let pass =
                provision::provision(&jetstream, server_version, &p.settings, first_seq, scale);
            match pass.await {
                Ok(outcome) => outcome,
                Err(refusal) if !served => return Err(refusal),
                Err(refusal) => {
                    refused = true;
                    Provisioned::Unavailable(refusal.to_string())
                }
            }
        } else {
            Provisioned::Unavailable("not connected to NATS".into())
        };
        let (availability, wait, note) = match outcome {
            Provisioned::Ready { replicas, batches } => {
                retry = RETRY_MIN;
                (scale, served) = (false, true);
                // A single replica stages each batch in files of its own:
                // batching pays only where a publish is a raft proposal.
                let publisher = Publisher::new(
                    jetstream.clone(),
                    batches && replicas > 1,
                    p.settings.coalescing,
                );
                let bucket = Bucket::new(
                    jetstream.clone(),
                    publisher,
                    p.highest_seen.clone(),
                    replicas > 1,
                );
                (
                    State::Ready(Arc::new(bucket)),
                    recheck,
                    ready_note(p.settings.replicas, replicas),
                )
            }
            Provisioned::Unsupported { server_version } => {
                let note = format!(
                    "nats-server {server_version} is older than 2.11: no leases bucket, every lease call answers unsupported"
                );
                (State::Unsupported { server_version }, recheck, note)
            }
            Provisioned::Unavailable(reason) => {
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                let note = format!("leases unavailable: {reason}; retrying");
                // Calls keep going to the bucket of the last ready pass
                // until a refusal or an older server stops them.
                let state = match &*p.state.borrow() {
                    State::Ready(bucket) | State::Degraded { bucket, .. } if !refused => {
                        State::Degraded {
                            bucket: bucket.clone(),
                            reason,
                        }
                    }
                    _ => State::Unavailable(reason),
                };
                (state, wait, note)
            }
        };
        if note != last_note {
            match availability {
                State::Ready(_) if note == READY => tracing::info!("{note}"),
                _ => tracing::warn!("{note}"),
            }
            last_note = note;
        }
        p.state.send_replace(availability);
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = p.repair.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

const READY: &str = "leases bucket ready";

/// What the log says of a ready bucket: whether its replicas differ from
/// this gateway's `--replicas`, which then stands unapplied.
fn ready_note(configured: Option<usize>, replicas: u64) -> String {
    match configured {
        Some(want) if want as u64 != replicas => format!(
            "{READY} at {replicas} replicas, not this gateway's --replicas {want}: \
             a gateway scales an existing bucket only when it starts (the last one started wins), \
             so it is left as it is"
        ),
        _ => READY.to_string(),
    }
}
