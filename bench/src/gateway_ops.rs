//! The gateway's operations over NATS, with the typed client.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use dagnats_leases_client::LeaseClient;

use crate::measure::{Latency, Op, latencies, op};

const TTL: Duration = Duration::from_secs(60);

/// Each operation, called one after another: as [`Op`]s to time, then
/// their latencies ([`crate::measure::latencies`]); both fronts report this
/// shape, in the JSON as in the tables.
#[derive(serde::Serialize)]
pub struct Sequential<T = Latency> {
    pub acquire: T,
    pub renew: T,
    pub owner: T,
    pub release: T,
    pub forward: T,
}

impl Sequential<Op> {
    /// The operations, in the order [`Sequential::latencies`] takes their
    /// figures back.
    pub fn ops(self) -> [Op; 5] {
        [
            self.acquire,
            self.renew,
            self.owner,
            self.release,
            self.forward,
        ]
    }
}

impl Sequential {
    /// The latencies of [`Sequential::ops`], each taken from `next` in turn.
    pub fn latencies(mut next: impl FnMut() -> Latency) -> Sequential {
        Sequential {
            acquire: next(),
            renew: next(),
            owner: next(),
            release: next(),
            forward: next(),
        }
    }
}

/// The calls of each operation over NATS, with their keys acquired and
/// the forward's owner answering; `n` calls of each (and `n / 10` to warm
/// up) are timed later.
pub async fn sequential_ops(leases: &LeaseClient, n: u64) -> Sequential<Op> {
    let acquire = {
        let leases = leases.clone();
        op(move |i| {
            let leases = leases.clone();
            async move {
                let grant = leases
                    .acquire(&format!("acq-{i}"), "bench", TTL)
                    .await
                    .expect("acquire");
                assert!(grant.granted);
            }
        })
    };

    let renew = renewing(leases, "renew-me").await;

    let owner = owner_of(leases, "renew-me");

    // Each release needs a lease of its own, acquired untimed.
    let total = n + n / 10;
    let mut fences = Vec::with_capacity(total as usize);
    for i in 0..total {
        let grant = leases
            .acquire(&format!("rel-{i}"), "bench", TTL)
            .await
            .expect("acquire");
        fences.push(grant.lease.revision);
    }
    let release = {
        let (leases, fences) = (leases.clone(), Arc::new(fences));
        let next = Arc::new(AtomicUsize::new(0));
        op(move |_| {
            let (leases, fences) = (leases.clone(), fences.clone());
            let i = next.fetch_add(1, Ordering::Relaxed);
            async move {
                leases
                    .release(&format!("rel-{i}"), "bench", fences[i])
                    .await
                    .expect("release");
            }
        })
    };

    // An owner for "bench-owner" that answers every forwarded request.
    let inbox = "dagnats.lease.inbox.bench-owner.>".to_string();
    crate::floor::echo(leases.nats(), inbox).await;
    leases
        .acquire("fwd", "bench-owner", TTL)
        .await
        .expect("acquire");
    let forward = {
        let leases = leases.clone();
        op(move |_| {
            let leases = leases.clone();
            async move {
                leases
                    .forward("fwd", Bytes::from_static(b"ping"), Duration::from_secs(5))
                    .await
                    .expect("forward");
            }
        })
    };

    Sequential {
        acquire,
        renew,
        owner,
        release,
        forward,
    }
}

/// The latencies of [`sequential_ops`] alone, in `rounds` rounds.
pub async fn sequential_latencies(leases: &LeaseClient, n: u64, rounds: u64) -> Sequential {
    let ops = sequential_ops(leases, n).await.ops();
    let mut figures = latencies(&ops, n, rounds).await.into_iter();
    Sequential::latencies(|| figures.next().expect("a latency for every op"))
}

/// The prefix of the keys the throughput phases renew and read, one per
/// client.
pub const THROUGHPUT_KEYS: &str = "tp-";

/// Renews of `key`, acquired here, one after another.
pub async fn renewing(leases: &LeaseClient, key: &str) -> Op {
    let held = leases.acquire(key, "bench", TTL).await.expect("acquire");
    let (leases, key) = (leases.clone(), Arc::new(key.to_string()));
    let fence = Arc::new(AtomicU64::new(held.lease.revision));
    op(move |_| {
        let (leases, key, fence) = (leases.clone(), key.clone(), fence.clone());
        async move {
            let grant = leases
                .renew(&key, "bench", fence.load(Ordering::Relaxed), TTL)
                .await
                .expect("renew");
            fence.store(grant.lease.revision, Ordering::Relaxed);
        }
    })
}

/// Owner reads of `key`, one after another.
pub fn owner_of(leases: &LeaseClient, key: &str) -> Op {
    let (leases, key) = (leases.clone(), Arc::new(key.to_string()));
    op(move |_| {
        let (leases, key) = (leases.clone(), key.clone());
        async move {
            leases.owner(&key).await.expect("owner");
        }
    })
}

/// Renews by `clients` concurrent holders, one key each, acquired here.
pub async fn renews(leases: &LeaseClient, clients: u64) -> Op {
    renews_under(leases, THROUGHPUT_KEYS, clients).await
}

/// [`renews`] of keys under `prefix`.
pub async fn renews_under(leases: &LeaseClient, prefix: &str, clients: u64) -> Op {
    let mut fences = Vec::new();
    for c in 0..clients {
        let grant = leases
            .acquire(&format!("{prefix}{c}"), "bench", TTL)
            .await
            .expect("acquire");
        fences.push(AtomicU64::new(grant.lease.revision));
    }
    let (leases, fences) = (leases.clone(), Arc::new(fences));
    let prefix = Arc::new(prefix.to_string());
    op(move |c| {
        let (leases, fences, prefix) = (leases.clone(), fences.clone(), prefix.clone());
        async move {
            let slot = &fences[c as usize];
            let fence = slot.load(Ordering::Relaxed);
            let grant = leases
                .renew(&format!("{prefix}{c}"), "bench", fence, TTL)
                .await
                .expect("renew");
            slot.store(grant.lease.revision, Ordering::Relaxed);
        }
    })
}

/// Owner reads by concurrent readers, each of its [`renews`] holder's key.
pub fn owner_reads(leases: &LeaseClient) -> Op {
    owner_reads_under(leases, THROUGHPUT_KEYS)
}

/// [`owner_reads`] of the keys [`renews_under`] `prefix` holds.
pub fn owner_reads_under(leases: &LeaseClient, prefix: &str) -> Op {
    let (leases, prefix) = (leases.clone(), Arc::new(prefix.to_string()));
    op(move |c| {
        let (leases, prefix) = (leases.clone(), prefix.clone());
        async move {
            leases.owner(&format!("{prefix}{c}")).await.expect("owner");
        }
    })
}

/// Acquires `n` leases of `ttl` under `prefix` for distinct holders, 64 at
/// a time: the standing population a gateway serves while other figures
/// are taken.
pub async fn hold_many(leases: &LeaseClient, prefix: &str, n: u64, ttl: Duration) {
    use futures::StreamExt;
    futures::stream::iter(0..n)
        .map(|i| async move {
            let key = format!("{prefix}{i}");
            let grant = leases
                .acquire(&key, &format!("holder-{i}"), ttl)
                .await
                .expect("acquire");
            assert!(grant.granted, "{key} was free");
        })
        .buffer_unordered(64)
        .collect::<()>()
        .await;
}
