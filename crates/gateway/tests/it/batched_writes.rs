//! On a replicated bucket (nats-server 2.12+), writes that queue behind
//! the ones in flight leave together as one atomic batch: each keeps its
//! own compare-and-set, its own revision and its own answer. The gateway
//! here batches as much as it can (`--publishes-in-flight 1`). A refused
//! batch is tested at the publisher (`store::publisher`), where which
//! publishes share a batch can be chosen.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::cluster::{self, Cluster};
use crate::common::lease_ops::{acquire, renew};
use crate::common::{Gateway, Http, call};
use futures::future::join_all;
use serde_json::{Value, json};

const TTL_MS: u64 = 30_000;

/// How many rounds of concurrent calls a test makes at most before the
/// batches it needs have formed (each round is a few milliseconds).
const ROUNDS: usize = 50;

struct Batching {
    _cluster: Cluster,
    _gateway: Gateway,
    client: async_nats::Client,
    http: Http,
}

impl Batching {
    async fn start() -> Self {
        let cluster = Cluster::start().await;
        let args = ["--replicas", "3", "--publishes-in-flight", "1"];
        let gateway = cluster::gateway_with(&cluster.urls(), &args).await;
        let client = cluster.client().await;
        let http = Http::of(&gateway).await;
        Batching {
            _cluster: cluster,
            _gateway: gateway,
            client,
            http,
        }
    }

    /// `dagnats_store_batches_total{outcome=...}` now.
    async fn batches(&self, outcome: &str) -> u64 {
        let series = format!("dagnats_store_batches_total{{outcome=\"{outcome}\"}}");
        self.http.metric(&series).await
    }

    /// The same call for every body at once; the replies in order.
    async fn all(&self, op: &str, bodies: Vec<Value>) -> Vec<Value> {
        join_all(bodies.into_iter().map(|b| call(&self.client, op, b))).await
    }
}

fn revision(reply: &Value) -> u64 {
    reply["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("granted: {reply}"))
}

#[tokio::test]
async fn writes_queued_together_commit_as_one_batch_each_at_its_own_revision() {
    let b = Batching::start().await;
    let keys: Vec<String> = (0..24).map(|i| format!("batch-{i}")).collect();
    let holder = |i: usize| format!("node-{i}");
    let granted = b
        .all(
            "acquire",
            (0..keys.len())
                .map(|i| acquire(&keys[i], &holder(i), TTL_MS))
                .collect(),
        )
        .await;
    let mut revisions: BTreeMap<&str, u64> = keys
        .iter()
        .zip(&granted)
        .map(|(k, reply)| (k.as_str(), revision(reply)))
        .collect();
    let mut every_revision: BTreeSet<u64> = revisions.values().copied().collect();
    for _ in 0..ROUNDS {
        if b.batches("committed").await > 0 {
            break;
        }
        let bodies = keys
            .iter()
            .enumerate()
            .map(|(i, k)| renew(k, &holder(i), revisions[k.as_str()], TTL_MS))
            .collect();
        for (k, reply) in keys.iter().zip(b.all("renew", bodies).await) {
            let renewed = revision(&reply);
            assert!(renewed > revisions[k.as_str()], "{reply}");
            assert!(every_revision.insert(renewed), "revision {renewed} twice");
            revisions.insert(k, renewed);
        }
    }
    assert!(b.batches("committed").await > 0, "no batch was committed");
    // What each caller was told is what the bucket holds.
    for (i, key) in keys.iter().enumerate() {
        let owner = call(&b.client, "owner", json!({"key": key})).await;
        assert_eq!(owner["held"], true, "{owner}");
        assert_eq!(owner["holder"], json!(holder(i)), "{owner}");
        assert_eq!(owner["revision"], json!(revisions[key.as_str()]), "{owner}");
    }
}
