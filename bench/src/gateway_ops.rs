//! The gateway's operations over NATS, with the typed client.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use dagnats_leases_client::LeaseClient;

use crate::measure::{Latency, Op, op, sequential};

const TTL: Duration = Duration::from_secs(60);

/// Latency of each operation, measured one call after another; both fronts
/// report this shape, in the JSON as in the tables.
#[derive(serde::Serialize)]
pub struct Sequential {
    pub acquire: Latency,
    pub renew: Latency,
    pub owner: Latency,
    pub release: Latency,
    pub forward: Latency,
}

pub async fn sequential_ops(leases: &LeaseClient, n: u64) -> Sequential {
    let acquire = sequential(n, |i| async move {
        let grant = leases
            .acquire(&format!("acq-{i}"), "bench", TTL)
            .await
            .expect("acquire");
        assert!(grant.granted);
    })
    .await;

    let held = leases
        .acquire("renew-me", "bench", TTL)
        .await
        .expect("acquire");
    let fence = std::cell::Cell::new(held.lease.revision);
    let renew = sequential(n, |_| async {
        let grant = leases
            .renew("renew-me", "bench", fence.get(), TTL)
            .await
            .expect("renew");
        fence.set(grant.lease.revision);
    })
    .await;

    let owner = sequential(n, |_| async {
        leases.owner("renew-me").await.expect("owner");
    })
    .await;

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
    let fences = Arc::new(fences);
    let next = std::cell::Cell::new(0usize);
    let release = sequential(n, |_| {
        let i = next.get();
        next.set(i + 1);
        let fences = fences.clone();
        async move {
            leases
                .release(&format!("rel-{i}"), "bench", fences[i])
                .await
                .expect("release");
        }
    })
    .await;

    // An owner for "bench-owner" that answers every forwarded request.
    let inbox = "dagnats.lease.inbox.bench-owner.>".to_string();
    crate::floor::echo(leases.nats(), inbox).await;
    leases
        .acquire("fwd", "bench-owner", TTL)
        .await
        .expect("acquire");
    let forward = sequential(n, |_| async {
        leases
            .forward("fwd", Bytes::from_static(b"ping"), Duration::from_secs(5))
            .await
            .expect("forward");
    })
    .await;

    Sequential {
        acquire,
        renew,
        owner,
        release,
        forward,
    }
}

/// The prefix of the keys the throughput phases renew and read, one per
/// client.
pub const THROUGHPUT_KEYS: &str = "tp-";

/// Renews by `clients` concurrent holders, one key each, acquired here.
pub async fn renews(leases: &LeaseClient, clients: u64) -> Op {
    let mut fences = Vec::new();
    for c in 0..clients {
        let grant = leases
            .acquire(&format!("{THROUGHPUT_KEYS}{c}"), "bench", TTL)
            .await
            .expect("acquire");
        fences.push(AtomicU64::new(grant.lease.revision));
    }
    let (leases, fences) = (leases.clone(), Arc::new(fences));
    op(move |c| {
        let (leases, fences) = (leases.clone(), fences.clone());
        async move {
            let slot = &fences[c as usize];
            let fence = slot.load(Ordering::Relaxed);
            let grant = leases
                .renew(&format!("{THROUGHPUT_KEYS}{c}"), "bench", fence, TTL)
                .await
                .expect("renew");
            slot.store(grant.lease.revision, Ordering::Relaxed);
        }
    })
}

/// Owner reads by concurrent readers, each of its [`renews`] holder's key.
pub fn owner_reads(leases: &LeaseClient) -> Op {
    let leases = leases.clone();
    op(move |c| {
        let leases = leases.clone();
        async move {
            leases
                .owner(&format!("{THROUGHPUT_KEYS}{c}"))
                .await
                .expect("owner");
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
