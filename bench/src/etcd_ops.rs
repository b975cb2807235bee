//! The same lease operations on etcd 3.4, the tool users compare us with:
//! acquire is a lease grant plus a put-if-absent transaction (what etcd's
//! own election recipe does); renew is one keep-alive round trip.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::measure::{Latency, sequential, throughput};

const TTL_SECS: i64 = 60;

async fn acquire(client: &mut Client, key: &str) -> i64 {
    let lease = client
        .lease_grant(TTL_SECS, None)
        .await
        .expect("lease grant")
        .id();
    let txn = Txn::new()
        .when([Compare::create_revision(key, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key,
            "bench",
            Some(PutOptions::new().with_lease(lease)),
        )]);
    let done = client.txn(txn).await.expect("txn");
    assert!(done.succeeded(), "{key} was free");
    lease
}

pub async fn connect(url: &str) -> Client {
    Client::connect([url], None)
        .await
        .expect("connecting to etcd")
}

/// Sequential acquire latency (new key each time).
pub async fn acquire_latency(client: &Client, n: u64) -> Latency {
    sequential(n, |i| {
        let mut client = client.clone();
        async move {
            acquire(&mut client, &format!("acq-{i}")).await;
        }
    })
    .await
}

/// Sequential renew (keep-alive) latency on one lease.
pub async fn renew_latency(client: &Client, n: u64) -> Latency {
    let mut c = client.clone();
    let lease = acquire(&mut c, "renew-me").await;
    let (keeper, stream) = c.lease_keep_alive(lease).await.expect("keep-alive");
    let pair = Arc::new(tokio::sync::Mutex::new((keeper, stream)));
    sequential(n, |_| {
        let pair = pair.clone();
        async move {
            let mut guard = pair.lock().await;
            let (keeper, stream) = &mut *guard;
            keeper.keep_alive().await.expect("keep-alive");
            stream.message().await.expect("keep-alive reply");
        }
    })
    .await
}

/// Renews per second with `clients` concurrent holders, one lease each.
pub async fn renew_throughput(client: &Client, clients: u64, duration: Duration) -> f64 {
    let mut streams = Vec::new();
    for c in 0..clients {
        let mut conn = client.clone();
        let lease = acquire(&mut conn, &format!("tp-{c}")).await;
        let pair = conn.lease_keep_alive(lease).await.expect("keep-alive");
        streams.push(tokio::sync::Mutex::new(pair));
    }
    let streams = Arc::new(streams);
    throughput(clients, duration, move |c, _| {
        let streams = streams.clone();
        async move {
            let mut guard = streams[c as usize].lock().await;
            let (keeper, stream) = &mut *guard;
            keeper.keep_alive().await.expect("keep-alive");
            stream.message().await.expect("keep-alive reply");
        }
    })
    .await
}

/// Compare-and-set puts per second with `clients` concurrent writers, one
/// key each: a put of the key to its lease if its last write is still the
/// one this writer made. This is the replicated, fsynced write a
/// dagnats-leases renew is; etcd's keep-alive is neither.
pub async fn compare_and_set_throughput(client: &Client, clients: u64, duration: Duration) -> f64 {
    let mut slots = Vec::new();
    for c in 0..clients {
        let mut conn = client.clone();
        let key = format!("cas-{c}");
        let lease = acquire(&mut conn, &key).await;
        let revision = conn.get(key.as_str(), None).await.expect("get").kvs()[0].mod_revision();
        slots.push((key, lease, std::sync::atomic::AtomicI64::new(revision)));
    }
    let (client, slots) = (client.clone(), Arc::new(slots));
    throughput(clients, duration, move |c, _| {
        let (mut client, slots) = (client.clone(), slots.clone());
        async move {
            let (key, lease, revision) = &slots[c as usize];
            let last = revision.load(std::sync::atomic::Ordering::Relaxed);
            let txn = Txn::new()
                .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, last)])
                .and_then([TxnOp::put(
                    key.as_str(),
                    "bench",
                    Some(PutOptions::new().with_lease(*lease)),
                )]);
            let done = client.txn(txn).await.expect("txn");
            assert!(done.succeeded(), "{key} was not changed by anyone else");
            let header = done.header().expect("a response header");
            revision.store(header.revision(), std::sync::atomic::Ordering::Relaxed);
        }
    })
    .await
}
