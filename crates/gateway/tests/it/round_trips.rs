//! JetStream round trips per operation, counted on the wire: a renew,
//! release or owner is one in the common case, and so is an acquire of a
//! key the gateway knows is free (the create alone; a key it knows held is
//! read instead). On a replicated bucket an owner read of a key the
//! gateway knows is its barrier alone. A loaded policy adds none. More is
//! a performance bug.

use std::time::Duration;

use crate::common::cluster::{self, Cluster};
use crate::common::tenants::{Tenants, assert_forbidden, shared_policy};
use crate::common::{Setup, call};
use futures::StreamExt;
use serde_json::{Value, json};

/// Counts what a call sends to JetStream: leader reads, and key writes and
/// barriers.
struct Tap {
    reads: async_nats::Subscriber,
    writes: async_nats::Subscriber,
    barriers: async_nats::Subscriber,
}

impl Tap {
    async fn start(s: &Setup) -> Tap {
        Tap::on(&s.client).await
    }

    /// Leader reads, and publishes to the bucket (writes and barriers),
    /// seen through `client`.
    async fn on(client: &async_nats::Client) -> Tap {
        let reads = client
            .subscribe("$JS.API.STREAM.MSG.GET.KV_leases")
            .await
            .unwrap();
        let writes = client.subscribe("$KV.leases.>").await.unwrap();
        let barriers = client.subscribe("dagnats.leases.barrier.*").await.unwrap();
        dagnats_leases_testkit::nats::settle(client).await;
        Tap {
            reads,
            writes,
            barriers,
        }
    }

    /// (reads, writes and barriers) since the last count.
    async fn count(&mut self) -> (usize, usize) {
        async fn drain(sub: &mut async_nats::Subscriber) -> usize {
            let mut n = 0;
            while let Ok(Some(_)) =
                tokio::time::timeout(Duration::from_millis(200), sub.next()).await
            {
                n += 1;
            }
            n
        }
        let writes = drain(&mut self.writes).await + drain(&mut self.barriers).await;
        (drain(&mut self.reads).await, writes)
    }
}

#[tokio::test]
async fn each_operation_costs_the_round_trips_it_must_and_no_more() {
    let s = Setup::start().await;
    let mut tap = Tap::start(&s).await;
    let a = s
        .call(
            "acquire",
            json!({"key": "k", "holder": "h", "ttl_ms": 15000}),
        )
        .await;
    assert_eq!(
        tap.count().await,
        (0, 1),
        "acquire of a fresh key: one create"
    );
    let mut revision: Value = a["revision"].clone();
    for _ in 0..3 {
        let r = s
            .call(
                "renew",
                json!({"key": "k", "holder": "h", "revision": revision, "ttl_ms": 15000}),
            )
            .await;
        assert_eq!(r["granted"], true);
        assert_eq!(tap.count().await, (0, 1), "renew: one compare-and-set");
        revision = r["revision"].clone();
    }
    s.call("owner", json!({"key": "k"})).await;
    assert_eq!(tap.count().await, (1, 0), "owner: one leader read");
    s.call(
        "acquire",
        json!({"key": "k", "holder": "h", "ttl_ms": 15000}),
    )
    .await;
    assert_eq!(
        tap.count().await,
        (1, 0),
        "acquire by the holder: a read, no write"
    );
    s.call(
        "release",
        json!({"key": "k", "holder": "h", "revision": revision}),
    )
    .await;
    assert_eq!(tap.count().await, (0, 1), "release: one compare-and-set");
    let again = s
        .call(
            "acquire",
            json!({"key": "k", "holder": "g", "ttl_ms": 15000}),
        )
        .await;
    assert_eq!(again["granted"], true);
    assert_eq!(
        tap.count().await,
        (0, 1),
        "acquire of a key released here: one create"
    );
}

#[tokio::test]
async fn on_a_replicated_bucket_an_owner_read_of_a_known_key_is_its_barrier_alone() {
    let cluster = Cluster::start().await;
    let _gateway = cluster::gateway_with(&cluster.urls(), &["--replicas", "3"]).await;
    let client = cluster.client().await;
    let mut tap = Tap::on(&client).await;
    let lease = json!({"key": "k", "holder": "h", "ttl_ms": 15000});
    let granted = call(&client, "acquire", lease).await;
    assert_eq!(granted["granted"], true, "{granted}");
    assert_eq!(
        tap.count().await,
        (0, 1),
        "acquire of a fresh key: one create"
    );
    let owner = call(&client, "owner", json!({"key": "k"})).await;
    assert_eq!(owner["revision"], granted["revision"], "{owner}");
    assert_eq!(owner["holder"], "h");
    assert_eq!(
        tap.count().await,
        (0, 1),
        "owner of a key this gateway wrote: one barrier, no read"
    );
    let free = call(&client, "owner", json!({"key": "never-written"})).await;
    assert_eq!(free, json!({"held": false, "key": "never-written"}));
    assert_eq!(
        tap.count().await,
        (1, 1),
        "owner of a key nobody wrote: a read and its barrier"
    );
}

#[tokio::test]
async fn concurrent_owner_reads_of_one_known_key_share_their_barriers() {
    const READERS: usize = 20;
    let cluster = Cluster::start().await;
    let _gateway = cluster::gateway_with(&cluster.urls(), &["--replicas", "3"]).await;
    let client = cluster.client().await;
    let lease = json!({"key": "hot", "holder": "h", "ttl_ms": 15000});
    let granted = call(&client, "acquire", lease).await;
    assert_eq!(granted["granted"], true, "{granted}");
    let mut tap = Tap::on(&client).await;
    let reads = (0..READERS).map(|_| call(&client, "owner", json!({"key": "hot"})));
    for owner in futures::future::join_all(reads).await {
        assert_eq!(owner["holder"], "h", "{owner}");
        assert_eq!(owner["revision"], granted["revision"], "{owner}");
    }
    let (msg_gets, barriers) = tap.count().await;
    println!("{READERS} concurrent owner reads: {barriers} barriers, {msg_gets} reads");
    assert_eq!(msg_gets, 0, "a known key is never read");
    assert!(
        (1..=READERS / 2).contains(&barriers),
        "{READERS} reads sent {barriers} barriers: the readers that wait together share one"
    );
}

#[tokio::test]
async fn a_policy_check_costs_no_jetstream_round_trip() {
    let t = Tenants::with_policy(&shared_policy(), 1).await;
    // The gateways' account, where the gateway talks to JetStream.
    let mut tap = Tap::on(t.client("ops")).await;
    let lease = |holder: &str, revision: &Value| json!({"key": "shared-k", "holder": holder, "revision": revision, "ttl_ms": 15000});
    let acquired = t.hold("alice", "shared-k", "a1").await;
    assert_eq!(tap.count().await, (0, 1), "acquire: one create");
    let (renewed, _) = t
        .call("alice", "renew", lease("a1", &acquired["revision"]))
        .await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    assert_eq!(tap.count().await, (0, 1), "renew: one compare-and-set");
    let revision = &renewed["revision"];
    let refused = [
        ("bob", "renew", lease("a1", revision)),
        ("bob", "release", lease("a1", revision)),
        (
            "carol",
            "acquire",
            json!({"key": "team-b-k", "holder": "c1", "ttl_ms": 15000}),
        ),
        ("alice", "owner", json!({"key": "team-b-k"})),
    ];
    for (user, op, body) in refused {
        assert_forbidden(&format!("{user} {op}"), &t.call(user, op, body).await);
        assert_eq!(tap.count().await, (0, 0), "{user}'s refused {op}: none");
    }
    let (owner, _) = t.call("bob", "owner", json!({"key": "shared-k"})).await;
    assert_eq!(owner["holder"], "a1", "{owner}");
    assert_eq!(tap.count().await, (1, 0), "owner: one leader read");
    let (released, _) = t.call("alice", "release", lease("a1", revision)).await;
    assert_eq!(released["released"], true, "{released}");
    assert_eq!(tap.count().await, (0, 1), "release: one compare-and-set");
}
