//! Change events: ONE subscription per gateway to
//! `dagnats.lease.changed.>`, decoded once (by the wire crate) and handed
//! to the event-stream clients whose filter wants it, each through its own
//! bounded queue (see `registry`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_nats::{Client, Subscriber};
use foldhash::{HashMap, HashMapExt};
use futures::{Stream, StreamExt};
use serde::Serialize;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use crate::core::{LeaseCore, Tenancy};
use crate::policy::Access;
use dagnats_leases_client::changes;
use dagnats_leases_wire::change::{ChangeEvent, ChangeKind};
use dagnats_leases_wire::names::CHANGED_PREFIX;
use dagnats_leases_wire::reply::{Lease, LeaseEnded};
use dagnats_leases_wire::request::LeaseKey;
use dagnats_leases_wire::timefmt;

mod registry;

use registry::Registry;
pub(crate) use registry::Subscription;

/// Bound on the keys whose last holder is remembered for `expired` events.
const LAST_HOLDERS: usize = 100_000;
/// Changes kept for a freshly opened dashboard to draw the recent past.
const RECENT: usize = 2_000;

/// A change and when this gateway saw it: the dashboard's recent past.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RecentChange {
    #[serde(flatten)]
    pub(crate) change: ChangeEvent,
    /// When this gateway received it.
    #[serde(with = "timefmt")]
    #[schema(value_type = String, format = DateTime)]
    pub(crate) at: OffsetDateTime,
}

/// Reply of `GET /v1/events/recent`, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RecentChanges {
    pub(crate) events: Vec<RecentChange>,
}

/// One change, with its data already encoded as JSON (once, however many
/// clients receive it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EncodedChange {
    pub(crate) kind: ChangeKind,
    pub(crate) key: String,
    pub(crate) revision: u64,
    /// The lease (acquired, renewed) or a [`LeaseEnded`] (released, expired).
    pub(crate) data: String,
}

impl EncodedChange {
    /// A held lease, as the change (`acquired` or `renewed`) that wrote
    /// its current record.
    pub(crate) fn held(kind: ChangeKind, lease: &Lease) -> Self {
        Self::held_from(kind, lease, None)
    }

    /// A held lease, naming the holder a transfer handed it over from.
    fn held_from(kind: ChangeKind, lease: &Lease, previous_holder: Option<&str>) -> Self {
        let data = HeldData {
            lease,
            previous_holder,
        };
        EncodedChange {
            kind,
            key: lease.key.clone(),
            revision: lease.revision,
            data: serde_json::to_string(&data).expect("a lease serializes"),
        }
    }

    fn ended(kind: ChangeKind, key: &str, revision: u64, holder: Option<String>) -> Self {
        let ended = LeaseEnded {
            key: key.to_string(),
            revision,
            holder,
        };
        EncodedChange {
            kind,
            key: key.to_string(),
            revision,
            data: serde_json::to_string(&ended).expect("an event serializes"),
        }
    }
}

/// The data of an `acquired` or `renewed` event: the lease, and for an
/// `acquired` written by a transfer, the holder it was handed over from.
#[derive(Serialize)]
struct HeldData<'a> {
    #[serde(flatten)]
    lease: &'a Lease,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_holder: Option<&'a str>,
}

/// The gateway's change feed; cheap to clone.
#[derive(Clone)]
pub(crate) struct Events {
    clients: Registry,
    recent: Arc<Mutex<VecDeque<RecentChange>>>,
}

impl Events {
    /// A feed that keeps up to `buffer` changes for a client that has not
    /// read them yet; a client further behind is dropped.
    pub(crate) fn new(buffer: usize) -> Self {
        Events {
            clients: Registry::new(buffer),
            recent: Arc::default(),
        }
    }

    /// The last changes this gateway saw (at most 2,000) of the keys
    /// `visible` admits, oldest first.
    pub(crate) fn recent(&self, visible: impl Fn(&str) -> bool) -> RecentChanges {
        let recent = self.recent.lock().expect("poisoned");
        RecentChanges {
            events: recent
                .iter()
                .filter(|recent| visible(&recent.change.key))
                .cloned()
                .collect(),
        }
    }

    fn remember(&self, change: ChangeEvent) {
        let mut recent = self.recent.lock().expect("poisoned");
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(RecentChange {
            change,
            at: OffsetDateTime::now_utc(),
        });
    }

    /// Receives the changes `filter` admits, from now on.
    pub(crate) fn subscribe(&self, filter: Filter) -> Subscription {
        self.clients.register(filter)
    }
}

/// Subscribes to every change event; returns once the server knows.
pub(crate) async fn subscribe_changes(client: &Client) -> Result<Subscriber, async_nats::Error> {
    let sub = client.subscribe(format!("{CHANGED_PREFIX}.>")).await?;
    client.flush().await?;
    Ok(sub)
}

/// Classifies every change event into `events` until `stop`, and tells
/// `core` which revision each key is at, so this gateway's next renew or
/// release of it is one round trip even when another gateway wrote last.
pub(crate) async fn relay(
    mut sub: Subscriber,
    events: Events,
    core: LeaseCore,
    stop: CancellationToken,
) {
    let mut last_holders = HashMap::new();
    loop {
        let Some(msg) = next_until(&mut sub, &stop).await else {
            return;
        };
        let written = ChangeEvent::key_of(msg.subject.as_str())
            .and_then(|key| core.take_written(key, &msg.payload));
        let Some(change) = changes::from_written_message(&msg, written) else {
            continue;
        };
        let change = with_last_holder(change, &mut last_holders);
        let tenancy = Tenancy {
            tenure: change.tenure.unwrap_or(change.revision),
            renewals: change.renewals,
        };
        let held = change.lease.as_ref().map(|lease| (lease, tenancy));
        let principal = change.principal.as_deref();
        core.observe(&change.key, change.revision, held, principal);
        events
            .clients
            .deliver(&change.key, change.event, || EncodedChange::from(&change));
        events.remember(change);
    }
}

/// The next message of `sub`; `None` once `stop` fires or the
/// subscription ends.
pub(crate) async fn next_until(
    sub: &mut Subscriber,
    stop: &CancellationToken,
) -> Option<async_nats::Message> {
    tokio::select! {
        () = stop.cancelled() => None,
        msg = sub.next() => msg,
    }
}

/// Names the last holder of a key whose lease ended (an expiry marker
/// carries none), remembering each key's holder as changes pass.
fn with_last_holder(
    mut change: ChangeEvent,
    last_holders: &mut HashMap<String, String>,
) -> ChangeEvent {
    match change.event {
        ChangeKind::Acquired | ChangeKind::Renewed => {
            if last_holders.len() >= LAST_HOLDERS {
                last_holders.clear();
            }
            // A renew names the holder already remembered: no new strings.
            match (last_holders.get_mut(&change.key), &change.holder) {
                (Some(last), Some(holder)) if last == holder => {}
                (Some(last), Some(holder)) => last.clone_from(holder),
                (None, Some(holder)) => {
                    last_holders.insert(change.key.clone(), holder.clone());
                }
                (_, None) => {}
            }
        }
        ChangeKind::Released | ChangeKind::Expired => {
            let remembered = last_holders.remove(&change.key);
            change.holder = change.holder.or(remembered);
        }
    }
    change
}

impl From<&ChangeEvent> for EncodedChange {
    fn from(change: &ChangeEvent) -> Self {
        match &change.lease {
            Some(lease) => {
                EncodedChange::held_from(change.event, lease, change.previous_holder.as_deref())
            }
            None => EncodedChange::ended(
                change.event,
                &change.key,
                change.revision,
                change.holder.clone(),
            ),
        }
    }
}

/// Which changes a client wants, of those it may see.
#[derive(Clone, Default)]
pub(crate) struct Filter {
    /// Only this key.
    pub(crate) key: Option<LeaseKey>,
    /// Drop `renewed`: only ownership changes.
    pub(crate) ownership: bool,
    /// Under a policy, only the keys its principal may read.
    pub(crate) access: Access,
}

impl Filter {
    /// Whether the client wants `change`, and may see it.
    pub(crate) fn admits(&self, key: &str, kind: ChangeKind) -> bool {
        self.key.as_ref().is_none_or(|k| k.as_str() == key)
            && !(self.ownership && kind == ChangeKind::Renewed)
            && self.access.reads(key)
    }
}

/// One client's stream: `resume` first (the current state it missed, as
/// far as the client's filter admits it), then live changes from `live`,
/// which was subscribed before `resume` was read so nothing falls in
/// between. A live change no newer than `after`, or than what `resume`
/// showed for its key, is skipped. The stream ends when the client falls
/// more than the buffer behind (it never holds more than that), or at
/// `stop`.
pub(crate) fn feed(
    live: Subscription,
    after: u64,
    resume: Vec<EncodedChange>,
    stop: CancellationToken,
) -> impl Stream<Item = Arc<EncodedChange>> {
    let resume: Vec<Arc<EncodedChange>> = resume
        .into_iter()
        .filter(|change| live.filter().admits(&change.key, change.kind))
        .map(Arc::new)
        .collect();
    let shown: HashMap<String, u64> = resume
        .iter()
        .map(|change| (change.key.clone(), change.revision))
        .collect();
    let live = futures::stream::unfold(live, |mut live| async move {
        live.recv().await.map(|change| (change, live))
    })
    .filter(move |change| {
        let fresh = change.revision > after
            && shown
                .get(&change.key)
                .is_none_or(|&seen| change.revision > seen);
        futures::future::ready(fresh)
    });
    futures::stream::iter(resume)
        .chain(live)
        .take_until(stop.cancelled_owned())
}
