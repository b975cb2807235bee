//! Change events: ONE subscription per gateway to
//! `dagnats.lease.changed.>`, classified once and fanned out to every
//! event-stream client through a bounded broadcast channel.
//!
//! How a republished write is told apart: `Dagnats-Lease-Event` says
//! acquired, renewed or released; the server's `Nats-Marker-Reason: MaxAge`
//! marker says expired. A release is a purge with a TTL, which the server
//! removes without a marker, so a released key never later shows as expired.

use std::collections::HashMap;
use std::sync::Arc;

use async_nats::{Client, Message, Subscriber};
use futures::{Stream, StreamExt};
use time::OffsetDateTime;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::core::model::{Lease, LeaseEnded, LeaseKey};
use crate::core::timefmt;
use crate::protocol::{CHANGED_PREFIX, HEADER_MARKER_REASON};
use crate::store::record::{Entry, LeaseEvent, decode_entry};

/// Header the server adds to a republished message: its stream sequence,
/// which is the key's revision.
const HEADER_SEQUENCE: &str = "Nats-Sequence";
/// Header the server adds to a republished message: when it was stored.
const HEADER_TIMESTAMP: &str = "Nats-Time-Stamp";
/// Bound on the keys whose last holder is remembered for `expired` events.
const LAST_HOLDERS: usize = 100_000;

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Acquired,
    Renewed,
    Released,
    Expired,
}

impl ChangeKind {
    /// The event name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Acquired => "acquired",
            ChangeKind::Renewed => "renewed",
            ChangeKind::Released => "released",
            ChangeKind::Expired => "expired",
        }
    }
}

/// One change, with its data already encoded as JSON (once, however many
/// clients receive it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub key: String,
    pub revision: u64,
    /// The lease (acquired, renewed) or a [`LeaseEnded`] (released, expired).
    pub data: String,
}

impl Change {
    /// The event that wrote a held lease's current record.
    pub fn held(event: LeaseEvent, lease: &Lease) -> Self {
        let kind = match event {
            LeaseEvent::Renewed => ChangeKind::Renewed,
            LeaseEvent::Acquired | LeaseEvent::Released => ChangeKind::Acquired,
        };
        Change {
            kind,
            key: lease.key.clone(),
            revision: lease.revision,
            data: serde_json::to_string(lease).expect("a lease serializes"),
        }
    }

    fn ended(kind: ChangeKind, key: &str, revision: u64, holder: Option<String>) -> Self {
        let ended = LeaseEnded {
            key: key.to_string(),
            revision,
            holder,
        };
        Change {
            kind,
            key: key.to_string(),
            revision,
            data: serde_json::to_string(&ended).expect("an event serializes"),
        }
    }
}

/// The gateway's change feed; cheap to clone.
#[derive(Clone)]
pub struct Events {
    tx: broadcast::Sender<Arc<Change>>,
}

impl Events {
    /// A feed that keeps up to `buffer` changes for a client that has not
    /// read them yet; a client further behind is dropped.
    pub fn new(buffer: usize) -> Self {
        Events {
            tx: broadcast::channel(buffer).0,
        }
    }

    /// Receives every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }
}

/// Subscribes to every change event; returns once the server knows.
pub async fn subscribe(client: &Client) -> Result<Subscriber, async_nats::Error> {
    let sub = client.subscribe(format!("{CHANGED_PREFIX}.>")).await?;
    client.flush().await?;
    Ok(sub)
}

/// Classifies every change event into `events` until `stop`.
pub async fn relay(mut sub: Subscriber, events: Events, stop: CancellationToken) {
    let mut last_holders = HashMap::new();
    loop {
        let msg = tokio::select! {
            () = stop.cancelled() => return,
            msg = sub.next() => match msg {
                Some(msg) => msg,
                None => return,
            },
        };
        if let Some(change) = classify(&msg, &mut last_holders) {
            // No receivers is fine: nobody is watching right now.
            let _ = events.tx.send(Arc::new(change));
        }
    }
}

/// What a republished write means, remembering each key's last holder so
/// an expiry can name it.
fn classify(msg: &Message, last_holders: &mut HashMap<String, String>) -> Option<Change> {
    let key = msg
        .subject
        .as_str()
        .strip_prefix(CHANGED_PREFIX)?
        .strip_prefix('.')?;
    let headers = msg.headers.as_ref()?;
    let header = |name: &str| headers.get(name).map(|v| v.as_str());
    let Some(revision) = header(HEADER_SEQUENCE).and_then(|v| v.parse::<u64>().ok()) else {
        tracing::warn!(key, "change event without a revision ignored");
        return None;
    };
    if header(HEADER_MARKER_REASON).is_some() {
        let holder = last_holders.remove(key);
        return Some(Change::ended(ChangeKind::Expired, key, revision, holder));
    }
    let stored_at = header(HEADER_TIMESTAMP)
        .and_then(|at| timefmt::parse(at).ok())
        .unwrap_or_else(OffsetDateTime::now_utc);
    match decode_entry(revision, stored_at, header, &msg.payload) {
        Ok(Entry::Held {
            seq,
            event,
            record,
            stored_at,
        }) => {
            if last_holders.len() >= LAST_HOLDERS {
                last_holders.clear();
            }
            last_holders.insert(key.to_string(), record.holder.clone());
            let lease = record.lease(key, seq, Some(stored_at));
            Some(Change::held(event, &lease))
        }
        Ok(Entry::Free { seq, released }) => {
            let remembered = last_holders.remove(key);
            let holder = released.map(|r| r.holder).or(remembered);
            Some(Change::ended(ChangeKind::Released, key, seq, holder))
        }
        Err(cause) => {
            tracing::warn!(key, revision, %cause, "change event that does not parse ignored");
            None
        }
    }
}

/// Which changes a client wants.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this key.
    pub key: Option<LeaseKey>,
    /// Drop `renewed`: only ownership changes.
    pub ownership: bool,
}

impl Filter {
    /// Whether the client wants `change`.
    pub fn admits(&self, change: &Change) -> bool {
        self.key.as_ref().is_none_or(|k| k.as_str() == change.key)
            && !(self.ownership && change.kind == ChangeKind::Renewed)
    }
}

/// One client's stream: `resume` first (the current state it missed), then
/// live changes from `live`, which was subscribed before `resume` was read
/// so nothing falls in between. Both pass `filter`. A live change no newer
/// than `after`, or than what `resume` showed for its key, is skipped. The
/// stream ends when the client falls more than the buffer behind (it never
/// holds more than that), or at `stop`.
pub fn feed(
    live: broadcast::Receiver<Arc<Change>>,
    filter: Filter,
    after: u64,
    resume: Vec<Change>,
    stop: CancellationToken,
) -> impl Stream<Item = Arc<Change>> {
    let shown: HashMap<String, u64> = resume
        .iter()
        .map(|change| (change.key.clone(), change.revision))
        .collect();
    let live = futures::stream::unfold(live, |mut live| async move {
        match live.recv().await {
            Ok(change) => Some((change, live)),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::info!(missed, "event-stream client too slow: dropped");
                None
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    })
    .filter(move |change| {
        let fresh = change.revision > after
            && shown
                .get(&change.key)
                .is_none_or(|&seen| change.revision > seen);
        futures::future::ready(fresh)
    });
    futures::stream::iter(resume.into_iter().map(Arc::new))
        .chain(live)
        .filter(move |change| futures::future::ready(filter.admits(change)))
        .take_until(stop.cancelled_owned())
}
