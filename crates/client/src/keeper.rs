//! [`LeaseKeeper`]: holds one lease for as long as the process is healthy.
//!
//! It acquires (optionally waiting, woken by the key's change events rather
//! than polling), renews about every ttl/3, and publishes [`Ownership`]. The
//! holder rules decide when ownership ends: the moment renew answers `lost`,
//! or the moment the lease may have run out without a renewal landing. That
//! moment is measured on this process's monotonic clock from the *start* of
//! the request that granted or renewed the lease, so no reply delay or
//! clock skew can stretch it.
//!
//! Handing over is one transfer: [`LeaseKeeper::hand_off`] stops acting as
//! owner, then transfers; a keeper waiting for the key that the transfer
//! names takes it over at the transferred fence, without an acquire and
//! with no moment in which the key is free. Its entitlement starts like any
//! other, from the start of a request of its own: the renew at that fence
//! it sends the moment it sees the transfer (the transfer's own reply went
//! to the previous holder, and the change event says when the write was
//! seen, not when it was made).

use std::time::Duration;

use futures::StreamExt;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::calls::{ClientError, LeaseClient};
use crate::changes;
use dagnats_leases_wire::change::{ChangeEvent, ChangeKind};
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::reply::{Grant, Lease};
use dagnats_leases_wire::request::HolderId;

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
    holder: String,
    state: watch::Receiver<Ownership>,
    stop: CancellationToken,
    hand_offs: mpsc::UnboundedSender<HandOff>,
    task: Option<JoinHandle<()>>,
}

/// A request to hand the lease over to `to`, and where its answer goes.
struct HandOff {
    to: String,
    reply: oneshot::Sender<Result<Grant, ClientError>>,
}

/// The answer to a hand-off while this keeper is not the owner.
fn not_the_owner() -> ClientError {
    ClientError::Lease {
        kind: Kind::Lost,
        message: "this keeper does not hold the lease".into(),
        holder: None,
        revision: None,
    }
}

impl LeaseKeeper {
    /// Starts keeping `options.key`.
    pub fn start(client: LeaseClient, options: KeeperOptions) -> Self {
        Self::spawn(client, options, None)
    }

    /// Keeps a lease this process was just granted, by a request that
    /// started at `started` (for example the first granted of several
    /// keys): it holds from that request on, so its entitlement counts
    /// from it, with no second acquire. When `options.wait` is set, it
    /// waits for the key again after a loss, as [`LeaseKeeper::start`]
    /// does.
    pub fn holding(
        client: LeaseClient,
        options: KeeperOptions,
        started: Instant,
        lease: Lease,
    ) -> Self {
        Self::spawn(client, options, Some((started, lease)))
    }

    fn spawn(
        client: LeaseClient,
        options: KeeperOptions,
        granted: Option<(Instant, Lease)>,
    ) -> Self {
        // A keeper started holding owns from the first look at it.
        let now = match &granted {
            Some((started, lease)) if entitled_until(*started, lease) > Instant::now() => {
                Ownership::Owner {
                    tenure: lease.revision,
                    fence: lease.revision,
                    until: entitled_until(*started, lease),
                }
            }
            _ => Ownership::NotOwner,
        };
        let (tx, state) = watch::channel(now);
        let holder = options.holder.clone();
        let stop = CancellationToken::new();
        let (hand_offs, requests) = mpsc::unbounded_channel();
        let task = tokio::spawn(
            Task {
                client,
                opts: options,
                tx,
                stop: stop.clone(),
                hand_offs: requests,
            }
            .keep(granted),
        );
        LeaseKeeper {
            holder,
            state,
            stop,
            hand_offs,
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

    /// The fence to send with a write now, or `None` when this process may
    /// not act as owner now (checked against the clock on every call).
    pub fn fence(&self) -> Option<u64> {
        self.state.borrow().fence()
    }

    /// The tenure's first revision, or `None` when not the owner now.
    pub fn tenure(&self) -> Option<u64> {
        self.state.borrow().tenure()
    }

    /// Waits until this keeper owns the lease and returns the fence; `lost`
    /// if the keeper stopped first (not waiting, or shut down). Bound it
    /// with `tokio::time::timeout`.
    pub async fn wait_owner(&self) -> Result<u64, ClientError> {
        let mut state = self.state.clone();
        loop {
            if let Some(fence) = state.borrow_and_update().fence() {
                return Ok(fence);
            }
            if state.changed().await.is_err() {
                return Err(not_the_owner());
            }
        }
    }

    /// Hands the lease over to `to` and stops: ownership turns to
    /// [`Ownership::NotOwner`] first, then one transfer at the current fence
    /// makes `to` the holder (a keeper of `to` waiting for the key takes it
    /// over). The reply is `to`'s new lease. `lost` if this keeper does not
    /// hold the lease; on any other failure the lease is released, as by
    /// [`shutdown`](LeaseKeeper::shutdown), so `to` can acquire it. A `to`
    /// that is not another valid holder id is `invalid` before anything
    /// happens, and the keeper goes on keeping the lease.
    pub async fn hand_off(&mut self, to: &str) -> Result<Grant, ClientError> {
        if to == self.holder || HolderId::try_from(to.to_string()).is_err() {
            return Err(ClientError::Invalid(format!(
                "a hand-off needs another valid holder id than {}, got {to:?}",
                self.holder
            )));
        }
        let (reply, answer) = oneshot::channel();
        let request = HandOff {
            to: to.to_string(),
            reply,
        };
        let outcome = match self.hand_offs.send(request) {
            Ok(()) => answer.await.unwrap_or_else(|_| Err(not_the_owner())),
            Err(_) => Err(not_the_owner()),
        };
        self.stop_task().await;
        outcome
    }

    /// Stops renewing and releases the lease if held.
    pub async fn shutdown(mut self) {
        self.stop_task().await;
    }

    async fn stop_task(&mut self) {
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

/// What ended a wait for the key.
enum Woken {
    /// Released, expired, or the wait ran out: try to acquire.
    Retry,
    /// A transfer made us the holder at this fence.
    TransferredToUs(u64),
}

/// What a holder does next.
enum Step {
    Stop,
    RanOut,
    Renew,
    HandOff(HandOff),
}

/// The keeper's background task: what it works with, whatever it does.
struct Task {
    client: LeaseClient,
    opts: KeeperOptions,
    tx: watch::Sender<Ownership>,
    stop: CancellationToken,
    hand_offs: mpsc::UnboundedReceiver<HandOff>,
}

impl Task {
    async fn keep(mut self, granted: Option<(Instant, Lease)>) {
        if let Some((started, lease)) = granted {
            // Per the conservative clock it may have run out already.
            let ended = if entitled_until(started, &lease) > Instant::now() {
                self.hold(started, lease.revision, lease).await
            } else {
                self.lose("the grant had run out before it was kept")
            };
            match ended {
                Ended::Lost if self.opts.wait => {}
                Ended::Lost | Ended::Stopped => return,
            }
        }
        let mut retry = RETRY_MIN;
        let mut transferred: Option<u64> = None;
        // When this wait for the key began: each try says how long ago.
        let mut waiting_since: Option<Instant> = None;
        loop {
            // Subscribed before the acquire, so a release that lands while
            // the acquire is in flight still wakes us.
            let mut changes = watch_changes(&self.client, &self.opts.key).await;
            let started = Instant::now();
            // A transfer named us: renewing at its fence is the request our
            // entitlement counts from; otherwise, acquire.
            let taking_over = transferred.take();
            let waited = self
                .opts
                .wait
                .then(|| started - *waiting_since.get_or_insert(started));
            let grant = {
                let (client, opts) = (&self.client, &self.opts);
                let call = async {
                    match (taking_over, waited) {
                        (Some(fence), _) => {
                            client.renew(&opts.key, &opts.holder, fence, opts.ttl).await
                        }
                        (None, Some(waited)) => {
                            let (key, holder) = (&opts.key, &opts.holder);
                            client.acquire_waited(key, holder, opts.ttl, waited).await
                        }
                        (None, None) => client.acquire(&opts.key, &opts.holder, opts.ttl).await,
                    }
                };
                tokio::pin!(call);
                tokio::select! {
                    () = self.stop.cancelled() => {
                        // What the call in flight is granted is released,
                        // not left held until its TTL.
                        if let Ok(Grant { granted: true, lease }) = call.await {
                            self.release(lease.revision).await;
                        }
                        return;
                    }
                    grant = &mut call => grant,
                }
            };
            let wait_for = match grant {
                Ok(Grant {
                    granted: true,
                    lease,
                }) if entitled_until(started, &lease) > Instant::now() => {
                    drop(changes.take());
                    retry = RETRY_MIN;
                    waiting_since = None;
                    let tenure = taking_over.unwrap_or(lease.revision);
                    match self.hold(started, tenure, lease).await {
                        Ended::Stopped => return,
                        Ended::Lost if !self.opts.wait => return,
                        Ended::Lost => continue,
                    }
                }
                // Granted, but (per the conservative clock) already run out.
                Ok(Grant { granted: true, .. }) => RETRY_MIN,
                Ok(Grant { lease, .. }) => {
                    if !self.opts.wait {
                        return;
                    }
                    let left = lease.expires_at - OffsetDateTime::now_utc();
                    let left: Duration = left.try_into().unwrap_or(Duration::ZERO);
                    left.clamp(RETRY_MIN, self.opts.ttl) + RETRY_MIN
                }
                // The transfer was overtaken (released, revoked, moved on).
                Err(err) if err.is_lost() => RETRY_MIN,
                Err(err) => {
                    tracing::debug!(%err, key = self.opts.key, "acquire or takeover failed; retrying");
                    // A takeover's renew is retried as it was sent: the same
                    // renew answers the same, whether or not it landed.
                    transferred = taking_over;
                    retry = (retry * 2).min(RETRY_MAX);
                    retry
                }
            };
            // Wake when the key is freed (released or expired) or handed to
            // us, or when the current lease should have run out anyway.
            let deadline = Instant::now() + wait_for;
            loop {
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    () = sleep_until(deadline) => break,
                    woken = woken(&mut changes, &self.opts.holder) => {
                        if let Woken::TransferredToUs(fence) = woken {
                            transferred = Some(fence);
                        }
                        break;
                    }
                    Some(request) = self.hand_offs.recv() => {
                        let _ = request.reply.send(Err(not_the_owner()));
                    }
                }
            }
        }
    }

    /// Renews until stopped, lost or handed off; publishes ownership as it
    /// goes.
    async fn hold(&mut self, started: Instant, tenure: u64, lease: Lease) -> Ended {
        let mut fence = lease.revision;
        let mut until = entitled_until(started, &lease);
        let mut next_renew = started + self.opts.ttl / 3;
        self.tx.send_replace(Ownership::Owner {
            tenure,
            fence,
            until,
        });
        let mut retry = RETRY_MIN;
        loop {
            let step = tokio::select! {
                () = self.stop.cancelled() => Step::Stop,
                () = sleep_until(until) => Step::RanOut,
                () = sleep_until(next_renew) => Step::Renew,
                Some(request) = self.hand_offs.recv() => Step::HandOff(request),
            };
            match step {
                Step::Stop => return self.release(fence).await,
                Step::RanOut => return self.lose("no renewal landed before the lease ran out"),
                Step::HandOff(request) => return self.hand_off(fence, request).await,
                Step::Renew => {}
            }
            let started = Instant::now();
            let (client, opts) = (&self.client, &self.opts);
            let renew = client.renew(&opts.key, &opts.holder, fence, opts.ttl);
            tokio::pin!(renew);
            let renewed = tokio::select! {
                () = self.stop.cancelled() => {
                    // Released at the fence the renew in flight lands at.
                    let fence = renew.await.map_or(fence, |grant| grant.lease.revision);
                    return self.release(fence).await;
                }
                () = sleep_until(until) => return self.lose("no renewal landed before the lease ran out"),
                renewed = &mut renew => renewed,
            };
            match renewed {
                Ok(grant) => {
                    fence = grant.lease.revision;
                    until = entitled_until(started, &grant.lease);
                    next_renew = started + self.opts.ttl / 3;
                    retry = RETRY_MIN;
                    self.tx.send_replace(Ownership::Owner {
                        tenure,
                        fence,
                        until,
                    });
                }
                Err(err) if err.is_lost() => return self.lose("renew answered lost"),
                Err(err) => {
                    // Retrying with the same fence is safe: a renew whose reply
                    // was lost gets the same answer again.
                    tracing::debug!(%err, key = self.opts.key, "renew failed; retrying");
                    next_renew = Instant::now() + retry;
                    retry = (retry * 2).min(RETRY_MAX);
                }
            }
        }
    }

    fn lose(&self, why: &str) -> Ended {
        tracing::info!(why, "lease lost");
        self.tx.send_replace(Ownership::NotOwner);
        Ended::Lost
    }

    async fn release(&self, fence: u64) -> Ended {
        self.tx.send_replace(Ownership::NotOwner);
        let opts = &self.opts;
        if let Err(err) = self.client.release(&opts.key, &opts.holder, fence).await {
            tracing::info!(%err, key = opts.key, "release on shutdown failed; the TTL will free the key");
        }
        Ended::Stopped
    }

    /// Stops acting as owner, then transfers at `fence`. A failure that is
    /// not `lost` may or may not have moved the lease: the release that
    /// follows frees it if it did not (and is refused if it did).
    async fn hand_off(&self, fence: u64, request: HandOff) -> Ended {
        self.tx.send_replace(Ownership::NotOwner);
        let opts = &self.opts;
        let moved = self
            .client
            .transfer(&opts.key, &opts.holder, fence, &request.to, opts.ttl)
            .await;
        if let Err(err) = &moved
            && !err.is_lost()
        {
            tracing::info!(%err, key = opts.key, to = request.to, "hand-off failed; releasing");
            self.release(fence).await;
        }
        let _ = request.reply.send(moved);
        Ended::Stopped
    }
}

async fn watch_changes(client: &LeaseClient, key: &str) -> Option<async_nats::Subscriber> {
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

/// Completes on the next release or expiry of the watched key, or on a
/// transfer of it to `holder`.
async fn woken(changes: &mut Option<async_nats::Subscriber>, holder: &str) -> Woken {
    let Some(sub) = changes else {
        return std::future::pending().await;
    };
    while let Some(msg) = sub.next().await {
        let Some(change) = changes::from_message(&msg) else {
            continue;
        };
        if change.event.ends_tenure() {
            return Woken::Retry;
        }
        if change.event == ChangeKind::Acquired && change.holder.as_deref() == Some(holder) {
            return Woken::TransferredToUs(change.revision);
        }
    }
    std::future::pending().await
}
