//! The JetStream side: the `leases` bucket, its provisioning, and whether it
//! can serve right now.
//!
//! [`Store`] is what the core holds. A background task ([`keep_provisioned`])
//! keeps its availability current: ready, unsupported (server older than
//! 2.11), or unavailable (JetStream off or unreachable, retried).

mod bucket;
mod provision;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::Client;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use bucket::{Bucket, StoreError, Write};
pub use provision::{BucketSettings, Provisioned, Refusal};

/// Whether the bucket can serve now.
#[derive(Clone)]
pub enum Availability {
    Ready(Bucket),
    Unsupported { server_version: String },
    Unavailable(String),
}

/// The bucket as the core sees it; cheap to clone.
#[derive(Clone)]
pub struct Store {
    state: watch::Receiver<Availability>,
    repair: Arc<Notify>,
}

impl Store {
    /// The bucket's current availability.
    pub fn availability(&self) -> Availability {
        self.state.borrow().clone()
    }

    /// Asks the provisioner to check the bucket now, e.g. after a write
    /// found it missing.
    pub fn request_repair(&self) {
        self.repair.notify_one();
    }
}

/// The provisioner's half of a [`Store`].
pub struct Provisioner {
    client: Client,
    settings: BucketSettings,
    state: watch::Sender<Availability>,
    repair: Arc<Notify>,
    highest_seen: Arc<AtomicU64>,
    request_timeout: Duration,
}

/// A store and the provisioner that keeps it current.
pub fn store(
    client: Client,
    settings: BucketSettings,
    request_timeout: Duration,
) -> (Store, Provisioner) {
    let (state, rx) = watch::channel(Availability::Unavailable(
        "the leases bucket is not provisioned yet".into(),
    ));
    let repair = Arc::new(Notify::new());
    let store = Store {
        state: rx,
        repair: repair.clone(),
    };
    let provisioner = Provisioner {
        client,
        settings,
        state,
        repair,
        highest_seen: Arc::new(AtomicU64::new(0)),
        request_timeout,
    };
    (store, provisioner)
}

/// How often a ready bucket is checked again, and an unsupported server's
/// version read again (it may have been upgraded).
const RECHECK: Duration = Duration::from_secs(10);
/// Retry delays while JetStream is unavailable.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Keeps the bucket provisioned until `shutdown`. Returns the refusal if an
/// existing bucket is one the gateway must not run on.
pub async fn keep_provisioned(p: Provisioner, shutdown: CancellationToken) -> Result<(), Refusal> {
    let mut retry = RETRY_MIN;
    let mut last_note = String::new();
    loop {
        let first_seq = p.highest_seen.load(Ordering::Relaxed) + 1;
        let outcome = if p.client.connection_state() == async_nats::connection::State::Connected {
            provision::provision(&p.client, &p.settings, first_seq).await?
        } else {
            Provisioned::Unavailable("not connected to NATS".into())
        };
        let (availability, wait, note) = match outcome {
            Provisioned::Ready { replicas } => {
                retry = RETRY_MIN;
                let bucket = Bucket::new(
                    p.client.clone(),
                    p.request_timeout,
                    p.highest_seen.clone(),
                    replicas > 1,
                );
                (
                    Availability::Ready(bucket),
                    RECHECK,
                    "leases bucket ready".to_string(),
                )
            }
            Provisioned::Unsupported { server_version } => {
                let note = format!(
                    "nats-server {server_version} is older than 2.11: no leases bucket, every lease call answers unsupported"
                );
                (Availability::Unsupported { server_version }, RECHECK, note)
            }
            Provisioned::Unavailable(reason) => {
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                let note = format!("leases unavailable: {reason}; retrying");
                (Availability::Unavailable(reason), wait, note)
            }
        };
        if note != last_note {
            match availability {
                Availability::Ready(_) => tracing::info!("{note}"),
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
