//! [`ShardGroup`]: keeps this process a member of a group and owns the
//! shards the assignment gives it, publishing the owned set with fences.
//!
//! One loop per member, woken every renew period (ttl/3) and by every
//! change to the group's keys. Each round it renews its membership, reads
//! the group (one list of `G-`), computes the assignment, then per shard:
//! renews what it keeps, hands over by transfer what is assigned elsewhere
//! (it stops counting the shard as its own *before* the transfer is sent),
//! acquires what is assigned to it and free, and takes over what a
//! transfer gave it by renewing it at that fence. A shard counts as owned
//! only until `ttl` after the start of the request that last granted or
//! renewed it, on this process's monotonic clock, as for a single lease.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::sync::CancellationToken;

use super::assign::assign;
use crate::calls::{ClientError, LeaseClient};
use crate::changes;
use dagnats_leases_wire::change::{ChangeEvent, ChangeKind};
use dagnats_leases_wire::reply::{Grant, Lease};
use dagnats_leases_wire::request::{HolderId, LeaseKey, Ttl};

/// What to join.
#[derive(Debug, Clone)]
pub struct ShardOptions {
    /// The group's name; its keys are `<group>-<i>` and `<group>-member-<holder>`.
    pub group: String,
    /// How many shards the group has (keys `0..count`).
    pub count: u32,
    /// This process's holder id, unique per process.
    pub holder: String,
    /// The TTL of every shard and membership lease.
    pub ttl: Duration,
}

impl ShardOptions {
    /// Refuses a group whose keys would break the key rules (the longest
    /// shard key and the membership key must be valid keys), a holder id
    /// that is not valid, no shards, or a TTL out of bounds.
    pub fn validate(&self) -> Result<(), ClientError> {
        let invalid = ClientError::Invalid;
        if self.count == 0 {
            return Err(invalid("a shard group needs at least one shard".into()));
        }
        HolderId::try_from(self.holder.clone()).map_err(invalid)?;
        let last_shard = format!("{}-{}", self.group, self.count - 1);
        for key in [last_shard, member_key(&self.group, &self.holder)] {
            LeaseKey::try_from(key).map_err(invalid)?;
        }
        let ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        Ttl::try_from(ms).map_err(invalid)?;
        Ok(())
    }
}

/// One shard this member owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardTenure {
    /// The fence to send downstream with every write for this shard.
    pub fence: u64,
    /// The revision this member's tenure of the shard started at.
    pub tenure: u64,
    /// Owned until then, unless renewed.
    pub until: Instant,
}

/// The shards this member owns now, by index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owned {
    pub shards: BTreeMap<u32, ShardTenure>,
}

impl Owned {
    /// The shards this member may act for at this instant, with fences.
    pub fn fences(&self) -> BTreeMap<u32, u64> {
        let now = Instant::now();
        self.shards
            .iter()
            .filter(|(_, t)| now < t.until)
            .map(|(&i, t)| (i, t.fence))
            .collect()
    }
}

/// Membership of a shard group, kept in the background.
pub struct ShardGroup {
    state: watch::Receiver<Owned>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl ShardGroup {
    /// Joins `options.group` and starts owning shards; refuses options
    /// [`ShardOptions::validate`] refuses.
    pub fn start(client: LeaseClient, options: ShardOptions) -> Result<Self, ClientError> {
        Self::start_reporting(client, options, |_| {})
    }

    /// [`start`](ShardGroup::start), and `report` is called with every
    /// change of the owned set (and once with the empty set at the start),
    /// in the member's own task, before any transfer that follows the
    /// change is sent. A consumer that acts on what `report` hands it (the
    /// CLI prints it) has been told a shard is gone before its next owner
    /// can have it; a reader of [`watch`](ShardGroup::watch) is told
    /// asynchronously and must check [`Owned::fences`] before each action.
    pub fn start_reporting(
        client: LeaseClient,
        options: ShardOptions,
        mut report: impl FnMut(&Owned) + Send + Sync + 'static,
    ) -> Result<Self, ClientError> {
        options.validate()?;
        report(&Owned::default());
        let (tx, state) = watch::channel(Owned::default());
        let stop = CancellationToken::new();
        let member = Member::new(client, options, tx, Box::new(report));
        let task = tokio::spawn(member.run(stop.clone()));
        Ok(ShardGroup {
            state,
            stop,
            task: Some(task),
        })
    }

    /// The owned set as it changes (fences included): start work on a
    /// shard when it appears, stop the moment it goes.
    pub fn watch(&self) -> watch::Receiver<Owned> {
        self.state.clone()
    }

    /// Leaves the group: hands every shard to its next owner (or releases
    /// it when no member is left), then releases the membership.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ShardGroup {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Retry delay after a round that could not read the group.
const RETRY: Duration = Duration::from_millis(200);

/// The member's own state; only its loop touches it.
struct Member {
    client: LeaseClient,
    opts: ShardOptions,
    tx: watch::Sender<Owned>,
    /// Told each change before the member goes on (see `start_reporting`).
    report: Box<dyn FnMut(&Owned) + Send + Sync>,
    owned: BTreeMap<u32, ShardTenure>,
    /// The membership lease's fence, while held.
    membership: Option<(u64, Instant)>,
}

/// The group as one list read it.
struct View {
    /// Live members' holder ids, sorted.
    members: Vec<String>,
    /// Shard index to its current lease.
    shards: HashMap<u32, Lease>,
}

impl Member {
    fn new(
        client: LeaseClient,
        opts: ShardOptions,
        tx: watch::Sender<Owned>,
        report: Box<dyn FnMut(&Owned) + Send + Sync>,
    ) -> Self {
        Member {
            client,
            opts,
            tx,
            report,
            owned: BTreeMap::new(),
            membership: None,
        }
    }

    fn shard_key(&self, shard: u32) -> String {
        format!("{}-{shard}", self.opts.group)
    }

    fn member_key(&self) -> String {
        member_key(&self.opts.group, &self.opts.holder)
    }

    async fn run(mut self, stop: CancellationToken) {
        let mut changes = self
            .client
            .nats()
            .subscribe(ChangeEvent::subject(None))
            .await
            .ok();
        let period = self.opts.ttl / 3;
        loop {
            // A round that blocks (a lost connection: requests wait out
            // their timeout) must not keep a shard in the owned set past
            // its entitlement: at the earliest expiry the round is given
            // up, the expired shards dropped and the set published. Giving
            // it up is safe: a write it left in flight is one we never
            // count as ours until a later renew lands.
            let round = match self.earliest_expiry() {
                Some(until) => timeout_at(until, self.round()).await.unwrap_or_else(|_| {
                    self.drop_expired();
                    self.publish();
                    Ok(())
                }),
                None => self.round().await,
            };
            let next = match round {
                Ok(()) => Instant::now() + period,
                Err(err) => {
                    tracing::debug!(%err, group = self.opts.group, "shard group round failed");
                    Instant::now() + RETRY
                }
            };
            let wake = self.earliest_expiry().map_or(next, |until| until.min(next));
            tokio::select! {
                () = stop.cancelled() => break,
                () = sleep_until(wake) => {}
                () = group_changed(&mut changes, &self.opts.group) => {}
            }
        }
        self.leave().await;
    }

    /// One round: membership, the group's view, then every shard.
    async fn round(&mut self) -> Result<(), ClientError> {
        self.drop_expired();
        self.keep_membership().await?;
        let view = self.view().await?;
        let assignment = assign(self.opts.count, &view.members);
        for shard in 0..self.opts.count {
            let assigned = assignment
                .get(shard as usize)
                .map(|&i| view.members[i].as_str());
            let lease = view.shards.get(&shard);
            self.settle(shard, assigned, lease).await;
        }
        self.publish();
        Ok(())
    }

    /// Brings one shard in line with the assignment.
    async fn settle(&mut self, shard: u32, assigned: Option<&str>, lease: Option<&Lease>) {
        let me = self.opts.holder.as_str();
        let key = self.shard_key(shard);
        let held_by_me = lease.filter(|l| l.holder == me);
        match (held_by_me, assigned) {
            // Ours and assigned elsewhere to a live member: hand it over.
            (Some(lease), Some(next)) if next != me => {
                self.hand_over(shard, &key, lease.revision, next).await;
            }
            // Ours and renewed within the last period: nothing to do.
            (Some(lease), _) if self.renewed_lately(shard, lease.revision) => {}
            // Ours: renew it (this also takes over a shard a transfer gave
            // us: it counts as ours only once that renew lands).
            (Some(lease), _) => {
                let tenure = self.owned.get(&shard).map_or(lease.revision, |t| t.tenure);
                self.renew(shard, &key, lease.revision, tenure).await;
            }
            // Free and ours to take.
            (None, Some(next)) if next == me && lease.is_none() => {
                self.acquire(shard, &key).await;
            }
            // Held by someone who is no longer a member: it frees by TTL.
            // Held by a live member: it hands over when it sees the view.
            _ => {
                self.owned.remove(&shard);
            }
        }
    }

    /// Whether we hold `shard` at `revision` from a grant less than one
    /// renew period old.
    fn renewed_lately(&self, shard: u32, revision: u64) -> bool {
        let period = self.opts.ttl / 3;
        self.owned.get(&shard).is_some_and(|t| {
            t.fence == revision && t.until > Instant::now() + (self.opts.ttl - period)
        })
    }

    async fn acquire(&mut self, shard: u32, key: &str) {
        let started = Instant::now();
        match self
            .client
            .acquire(key, &self.opts.holder, self.opts.ttl)
            .await
        {
            Ok(Grant {
                granted: true,
                lease,
            }) => {
                self.owned.insert(
                    shard,
                    ShardTenure {
                        fence: lease.revision,
                        tenure: lease.revision,
                        until: started + self.opts.ttl,
                    },
                );
            }
            Ok(_) | Err(_) => {
                self.owned.remove(&shard);
            }
        }
    }

    async fn renew(&mut self, shard: u32, key: &str, revision: u64, tenure: u64) {
        let started = Instant::now();
        match self
            .client
            .renew(key, &self.opts.holder, revision, self.opts.ttl)
            .await
        {
            Ok(grant) => {
                self.owned.insert(
                    shard,
                    ShardTenure {
                        fence: grant.lease.revision,
                        tenure,
                        until: started + self.opts.ttl,
                    },
                );
            }
            Err(err) if err.is_lost() => {
                self.owned.remove(&shard);
            }
            // Unknown outcome: keep what we had; it runs out on its own.
            Err(_) => {}
        }
    }

    /// Stops acting for `shard` first, then transfers it to `next`.
    async fn hand_over(&mut self, shard: u32, key: &str, revision: u64, next: &str) {
        self.owned.remove(&shard);
        self.publish();
        let outcome = self
            .client
            .transfer(key, &self.opts.holder, revision, next, self.opts.ttl)
            .await;
        if let Err(err) = outcome {
            tracing::debug!(%err, key, next, "shard transfer failed; the lease runs out on its own");
        }
    }

    async fn keep_membership(&mut self) -> Result<(), ClientError> {
        let key = self.member_key();
        let started = Instant::now();
        let granted = match self.membership {
            Some((fence, _)) => {
                match self
                    .client
                    .renew(&key, &self.opts.holder, fence, self.opts.ttl)
                    .await
                {
                    Ok(grant) => Some(grant.lease.revision),
                    Err(err) if err.is_lost() => None,
                    Err(err) => return Err(err),
                }
            }
            None => None,
        };
        let fence = match granted {
            Some(fence) => fence,
            None => {
                let grant = self
                    .client
                    .acquire(&key, &self.opts.holder, self.opts.ttl)
                    .await?;
                grant.lease.revision
            }
        };
        self.membership = Some((fence, started + self.opts.ttl));
        Ok(())
    }

    async fn view(&self) -> Result<View, ClientError> {
        let prefix = format!("{}-", self.opts.group);
        let member_prefix = member_key(&self.opts.group, "");
        let mut members = BTreeSet::new();
        let mut shards = HashMap::new();
        for lease in self.client.list_all(&prefix).await? {
            if let Some(holder) = lease.key.strip_prefix(&member_prefix) {
                if holder == lease.holder {
                    members.insert(lease.holder.clone());
                }
            } else if let Some(index) = lease.key.strip_prefix(&prefix) {
                // Only `<group>-<i>` with i in range; other keys are not ours.
                if let Ok(i) = index.parse::<u32>()
                    && i < self.opts.count
                    && index == i.to_string()
                {
                    shards.insert(i, lease);
                }
            }
        }
        // We hold our membership even if the read raced it.
        if self.membership.is_some() {
            members.insert(self.opts.holder.clone());
        }
        Ok(View {
            members: members.into_iter().collect(),
            shards,
        })
    }

    fn drop_expired(&mut self) {
        let now = Instant::now();
        self.owned.retain(|_, t| now < t.until);
        if self.membership.is_some_and(|(_, until)| until <= now) {
            self.membership = None;
        }
    }

    fn earliest_expiry(&self) -> Option<Instant> {
        self.owned.values().map(|t| t.until).min()
    }

    fn publish(&mut self) {
        let owned = Owned {
            shards: self.owned.clone(),
        };
        if *self.tx.borrow() != owned {
            (self.report)(&owned);
            self.tx.send_replace(owned);
        }
    }

    /// Leaves the group: gives up the membership first, so the other
    /// members compute the assignment without us (and never hand a shard
    /// back), then hands every shard to the owner the group has without us,
    /// or releases it when we were the last member.
    async fn leave(&mut self) {
        if let Some((fence, _)) = self.membership.take() {
            let _ = self
                .client
                .release(&self.member_key(), &self.opts.holder, fence)
                .await;
        }
        let others: Vec<String> = match self.view().await {
            Ok(view) => view.members,
            Err(_) => Vec::new(),
        };
        let assignment = assign(self.opts.count, &others);
        let owned: Vec<(u32, ShardTenure)> = self.owned.iter().map(|(&i, &t)| (i, t)).collect();
        for (shard, tenure) in owned {
            let key = self.shard_key(shard);
            match assignment.get(shard as usize) {
                Some(&next) => {
                    let next = others[next].clone();
                    self.hand_over(shard, &key, tenure.fence, &next).await;
                }
                None => {
                    self.owned.remove(&shard);
                    self.publish();
                    let _ = self
                        .client
                        .release(&key, &self.opts.holder, tenure.fence)
                        .await;
                }
            }
        }
        self.publish();
    }
}

/// The membership key of `holder` in `group`.
fn member_key(group: &str, holder: &str) -> String {
    format!("{group}-member-{holder}")
}

/// Completes on the next ownership change (not a renewal, which every
/// member makes every period) of one of `group`'s keys.
async fn group_changed(changes: &mut Option<async_nats::Subscriber>, group: &str) {
    let Some(sub) = changes else {
        return std::future::pending().await;
    };
    let prefix = format!("{group}-");
    while let Some(msg) = sub.next().await {
        let change = changes::from_message(&msg);
        if change.is_some_and(|c| c.event != ChangeKind::Renewed && c.key.starts_with(&prefix)) {
            return;
        }
    }
    std::future::pending().await
}
