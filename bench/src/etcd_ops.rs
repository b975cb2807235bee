//! The same lease operations on etcd 3.4, the tool users compare us with:
//! acquire is a lease grant plus a put-if-absent transaction (what etcd's
//! own election recipe does); renew is one keep-alive round trip; owner is
//! a linearizable get (etcd-client's default); list is one range get.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use futures::StreamExt;

use crate::measure::{Op, RangeRead, op};

/// Longer than etcd runs in a benchmark: no lease expires while it is
/// measured (the compare-and-set's are never kept alive, and the rounds
/// come back to them minutes later), so no revocation competes with a
/// measurement.
const TTL_SECS: i64 = 600;

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

/// A client of every member: etcd-client spreads its calls over them.
pub async fn connect(urls: &[String]) -> Client {
    Client::connect(urls, None)
        .await
        .expect("connecting to etcd")
}

/// Acquires one after another, a new key each time.
pub fn acquire_calls(client: &Client) -> Op {
    let client = client.clone();
    op(move |i| {
        let mut client = client.clone();
        async move {
            acquire(&mut client, &format!("acq-{i}")).await;
        }
    })
}

/// The key [`renew_calls`] holds and [`get_calls`] reads.
const SEQUENTIAL_KEY: &str = "renew-me";

/// Renews (keep-alive round trips) of one lease, one after another; the
/// lease is granted here.
pub async fn renew_calls(client: &Client) -> Op {
    let mut c = client.clone();
    let lease = acquire(&mut c, SEQUENTIAL_KEY).await;
    let pair = c.lease_keep_alive(lease).await.expect("keep-alive");
    let pair = Arc::new(tokio::sync::Mutex::new(pair));
    op(move |_| {
        let pair = pair.clone();
        async move {
            let mut guard = pair.lock().await;
            let (keeper, stream) = &mut *guard;
            keeper.keep_alive().await.expect("keep-alive");
            stream.message().await.expect("keep-alive reply");
        }
    })
}

/// Keep-alives by `clients` concurrent holders, one lease each, granted
/// here.
pub async fn keep_alives(client: &Client, clients: u64) -> Op {
    let mut streams = Vec::new();
    for c in 0..clients {
        let mut conn = client.clone();
        let lease = acquire(&mut conn, &format!("tp-{c}")).await;
        let pair = conn.lease_keep_alive(lease).await.expect("keep-alive");
        streams.push(tokio::sync::Mutex::new(pair));
    }
    let streams = Arc::new(streams);
    op(move |c| {
        let streams = streams.clone();
        async move {
            let mut guard = streams[c as usize].lock().await;
            let (keeper, stream) = &mut *guard;
            keeper.keep_alive().await.expect("keep-alive");
            stream.message().await.expect("keep-alive reply");
        }
    })
}

/// Compare-and-set puts by `clients` concurrent writers, one key each: a
/// put of the key to its lease if its last write is still the one this
/// writer made. This is the replicated, fsynced write a dagnats-leases
/// renew is; etcd's keep-alive is neither.
pub async fn compare_and_sets(client: &Client, clients: u64) -> Op {
    let mut slots = Vec::new();
    for c in 0..clients {
        let mut conn = client.clone();
        let key = format!("cas-{c}");
        let lease = acquire(&mut conn, &key).await;
        let revision = conn.get(key.as_str(), None).await.expect("get").kvs()[0].mod_revision();
        slots.push((key, lease, AtomicI64::new(revision)));
    }
    let (client, slots) = (client.clone(), Arc::new(slots));
    op(move |c| {
        let (mut client, slots) = (client.clone(), slots.clone());
        async move {
            let (key, lease, revision) = &slots[c as usize];
            let last = revision.load(Ordering::Relaxed);
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
            revision.store(header.revision(), Ordering::Relaxed);
        }
    })
}

/// Linearizable gets of [`renew_calls`]' key, one after another: what an
/// owner query is on etcd.
pub fn get_calls(client: &Client) -> Op {
    let client = client.clone();
    op(move |_| {
        let mut client = client.clone();
        async move {
            let reply = client.get(SEQUENTIAL_KEY, None).await.expect("get");
            assert_eq!(reply.kvs().len(), 1, "{SEQUENTIAL_KEY} is held");
        }
    })
}

/// Linearizable gets by concurrent readers, each of its [`keep_alives`]
/// holder's key.
pub fn gets(client: &Client) -> Op {
    let client = client.clone();
    op(move |c| {
        let mut client = client.clone();
        async move {
            let reply = client.get(format!("tp-{c}"), None).await.expect("get");
            assert_eq!(reply.kvs().len(), 1, "tp-{c} is held");
        }
    })
}

/// Puts `keys` keys under a prefix of their own, each to a lease as a held
/// lease is and about as large as a lease record, then times `calls` range
/// gets of the whole prefix (linearizable, one call each).
pub async fn range_read(client: &Client, keys: u64, calls: u64) -> RangeRead {
    let lease = client
        .clone()
        .lease_grant(TTL_SECS * 10, None)
        .await
        .expect("lease grant")
        .id();
    futures::stream::iter(0..keys)
        .map(|i| {
            let mut client = client.clone();
            async move {
                let value = format!(
                    r#"{{"holder":"holder-{i}","ttl_ms":60000,"acquired_at":"2026-12-01T00:00:00.000Z"}}"#
                );
                let options = PutOptions::new().with_lease(lease);
                client
                    .put(format!("held/{i:06}"), value, Some(options))
                    .await
                    .expect("put");
            }
        })
        .buffer_unordered(64)
        .collect::<()>()
        .await;
    RangeRead::measure(keys, calls, || {
        let mut client = client.clone();
        async move {
            let options = GetOptions::new().with_prefix();
            let reply = client.get("held/", Some(options)).await.expect("range get");
            reply.kvs().len() as u64
        }
    })
    .await
}
