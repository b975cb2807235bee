//! [`LeaseKeeper`]: holds one lease for as long as the process is healthy.
//!
//! It acquires (optionally waiting, woken by the key's change events rather
//! than polling), renews about every ttl/3, and publishes [`Ownership`]. The
//! holder rules decide when ownership ends: the moment renew answers `lost`,
//! or the moment the lease may have run out without a renewal landing. That
//! moment is measured on this process's monotonic clock from the *start* of
//! the request that granted or renewed the lease, so no reply delay or
//! clock skew can stretch it.

use std::time::Duration;

use futures::StreamExt;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::calls::LeaseClient;
use crate::changes;
use dagnats_leases_wire::change::ChangeEvent;
use dagnats_leases_wire::reply::{Grant, Lease};

/// Retry delays after a failed call that was not `lost`.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Whether this process may act as owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Not the owner: never acquired, lost, released or expired.
    NotOwner,
    /// The owner until `until`, at fence `fence`; `tenure` is the revision
    /// the acquire returned (renew raises the fence, not the tenure).
    Owner {
        tenure: u64,
        fence: u64,
        until: Instant,
    },
}

impl Ownership {
    /// The fence to send downstream, if this process may act as owner now.
    pub fn fence(&self) -> Option<u64> {
        match self {
            Ownership::Owner { fence, until, .. } if Instant::now() < *until => Some(*fence),
            _ => None,
        }
    }

    /// The tenure's first revision, if this process may act as owner now.
    pub fn tenure(&self) -> Option<u64> {
        match self {
            Ownership::Owner { tenure, until, .. } if Instant::now() < *until => Some(*tenure),
            _ => None,
        }
    }
}

/// What to keep.
#[derive(Debug, Clone)]
pub struct KeeperOptions {
    pub key: String,
    /// Unique per process.
    pub holder: String,
    pub ttl: Duration,
    /// Keep trying until granted (and again after a loss), rather than
    /// giving up when someone else holds the key.
    pub wait: bool,
}

/// A lease kept alive in the background; releases it on [`shutdown`] or
/// when dropped.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use dagnats_leases_client::{KeeperOptions, LeaseClient, LeaseKeeper};
///
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let keeper = LeaseKeeper::start(LeaseClient::new(nats), KeeperOptions {
///     key: "notify-leader".into(),
///     holder: "notify-7f3a".into(),
///     ttl: Duration::from_secs(15),
///     wait: true,
/// });
/// let mut ownership = keeper.watch();
/// loop {
///     if let Some(fence) = ownership.borrow_and_update().fence() {
///         println!("leading at fence {fence}"); // send the fence with every write
///     }
///     ownership.changed().await?;
/// }
/// # }
/// ```
///
/// [`shutdown`]: LeaseKeeper::shutdown
pub struct LeaseKeeper {
    state: watch::Receiver<Ownership>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl LeaseKeeper {
    /// Starts keeping `options.key`.
    pub fn start(client: LeaseClient, options: KeeperOptions) -> Self {
        let (tx, state) = watch::channel(Ownership::NotOwner);
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep(client, options, tx, stop.clone()));
        LeaseKeeper {
            state,
            stop,
            task: Some(task),
        }
    }

    /// Ownership as it changes. It turns to [`Ownership::NotOwner`] the
    /// moment ownership ends; [`Ownership::fence`] also checks the clock,
    /// for readers that look between changes.
    pub fn watch(&self) -> watch::Receiver<Ownership> {
        self.state.clone()
    }

    /// Ownership now.
    pub fn ownership(&self) -> Ownership {
        self.state.borrow().clone()
    }

    /// Stops renewing and releases the lease if held.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        // The task releases the lease and ends on its own.
        self.stop.cancel();
    }
}

/// The instant until which a grant entitles us to act: at most `ttl` after
/// the request started, and never past the reported `expires_at`.
fn entitled_until(started: Instant, lease: &Lease) -> Instant {
    let by_ttl = started + Duration::from_millis(lease.ttl_ms);
    let left = lease.expires_at - OffsetDateTime::now_utc();
    let by_expiry = Instant::now() + left.try_into().unwrap_or(Duration::ZERO);
    by_ttl.min(by_expiry)
}

/// Why holding ended.
enum Ended {
    Stopped,
    Lost,
}

async fn keep(
    client: LeaseClient,
    opts: KeeperOptions,
    tx: watch::Sender<Ownership>,
    stop: CancellationToken,
) {
    let mut retry = RETRY_MIN;
    loop {
        // Subscribed before the acquire, so a release that lands while
        // the acquire is in flight still wakes us.
        let mut changes = watch_frees(&client, &opts.key).await;
        let started = Instant::now();
        let grant = tokio::select! {
            () = stop.cancelled() => return,
            grant = client.acquire(&opts.key, &opts.holder, opts.ttl) => grant,
        };
        let wait_for = match grant {
            Ok(Grant {
                granted: true,
                lease,
            }) if entitled_until(started, &lease) > Instant::now() => {
                drop(changes.take());
                retry = RETRY_MIN;
                match hold(&client, &opts, &tx, &stop, started, lease).await {
                    Ended::Stopped => return,
                    Ended::Lost if !opts.wait => return,
                    Ended::Lost => continue,
                }
            }
            // Granted, but (per the conservative clock) already run out.
            Ok(Grant { granted: true, .. }) => RETRY_MIN,
            Ok(Grant { lease, .. }) => {
                if !opts.wait {
                    return;
                }
                let left = lease.expires_at - OffsetDateTime::now_utc();
                let left: Duration = left.try_into().unwrap_or(Duration::ZERO);
                left.clamp(RETRY_MIN, opts.ttl) + RETRY_MIN
            }
            Err(err) => {
                tracing::debug!(%err, key = opts.key, "acquire failed; retrying");
                retry = (retry * 2).min(RETRY_MAX);
                retry
            }
        };
        // Wake when the key is freed (released or expired), or when the
        // current lease should have run out anyway.
        tokio::select! {
            () = stop.cancelled() => return,
            () = sleep(wait_for) => {}
            () = freed(&mut changes) => {}
        }
    }
}

async fn watch_frees(client: &LeaseClient, key: &str) -> Option<async_nats::Subscriber> {
    match client
        .nats()
        .subscribe(ChangeEvent::subject(Some(key)))
        .await
    {
        Ok(sub) => Some(sub),
        Err(err) => {
            tracing::warn!(%err, "cannot watch lease changes; retrying on a timer");
            None
        }
    }
}

/// Completes on the next release or expiry of the watched key.
async fn freed(changes: &mut Option<async_nats::Subscriber>) {
    let Some(sub) = changes else {
        return std::future::pending().await;
    };
    while let Some(msg) = sub.next().await {
        let event = changes::from_message(&msg).map(|e| e.event);
        if event.is_some_and(|kind| kind.ends_tenure()) {
            return;
        }
    }
    std::future::pending().await
}

/// Renews until stopped or lost; publishes ownership as it goes.
async fn hold(
    client: &LeaseClient,
    opts: &KeeperOptions,
    tx: &watch::Sender<Ownership>,
    stop: &CancellationToken,
    started: Instant,
    lease: Lease,
) -> Ended {
    let tenure = lease.revision;
    let mut fence = lease.revision;
    let mut until = entitled_until(started, &lease);
    let mut next_renew = started + opts.ttl / 3;
    tx.send_replace(Ownership::Owner {
        tenure,
        fence,
        until,
    });
    let mut retry = RETRY_MIN;
    loop {
        tokio::select! {
            () = stop.cancelled() => return release(client, opts, tx, fence).await,
            () = sleep_until(until) => return lose(tx, "no renewal landed before the lease ran out"),
            () = sleep_until(next_renew) => {}
        }
        let started = Instant::now();
        let renewed = tokio::select! {
            () = stop.cancelled() => return release(client, opts, tx, fence).await,
            () = sleep_until(until) => return lose(tx, "no renewal landed before the lease ran out"),
            renewed = client.renew(&opts.key, &opts.holder, fence, opts.ttl) => renewed,
        };
        match renewed {
            Ok(grant) => {
                fence = grant.lease.revision;
                until = entitled_until(started, &grant.lease);
                next_renew = started + opts.ttl / 3;
                retry = RETRY_MIN;
                tx.send_replace(Ownership::Owner {
                    tenure,
                    fence,
                    until,
                });
            }
            Err(err) if err.is_lost() => return lose(tx, "renew answered lost"),
            Err(err) => {
                // Retrying with the same fence is safe: a renew whose reply
                // was lost gets the same answer again.
                tracing::debug!(%err, key = opts.key, "renew failed; retrying");
                next_renew = Instant::now() + retry;
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
}

fn lose(tx: &watch::Sender<Ownership>, why: &str) -> Ended {
    tracing::info!(why, "lease lost");
    tx.send_replace(Ownership::NotOwner);
    Ended::Lost
}

async fn release(
    client: &LeaseClient,
    opts: &KeeperOptions,
    tx: &watch::Sender<Ownership>,
    fence: u64,
) -> Ended {
    tx.send_replace(Ownership::NotOwner);
    if let Err(err) = client.release(&opts.key, &opts.holder, fence).await {
        tracing::info!(%err, key = opts.key, "release on shutdown failed; the TTL will free the key");
    }
    Ended::Stopped
}
