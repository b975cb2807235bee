//! JetStream round trips per operation, counted on the wire: a renew,
//! release or owner is one in the common case, and so is an acquire of a
//! key the gateway knows is free (the create alone; a key it knows held is
//! read instead). More is a performance bug.

mod common;

use std::time::Duration;

use common::Setup;
use futures::StreamExt;
use serde_json::{Value, json};

/// Counts what a call sends to JetStream: leader reads and key writes.
struct Tap {
    reads: async_nats::Subscriber,
    writes: async_nats::Subscriber,
}

impl Tap {
    async fn start(s: &Setup) -> Tap {
        let reads = s
            .client
            .subscribe("$JS.API.STREAM.MSG.GET.KV_leases")
            .await
            .unwrap();
        let writes = s.client.subscribe("$KV.leases.>").await.unwrap();
        s.client.flush().await.unwrap();
        Tap { reads, writes }
    }

    /// (reads, writes) since the last count.
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
        (drain(&mut self.reads).await, drain(&mut self.writes).await)
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
