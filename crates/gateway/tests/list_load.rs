//! Lists of a bucket in production use: 10,000 leases on a three-node
//! cluster at R3, renewed and read by owner while lists run. A load run by
//! hand, like the long fault run (`cargo test --release --test list_load
//! -- --ignored --nocapture`): on two cores it takes half a minute and
//! every other test's servers would share them.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::cluster::{self, Cluster};
use common::{Http, eventually, lease_ops};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const LEASES: usize = 10_000;
const RENEWERS: usize = 48;
const READERS: usize = 96;
const LISTS: u64 = 10;
/// Owner reads before the first list: the load is up to speed.
const WARM_UP_READS: u64 = 5_000;

/// Every owner read on a replicated bucket writes a barrier; were it the
/// one a list's consumer looks for, a list's barrier would be rewritten
/// while the consumer walks the bucket, the consumer taken for behind and
/// made again, and under enough reads the list would answer `unavailable`
/// (10 lists made 8 more consumers and one answered `unavailable` before
/// lists had a barrier subject of their own).
#[tokio::test]
#[ignore = "load (cargo test --release --test list_load -- --ignored --nocapture)"]
async fn lists_among_owner_reads_and_renewals_each_answer_every_lease_from_their_first_consumer() {
    let cluster = Cluster::start().await;
    let gateway = cluster::gateway(&cluster.urls()).await;
    let client = cluster.client().await;
    let keys: Vec<String> = (0..LEASES).map(|i| format!("k-{i:05}")).collect();
    let mut held = Vec::new();
    for chunk in keys.chunks(200) {
        let grants = chunk
            .iter()
            .map(|key| common::call(&client, "acquire", lease_ops::acquire(key, "h", 60_000)));
        for (key, grant) in chunk.iter().zip(futures::future::join_all(grants).await) {
            assert_eq!(grant["granted"], true, "{grant}");
            held.push((key.clone(), grant["revision"].as_u64().unwrap()));
        }
    }
    let stop = CancellationToken::new();
    let reads = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    for worker in 0..RENEWERS {
        let (client, stop) = (client.clone(), stop.clone());
        let mut mine: Vec<(String, u64)> = held
            .iter()
            .skip(worker)
            .step_by(RENEWERS)
            .cloned()
            .collect();
        load.push(tokio::spawn(async move {
            let mut renewed = 0u64;
            while !stop.is_cancelled() {
                for (key, revision) in &mut mine {
                    if stop.is_cancelled() {
                        break;
                    }
                    let body = lease_ops::renew(key, "h", *revision, 60_000);
                    let grant = common::call(&client, "renew", body).await;
                    // A renew may answer `unavailable` under this load; it
                    // is retried with the same fence on the next round.
                    if let Some(next) = grant["revision"].as_u64() {
                        *revision = next;
                        renewed += 1;
                    }
                }
            }
            renewed
        }));
    }
    for reader in 0..READERS {
        let (client, stop, reads) = (client.clone(), stop.clone(), reads.clone());
        load.push(tokio::spawn(async move {
            let mut read = 0u64;
            while !stop.is_cancelled() {
                let key = format!("k-{:05}", (reader * 313 + read as usize) % LEASES);
                common::call(&client, "owner", json!({"key": key})).await;
                read += 1;
                reads.fetch_add(1, Ordering::Relaxed);
            }
            read
        }));
    }
    eventually(
        "the owner reads to get going",
        Duration::from_secs(60),
        || {
            let reads = reads.load(Ordering::Relaxed);
            async move { (reads >= WARM_UP_READS).then_some(()) }
        },
    )
    .await;
    let http = Http::of(&gateway).await;
    for round in 0..LISTS {
        let reply = http.get("/v1/leases?prefix=k-").await;
        let listed = reply.body["leases"].as_array().map_or(0, Vec::len);
        assert_eq!(listed, LEASES, "list {round}: {}", brief(&reply.body));
    }
    stop.cancel();
    let mut done = Vec::new();
    for task in load {
        done.push(task.await.unwrap());
    }
    let (renewed, read): (u64, u64) =
        (done[..RENEWERS].iter().sum(), done[RENEWERS..].iter().sum());
    println!("{LISTS} lists of {LEASES} among {renewed} renews and {read} owner reads");
    assert!(renewed > 0 && read > 0, "the lists ran under load");
    let consumers =
        |outcome: &str| format!("dagnats_list_consumers_total{{outcome=\"{outcome}\"}}");
    assert_eq!(http.metric(&consumers("listed")).await, LISTS);
    assert_eq!(
        http.metric(&consumers("behind")).await,
        0,
        "consumers taken for behind"
    );
}

/// The start of a reply, enough to say why a list failed.
fn brief(body: &Value) -> String {
    body.to_string().chars().take(300).collect()
}
