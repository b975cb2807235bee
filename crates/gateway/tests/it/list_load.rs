//! Lists of a bucket in production use: 10,000 leases on a three-node
//! cluster at R3, renewed and read by owner while lists run. A load run by
//! hand, like the long fault run (`cargo test --release --test it list_load
//! -- --ignored --nocapture`): on two cores it takes half a minute and
//! every other test's servers would share them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common;
use crate::common::cluster::{self, Cluster};
use crate::common::renewing::{Refused, Renewing};
use crate::common::{Http, eventually, lease_ops};
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
#[ignore = "load (cargo test --release --test it list_load -- --ignored --nocapture)"]
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
    let renewing = Renewing::start(&client, &held, RENEWERS, 60_000, Refused::Retried);
    let stop = CancellationToken::new();
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for reader in 0..READERS {
        let (client, stop, reads) = (client.clone(), stop.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
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
    let renewed = renewing.stop().await;
    let mut read = 0;
    for reader in readers {
        read += reader.await.unwrap();
    }
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
