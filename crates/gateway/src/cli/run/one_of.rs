//! Taking one of several keys (the slots of a semaphore, or one key),
//! whichever is granted first, woken by the keys' change events rather
//! than polling.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::SelectAll;
use time::OffsetDateTime;
use tokio::time::{Instant, sleep_until};

use dagnats_leases_client::{ChangeEvent, ChangeKind, ClientError, LeaseClient};
use dagnats_leases_wire::reply::Lease;

/// Retry delays after a failed acquire.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A key this process was granted, and when the request that granted it
/// started (its entitlement counts from there).
pub(super) struct Granted {
    pub(super) key: String,
    pub(super) started: Instant,
    pub(super) lease: Lease,
}

/// What the wait for a key ended with.
pub(super) enum Taken {
    Granted(Granted),
    /// Every key is held by someone else, and the caller would not wait.
    AllHeld,
}

/// Acquires the first of `keys` that is free; with `wait`, waits until
/// one is. Subscribed to every key's changes before the first acquire, so
/// a release that lands meanwhile still wakes it; woken on a release or an
/// expiry (that key is tried first), on a transfer to `holder`, or at the
/// earliest expiry of the leases it saw, in case an event was lost. A
/// waiting try says how long the wait has lasted, so the gateway counts it
/// once granted (docs/protocol.md, Tenure history).
pub(super) async fn take_one(
    client: &LeaseClient,
    keys: &[String],
    holder: &str,
    ttl: Duration,
    wait: bool,
) -> Result<Taken, ClientError> {
    let mut changes = subscribe(client, keys).await?;
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let mut retry = RETRY_MIN;
    let first_try = Instant::now();
    loop {
        let mut wake = Instant::now() + ttl;
        let mut failure = None;
        for &i in &order {
            let started = Instant::now();
            let asked = if wait {
                let waited = started - first_try;
                client.acquire_waited(&keys[i], holder, ttl, waited).await
            } else {
                client.acquire(&keys[i], holder, ttl).await
            };
            match asked {
                Ok(grant) if grant.granted => {
                    return Ok(Taken::Granted(Granted {
                        key: keys[i].clone(),
                        started,
                        lease: grant.lease,
                    }));
                }
                Ok(grant) => wake = wake.min(expiry(&grant.lease)),
                Err(err) => failure = Some(err),
            }
        }
        match (wait, failure) {
            (false, Some(err)) => return Err(err),
            (false, None) => return Ok(Taken::AllHeld),
            (true, Some(err)) => {
                tracing::debug!(%err, "acquire failed; retrying");
                wake = Instant::now() + retry;
                retry = (retry * 2).min(RETRY_MAX);
            }
            (true, None) => retry = RETRY_MIN,
        }
        let freed = tokio::select! {
            () = sleep_until(wake) => None,
            freed = next_freed(&mut changes, keys, holder) => freed,
        };
        if let Some(first) = freed {
            order.retain(|&i| i != first);
            order.insert(0, first);
        }
    }
}

type Changes = SelectAll<async_nats::Subscriber>;

async fn subscribe(client: &LeaseClient, keys: &[String]) -> Result<Changes, ClientError> {
    let nats = client.nats();
    let mut changes = SelectAll::new();
    for key in keys {
        let sub = nats
            .subscribe(ChangeEvent::subject(Some(key)))
            .await
            .map_err(|err| ClientError::Nats(err.to_string()))?;
        changes.push(sub);
    }
    nats.flush()
        .await
        .map_err(|err| ClientError::Nats(err.to_string()))?;
    Ok(changes)
}

/// The index of the next key freed (released, expired) or transferred to
/// `holder`.
async fn next_freed(changes: &mut Changes, keys: &[String], holder: &str) -> Option<usize> {
    while let Some(msg) = changes.next().await {
        let Some(change) = dagnats_leases_client::changes::from_message(&msg) else {
            continue;
        };
        let ours = change.event == ChangeKind::Acquired && change.holder.as_deref() == Some(holder);
        if change.event.ends_tenure() || ours {
            return keys.iter().position(|k| *k == change.key);
        }
    }
    std::future::pending().await
}

/// When `lease` should have run out, by its own `expires_at`, a little
/// after so the server's expiry has landed.
fn expiry(lease: &Lease) -> Instant {
    let left = lease.expires_at - OffsetDateTime::now_utc();
    let left: Duration = left.try_into().unwrap_or(Duration::ZERO);
    Instant::now() + left.max(RETRY_MIN) + RETRY_MIN
}
