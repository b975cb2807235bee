//! The fencing rules renew, release and transfer share: a write runs only
//! while the caller holds the key at the fence it names, and a write that
//! races the lease's expiry is refused, before it is sent and after it is
//! acknowledged (docs/protocol.md, Operations).

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use time::OffsetDateTime;

use super::caller::{Caller, tenure_principal};
use super::error::LeaseError;
use super::known::{Known, Tenancy};
use super::lease_core::{LeaseCore, MAX_ROUNDS, contention};
use super::ports::{Records, StoreError};
use dagnats_leases_wire::record::{Entry, LeaseRecord};
use dagnats_leases_wire::reply::Grant;
use dagnats_leases_wire::request::{HolderId, Revision};

/// How close to its expiry a lease may be renewed: beyond this, the renew
/// could land after the server's expiry is due. It also absorbs clock skew
/// between this gateway and the server.
pub(super) const EXPIRY_MARGIN: Duration = Duration::from_millis(250);

/// What a renew, release or transfer claims: that `holder` holds `key` at
/// `revision`, in a tenure `caller` may act on.
pub(super) struct Claim<'a> {
    key: &'a str,
    holder: &'a HolderId,
    revision: Revision,
    caller: &'a Caller,
}

impl<'a> Claim<'a> {
    pub(super) fn new(
        key: &'a str,
        holder: &'a HolderId,
        revision: Revision,
        caller: &'a Caller,
    ) -> Self {
        Claim {
            key,
            holder,
            revision,
            caller,
        }
    }
}

impl LeaseCore {
    /// `write` runs only while the claim holds: its holder holds the key at
    /// its revision, known from this gateway's own writes and events (one
    /// round trip) or else read through the leader, and its caller may act
    /// on that tenure (`forbidden` otherwise, even at the right fence). A
    /// retry whose first write already landed gets `landed`'s answer, under
    /// the same check; anything else is `lost`.
    pub(super) async fn fenced<'a, T>(
        &self,
        bucket: &dyn Records,
        claim: Claim<'_>,
        write: impl Fn(Known) -> BoxFuture<'a, Result<T, StoreError>>,
        landed: impl Fn(&Entry) -> Option<T>,
    ) -> Result<T, LeaseError> {
        let Claim {
            key,
            holder,
            revision,
            caller,
        } = claim;
        if let Some(known) = self.known.at(key, revision.get()) {
            if known.holder != holder.as_str() {
                return Err(lost(key, holder, revision));
            }
            caller.check_tenure(key, known.principal.as_deref())?;
            match write(known).await {
                Err(StoreError::Conflict) => {}
                done => return done.map_err(|err| self.store_error(err)),
            }
        }
        for _ in 0..MAX_ROUNDS {
            let entry = self.read(bucket, key).await?;
            match &entry {
                Some(Entry::Held {
                    seq,
                    record,
                    stored_at,
                    ..
                }) if *seq == revision.get() && record.holder == holder.as_str() => {
                    let principal = record.principal.as_deref();
                    caller.check_tenure(key, principal)?;
                    let lease = record.lease(key, *seq, Some(*stored_at));
                    let tenure = (Tenancy::of(*seq, record), principal);
                    match write(Known::of(*seq, &lease, tenure)).await {
                        Err(StoreError::Conflict) => continue,
                        done => return done.map_err(|err| self.store_error(err)),
                    }
                }
                Some(entry) => {
                    let again = landed(entry).ok_or_else(|| lost(key, holder, revision))?;
                    caller.check_tenure(key, tenure_principal(entry))?;
                    return Ok(again);
                }
                None => return Err(lost(key, holder, revision)),
            }
        }
        Err(contention(key))
    }

    /// Renew's and transfer's step: the `grant`'s write, [`fenced`] at
    /// `claim` and [`clear_of_expiry`] of the lease it replaces.
    /// `write_for` makes, from what is known of the held lease, the write
    /// (given the moment after which it must not be sent) and what undoes
    /// it when acknowledged too late. A retry whose first write already
    /// landed gets its grant again: the key's current record is one that
    /// `written_by_it` recognises, written over the claimed revision.
    ///
    /// [`fenced`]: LeaseCore::fenced
    pub(super) async fn fenced_grant<W, WF, U, UF>(
        &self,
        grant: NewGrant,
        bucket: &dyn Records,
        claim: Claim<'_>,
        write_for: impl Fn(Known) -> (W, U),
        written_by_it: impl Fn(&LeaseRecord) -> bool,
    ) -> Result<Grant, LeaseError>
    where
        W: FnOnce(OffsetDateTime) -> WF + Send,
        WF: Future<Output = Result<Grant, StoreError>> + Send,
        U: FnOnce(Grant) -> UF + Send,
        UF: Future<Output = ()> + Send,
    {
        let (key, holder, revision) = (claim.key, claim.holder, claim.revision);
        let lost = || lost(key, holder, revision);
        let lost = &lost;
        let fence = (key, revision.get());
        let write = |held: Known| {
            let expires_at = held.expires_at;
            let (write, undo) = write_for(held);
            clear_of_expiry(grant.name(), fence, expires_at, lost, write, undo).boxed()
        };
        let landed = |entry: &Entry| granted_again(key, entry, grant, fence.1, &written_by_it);
        self.fenced(bucket, claim, write, landed).await?
    }
}

/// Which new grant [`LeaseCore::fenced_grant`] writes.
#[derive(Clone, Copy)]
pub(super) enum NewGrant {
    Renewal,
    Transfer,
}

impl NewGrant {
    /// The operation's name, for the log.
    fn name(self) -> &'static str {
        match self {
            NewGrant::Renewal => "renew",
            NewGrant::Transfer => "transfer",
        }
    }

    /// Whether its write leaves a renewed record: a transfer starts a tenure.
    fn renewed(self) -> bool {
        matches!(self, NewGrant::Renewal)
    }
}

/// The grant a retried renew or transfer answers when its first write
/// already landed and its reply was lost: `entry`, the key's current one,
/// is a held record as `grant`'s write leaves it, written over `prev`, that
/// `written_by_it` recognises.
fn granted_again(
    key: &str,
    entry: &Entry,
    grant: NewGrant,
    prev: u64,
    written_by_it: impl Fn(&LeaseRecord) -> bool,
) -> Option<Result<Grant, LeaseError>> {
    match entry {
        Entry::Held {
            seq,
            renewed,
            record,
            stored_at,
        } if *renewed == grant.renewed() && record.prev == prev && written_by_it(record) => {
            Some(Ok(Grant {
                granted: true,
                lease: record.lease(key, *seq, Some(*stored_at)),
            }))
        }
        _ => None,
    }
}

pub(super) fn lost(key: &str, holder: &HolderId, revision: Revision) -> LeaseError {
    LeaseError::Lost(format!(
        "{} does not hold {key} at revision {}: it expired, was released, was taken, or the revision is stale",
        holder.as_str(),
        revision.get()
    ))
}

/// The last moment a write renewing (or moving) a lease due at
/// `expires_at` may be sent.
fn send_by(expires_at: OffsetDateTime) -> OffsetDateTime {
    expires_at - EXPIRY_MARGIN
}

pub(super) fn too_late(expires_at: OffsetDateTime) -> bool {
    OffsetDateTime::now_utc() >= send_by(expires_at)
}

/// A fenced `write` of a lease due to expire at `expires_at`, refused
/// (`lost`) before it is sent and after it is acknowledged when it races
/// that expiry: nats-server acknowledges a write that replaces a message
/// whose TTL has run out but is not yet expired, then the overdue expiry's
/// marker (a subject rollup) erases that write, so nobody may count on a
/// write acknowledged that late; `undo` runs on it before the refusal.
///
/// `write` gets the moment after which it must not be sent: one that
/// waited in this gateway's queue that long is never sent, and is `lost`.
async fn clear_of_expiry<T, W, U>(
    what: &str,
    (key, revision): (&str, u64),
    expires_at: OffsetDateTime,
    lost: impl Fn() -> LeaseError,
    write: impl FnOnce(OffsetDateTime) -> W,
    undo: impl FnOnce(T) -> U,
) -> Result<Result<T, LeaseError>, StoreError>
where
    W: Future<Output = Result<T, StoreError>>,
    U: Future<Output = ()>,
{
    if too_late(expires_at) {
        return Ok(Err(lost()));
    }
    let done = match write(send_by(expires_at)).await {
        Err(StoreError::TooLate) => return Ok(Err(lost())),
        done => done?,
    };
    if too_late(expires_at) {
        tracing::warn!(
            key,
            revision,
            what,
            "acknowledged after the lease was due to expire: answered lost"
        );
        undo(done).await;
        return Ok(Err(lost()));
    }
    Ok(Ok(done))
}
