//! Who wants which change: every event-stream client registers its
//! [`Filter`] and gets its own bounded queue, so the relay hands a change
//! only to the clients that want it. A client watching one quiet key is
//! then never woken, nor dropped, by a burst of changes to other keys.

use std::sync::{Arc, Mutex, PoisonError};

use foldhash::HashMap;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use super::{ChangeKind, EncodedChange, Filter};
use crate::metrics::SseClient;

/// The registered clients, shared by the relay (which delivers) and the
/// clients' streams (which register, and unregister when they end).
#[derive(Clone)]
pub(super) struct Registry {
    clients: Arc<Mutex<Clients>>,
    /// Changes a client may have waiting before it counts as too slow.
    buffer: usize,
}

/// The registered clients, by what they watch.
#[derive(Default)]
struct Clients {
    next_id: u64,
    /// Clients of one key, found by the key: a change costs only the
    /// clients that watch its key, however many watch other keys.
    by_key: HashMap<String, HashMap<u64, Client>>,
    /// Clients of every key (all changes, or ownership changes only).
    every_key: HashMap<u64, Client>,
}

/// One registered client; the `dagnats_sse_clients` gauge counts it for as
/// long as it is registered.
struct Client {
    filter: Filter,
    queue: mpsc::Sender<Arc<EncodedChange>>,
    _counted: SseClient,
}

impl Client {
    /// Queues `change`; `false` when the client must be unregistered: it
    /// is gone, or it is too slow. A slow client is dropped rather than
    /// allowed to grow memory.
    fn offer(&self, change: &Arc<EncodedChange>) -> bool {
        match self.queue.try_send(change.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                tracing::info!(
                    key = self.filter.key.as_ref().map(|k| k.as_str()),
                    "event-stream client too slow: dropped"
                );
                false
            }
            Err(TrySendError::Closed(_)) => false,
        }
    }
}

impl Registry {
    /// A registry whose clients may each have up to `buffer` changes
    /// waiting.
    pub(super) fn new(buffer: usize) -> Self {
        Registry {
            clients: Arc::default(),
            buffer,
        }
    }

    /// Registers a client for the changes `filter` admits, from now on.
    pub(super) fn register(&self, filter: Filter) -> Subscription {
        // tokio's bounded queue allocates in small blocks as it fills, so a
        // quiet client costs little whatever the buffer.
        let (queue, changes) = mpsc::channel(self.buffer);
        let key = filter.key.as_ref().map(|k| k.as_str().to_string());
        let client = Client {
            filter: filter.clone(),
            queue,
            _counted: SseClient::connected(),
        };
        let mut clients = self.lock();
        let id = clients.next_id;
        clients.next_id += 1;
        match &key {
            Some(key) => clients.by_key.entry(key.clone()).or_default(),
            None => &mut clients.every_key,
        }
        .insert(id, client);
        Subscription {
            changes,
            filter,
            _registered: Registered {
                registry: self.clone(),
                id,
                key,
            },
        }
    }

    /// Queues the change of `kind` to `key` for every client that wants
    /// it, unregistering the ones that are gone or too slow. `encode` runs
    /// once, and only if some client wants the change: with nobody
    /// watching, the relay spends nothing on encoding.
    pub(super) fn deliver(
        &self,
        key: &str,
        kind: ChangeKind,
        encode: impl FnOnce() -> EncodedChange,
    ) {
        let mut clients = self.lock();
        let Clients {
            by_key, every_key, ..
        } = &mut *clients;
        let (mut encode, mut encoded) = (Some(encode), None);
        let mut offer = |client: &Client| {
            if !client.filter.admits(key, kind) {
                return true;
            }
            let change = encoded.get_or_insert_with(|| {
                Arc::new(encode.take().expect("a change is encoded at most once")())
            });
            client.offer(change)
        };
        if let Some(watching) = by_key.get_mut(key) {
            watching.retain(|_, client| offer(client));
            if watching.is_empty() {
                by_key.remove(key);
            }
        }
        every_key.retain(|_, client| offer(client));
    }

    fn unregister(&self, id: u64, key: Option<&str>) {
        let mut clients = self.lock();
        match key {
            Some(key) => {
                if let Some(watching) = clients.by_key.get_mut(key) {
                    watching.remove(&id);
                    if watching.is_empty() {
                        clients.by_key.remove(key);
                    }
                }
            }
            None => {
                clients.every_key.remove(&id);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Clients> {
        // Nothing panics while holding the lock; and a client ending during
        // a panic must not turn it into an abort.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One client's live changes: those its filter admits, from when it
/// registered. They end when the client falls more than the buffer behind
/// (after the changes already queued, so a client resuming from the last
/// one it saw misses nothing). Dropping it unregisters the client.
pub(crate) struct Subscription {
    changes: mpsc::Receiver<Arc<EncodedChange>>,
    filter: Filter,
    _registered: Registered,
}

impl Subscription {
    /// The filter the client registered with.
    pub(super) fn filter(&self) -> &Filter {
        &self.filter
    }

    /// The next change; `None` once the client has been dropped as too
    /// slow and has read what was queued.
    pub(super) async fn recv(&mut self) -> Option<Arc<EncodedChange>> {
        self.changes.recv().await
    }
}

/// Unregisters its client when the client's stream ends, so a client that
/// disconnects leaves nothing behind, even on a key that never changes.
struct Registered {
    registry: Registry,
    id: u64,
    key: Option<String>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.unregister(self.id, self.key.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ChangeKind;
    use dagnats_leases_wire::request::LeaseKey;

    fn deliver(registry: &Registry, key: &str, kind: ChangeKind, revision: u64) {
        registry.deliver(key, kind, || EncodedChange {
            kind,
            key: key.to_string(),
            revision,
            data: String::new(),
        });
    }

    fn watching(key: &str) -> Filter {
        Filter {
            key: Some(LeaseKey::try_from(key.to_string()).unwrap()),
            ..Filter::default()
        }
    }

    fn is_empty(registry: &Registry) -> bool {
        let clients = registry.lock();
        clients.by_key.is_empty() && clients.every_key.is_empty()
    }

    #[tokio::test]
    async fn a_change_reaches_only_the_clients_whose_filter_admits_it() {
        let registry = Registry::new(4);
        let mut a = registry.register(watching("a"));
        let mut b = registry.register(watching("b"));
        let mut every = registry.register(Filter::default());
        let mut ownership = registry.register(Filter {
            ownership: true,
            ..Filter::default()
        });
        deliver(&registry, "a", ChangeKind::Renewed, 1);
        deliver(&registry, "b", ChangeKind::Acquired, 2);
        assert_eq!(a.recv().await.unwrap().revision, 1);
        assert_eq!(b.recv().await.unwrap().revision, 2);
        assert_eq!(every.recv().await.unwrap().revision, 1);
        assert_eq!(every.recv().await.unwrap().revision, 2);
        assert_eq!(ownership.recv().await.unwrap().revision, 2);
        for client in [&mut a, &mut b, &mut every, &mut ownership] {
            assert!(client.changes.is_empty());
        }
    }

    #[test]
    fn a_change_is_encoded_once_and_only_when_some_client_wants_it() {
        let registry = Registry::new(4);
        let _a = registry.register(watching("a"));
        let _also_a = registry.register(watching("a"));
        let _ownership = registry.register(Filter {
            ownership: true,
            ..Filter::default()
        });
        let encoded = std::cell::Cell::new(0);
        let encode = |kind| {
            encoded.set(encoded.get() + 1);
            EncodedChange {
                kind,
                key: "a".into(),
                revision: 1,
                data: String::new(),
            }
        };
        registry.deliver("b", ChangeKind::Renewed, || encode(ChangeKind::Renewed));
        assert_eq!(encoded.get(), 0, "nobody watches b's renewals");
        registry.deliver("a", ChangeKind::Acquired, || encode(ChangeKind::Acquired));
        assert_eq!(encoded.get(), 1, "three clients, one encoding");
    }

    #[tokio::test]
    async fn a_client_more_than_the_buffer_behind_gets_what_was_queued_then_ends() {
        let registry = Registry::new(2);
        let mut slow = registry.register(Filter::default());
        for revision in 1..=3 {
            deliver(&registry, "k", ChangeKind::Acquired, revision);
        }
        assert!(is_empty(&registry));
        assert_eq!(slow.recv().await.unwrap().revision, 1);
        assert_eq!(slow.recv().await.unwrap().revision, 2);
        assert_eq!(slow.recv().await, None);
    }

    #[test]
    fn clients_are_unregistered_when_they_end() {
        let registry = Registry::new(2);
        let clients = [
            registry.register(watching("a")),
            registry.register(watching("a")),
            registry.register(watching("b")),
            registry.register(Filter::default()),
        ];
        assert!(!is_empty(&registry));
        drop(clients);
        assert!(is_empty(&registry));
    }
}
