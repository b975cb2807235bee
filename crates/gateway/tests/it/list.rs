//! `api.leases.list` over NATS: the held leases sorted by key, each as
//! `api.leases.owner` answers it, a page at a time (`after`, `limit`,
//! `next`), never over the server's max_payload.

use crate::common;
use crate::common::Setup;
use crate::common::renewing::{Refused, Renewing};
use serde_json::{Value, json};

/// The keys of a list reply, in its order.
fn keys(list: &Value) -> Vec<String> {
    list["leases"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|l| l["key"].as_str().unwrap().to_string())
        .collect()
}

/// Acquires `keys` for holder "h" and returns them sorted.
async fn acquire_all(s: &Setup, keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut keys: Vec<String> = keys.into_iter().collect();
    let grants = keys.iter().map(|key| s.acquire(key, "h", 15_000));
    for grant in futures::future::join_all(grants).await {
        assert_eq!(grant["granted"], true, "{grant}");
    }
    keys.sort();
    keys
}

/// Every page from the start, `limit` at a time: the pages' keys.
async fn pages(s: &Setup, prefix: &str, limit: u64) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = s
            .list(json!({"prefix": prefix, "after": after, "limit": limit}))
            .await;
        let got = keys(&page);
        assert!(got.len() as u64 <= limit, "{page}");
        let next = page["next"].clone();
        if !next.is_null() {
            assert_eq!(next.as_str(), got.last().map(String::as_str), "{page}");
        }
        pages.push(got);
        if next.is_null() {
            return pages;
        }
        after = next;
        assert!(pages.len() < 100, "paging does not end");
    }
}

#[tokio::test]
async fn list_answers_held_leases_sorted_by_key_each_as_owner_answers_it() {
    let s = Setup::start().await;
    for key in ["shard-2", "leader", "shard-10", "shard-1"] {
        s.acquire(key, "h", 15_000).await;
    }
    let gone = s.acquire("shard-3", "h", 15_000).await;
    s.release("shard-3", "h", &gone["revision"]).await;
    let list = s.list(json!({})).await;
    assert_eq!(keys(&list), ["leader", "shard-1", "shard-10", "shard-2"]);
    assert_eq!(list.as_object().unwrap().len(), 2, "{list}");
    assert_eq!(list["next"], Value::Null);
    for lease in list["leases"].as_array().unwrap() {
        assert_eq!(*lease, s.owner(lease["key"].as_str().unwrap()).await);
    }
}

#[tokio::test]
async fn list_keeps_only_keys_with_the_prefix() {
    let s = Setup::start().await;
    for key in ["shard-2", "leader", "shard-1", "shar"] {
        s.acquire(key, "h", 15_000).await;
    }
    let shards = s.list(json!({"prefix": "shard-"})).await;
    assert_eq!(keys(&shards), ["shard-1", "shard-2"]);
    let none = s.list(json!({"prefix": "nothing"})).await;
    assert_eq!(none, json!({"leases": [], "next": null}));
    let all = s.list(json!({"prefix": null})).await;
    assert_eq!(keys(&all).len(), 4);
}

#[tokio::test]
async fn after_and_limit_page_through_every_lease_exactly_once() {
    let s = Setup::start().await;
    let all = acquire_all(&s, (0..25).map(|i| format!("k-{i}"))).await;
    acquire_all(&s, ["other".to_string()]).await;
    let pages = pages(&s, "k-", 7).await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [7, 7, 7, 4]);
    assert_eq!(pages.concat(), all);
}

#[tokio::test]
async fn a_page_that_ends_at_the_last_lease_has_next_null() {
    let s = Setup::start().await;
    let all = acquire_all(&s, (0..6).map(|i| format!("k-{i}"))).await;
    // Exactly two full pages: the second one is the end, not a third empty one.
    let pages = pages(&s, "", 3).await;
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert_eq!(pages.concat(), all);
    // After the last key there is nothing, and `next` says so.
    let past = s.list(json!({"after": all.last().unwrap()})).await;
    assert_eq!(past, json!({"leases": [], "next": null}));
}

#[tokio::test]
async fn without_a_limit_a_list_answers_at_most_1000_leases() {
    let s = Setup::start().await;
    let mut all = Vec::new();
    for chunk in 0..11 {
        let batch = (0..100).map(|i| format!("k-{:04}", chunk * 100 + i));
        all.extend(acquire_all(&s, batch).await);
    }
    all.sort();
    let first = s.list(json!({})).await;
    assert_eq!(keys(&first), all[..1000]);
    assert_eq!(first["next"], all[999]);
    let rest = s.list(json!({"after": all[999]})).await;
    assert_eq!(keys(&rest), all[1000..]);
    assert_eq!(rest["next"], Value::Null);
}

#[tokio::test]
async fn an_invalid_limit_or_after_is_invalid_and_the_list_still_serves() {
    let s = Setup::start().await;
    s.acquire("k", "h", 15_000).await;
    for bad in [
        json!({"limit": 0}),
        json!({"limit": 5001}),
        json!({"limit": 1.5}),
        json!({"limit": "x"}),
        json!({"limit": -1}),
        json!({"after": ""}),
        json!({"after": "a.b"}),
        json!({"after": "*"}),
        json!({"after": 5}),
        json!({"after": "k".repeat(129)}),
        json!({"prefix": "a b"}),
    ] {
        let reply = s.list(bad.clone()).await;
        assert_eq!(reply["kind"], "invalid", "{bad}: {reply}");
        assert!(reply["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    let reply = common::call_raw(&s.client, "list", b"[]".to_vec()).await;
    assert_eq!(reply["kind"], "invalid", "{reply}");
    for good in [
        json!({"limit": 1}),
        json!({"limit": 5000}),
        json!({"limit": 2.0}),
    ] {
        assert_eq!(keys(&s.list(good).await), ["k"]);
    }
}

#[tokio::test]
async fn a_list_reply_never_exceeds_max_payload_and_names_next_instead() {
    const MAX_PAYLOAD: usize = 4096;
    let (s, _config) = Setup::with_max_payload(MAX_PAYLOAD).await;
    let all = acquire_all(&s, (0..60).map(|i| format!("shard-{i:02}"))).await;
    let body = json!({"limit": 5000}).to_string().into_bytes();
    let text = common::call_text(&s.client, "list", body).await;
    assert!(text.len() <= MAX_PAYLOAD, "{} bytes", text.len());
    let page: Value = serde_json::from_str(&text).unwrap();
    let got = keys(&page);
    assert!(
        !got.is_empty() && got.len() < all.len(),
        "{} leases",
        got.len()
    );
    assert_eq!(got, all[..got.len()]);
    assert_eq!(page["next"].as_str(), got.last().map(String::as_str));
    // Paging on from `next` still reaches every lease exactly once.
    let pages = pages(&s, "", 5000).await;
    assert!(pages.len() > 1);
    assert_eq!(pages.concat(), all);
}

#[tokio::test]
async fn the_client_library_pages_through_every_lease() {
    let s = Setup::start().await;
    let all = acquire_all(&s, (0..9).map(|i| format!("k-{i}"))).await;
    let leases = dagnats_leases_client::LeaseClient::new(s.client.clone());
    let (mut seen, mut after) = (Vec::new(), None);
    loop {
        let page = leases.list("k-", after.as_deref(), Some(4)).await.unwrap();
        assert!(page.leases.len() <= 4);
        seen.extend(page.leases.into_iter().map(|lease| lease.key));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, all);
    let err = leases.list("", None, Some(5001)).await.unwrap_err();
    assert!(
        matches!(err, dagnats_leases_client::ClientError::Invalid(_)),
        "{err:?}"
    );
}

/// Operators see how lists are served: each consumer a list made counts
/// once, by what came of it. One node is never behind itself, so each list
/// here takes one consumer.
#[tokio::test]
async fn each_consumer_a_list_makes_is_counted_by_what_came_of_it() {
    let s = Setup::start().await;
    s.acquire("k", "h", 15_000).await;
    let http = common::Http::of(&s.gateway).await;
    for listed in 1..=3 {
        assert_eq!(keys(&s.list(json!({})).await), ["k"]);
        let outcome =
            |outcome: &str| format!("dagnats_list_consumers_total{{outcome=\"{outcome}\"}}");
        assert_eq!(http.metric(&outcome("listed")).await, listed);
        for other in [
            "failed",
            "behind",
            "no_meta_leader",
            "not_listening",
            "no_end",
        ] {
            assert_eq!(http.metric(&outcome(other)).await, 0, "{other}");
        }
    }
}

/// `count` leases `k-<i>` held by "h" for 15 s, renewed by `workers`
/// tasks round after round, each renew granted; their keys, sorted.
async fn hold_renewing(s: &Setup, count: usize, workers: usize) -> (Vec<String>, Renewing) {
    let mut held = Vec::new();
    for i in 0..count {
        let key = format!("k-{i:04}");
        let grant = s.acquire(&key, "h", 15_000).await;
        held.push((key, grant["revision"].as_u64().unwrap()));
    }
    let keys = held.iter().map(|(key, _)| key.clone()).collect();
    let renewing = Renewing::start(&s.client, &held, workers, 15_000, Refused::Fails);
    (keys, renewing)
}

/// Renewing a key rewrites it at the end of the stream, past where a list
/// may be reading: the list must still find it. Keys renewed as fast as
/// the gateway takes it while lists run; every list names every key.
#[tokio::test]
async fn a_list_names_every_lease_held_throughout_it_while_they_are_renewed() {
    let s = Setup::start().await;
    let (all, renewing) = hold_renewing(&s, 200, 8).await;
    for round in 0..40 {
        let listed = keys(&s.list(json!({"prefix": "k-"})).await);
        assert_eq!(listed, all, "list {round} left a held lease out");
    }
    assert!(
        renewing.stop().await > 0,
        "the keys were renewed while listed"
    );
}

/// Every list writes a barrier, and the one its consumer started from is
/// rewritten by the next list before the consumer gets to it: lists side
/// by side, while the keys are renewed, each still answers every key.
#[tokio::test]
async fn lists_side_by_side_while_leases_are_renewed_each_answer_every_lease() {
    let s = Setup::start().await;
    let (all, renewing) = hold_renewing(&s, 1000, 4).await;
    let listers = (0..4).map(|lister| {
        let (client, all) = (s.client.clone(), all.clone());
        async move {
            for round in 0..10 {
                let list = common::call(&client, "list", json!({"prefix": "k-"})).await;
                let listed = keys(&list);
                let missing: Vec<&String> = all.iter().filter(|k| !listed.contains(k)).collect();
                assert_eq!(listed.len(), all.len(), "list {round} of lister {lister}");
                assert!(
                    missing.is_empty(),
                    "list {round} of lister {lister} left out {missing:?}"
                );
            }
        }
    });
    futures::future::join_all(listers).await;
    assert!(
        renewing.stop().await > 0,
        "the keys were renewed while listed"
    );
}

/// A snapshot walks every key, so lists at once on one gateway share them:
/// one is taken at a time, and the lists that arrive while it is taken
/// share the next. Twenty lists at once cost a few consumers, and each
/// still names every lease.
#[tokio::test]
async fn lists_at_once_on_one_gateway_share_snapshots_and_each_names_every_lease() {
    const LISTS: u64 = 20;
    let s = Setup::start().await;
    let all = acquire_all(&s, (0..500).map(|i| format!("k-{i:04}"))).await;
    let http = common::Http::of(&s.gateway).await;
    let lists = (0..LISTS).map(|_| s.list(json!({"prefix": "k-"})));
    for (i, list) in futures::future::join_all(lists).await.iter().enumerate() {
        assert_eq!(keys(list), all, "list {i}");
    }
    let snapshots = http
        .metric(r#"dagnats_list_consumers_total{outcome="listed"}"#)
        .await;
    let shared = http
        .metric(r#"dagnats_store_confirmations_shared_total{what="list"}"#)
        .await;
    println!("{LISTS} lists at once: {snapshots} snapshots, {shared} shared");
    assert!(
        (1..=LISTS / 2).contains(&snapshots),
        "{LISTS} lists at once took {snapshots} snapshots"
    );
    assert_eq!(
        snapshots + shared,
        LISTS,
        "each list took a snapshot or shared one"
    );
}

/// A list shares only a snapshot begun after it arrived: one begun before
/// may miss a write acknowledged in between. While three listers keep a
/// snapshot of 500 leases in flight, a lease is acquired and then listed:
/// the list names it, every round.
#[tokio::test]
async fn a_list_never_answers_from_a_snapshot_begun_before_it_arrived() {
    let s = Setup::start().await;
    acquire_all(&s, (0..500).map(|i| format!("k-{i:04}"))).await;
    let stop = tokio_util::sync::CancellationToken::new();
    let listers: Vec<_> = (0..3)
        .map(|_| {
            let (client, stop) = (s.client.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lists = 0;
                while !stop.is_cancelled() {
                    let list = common::call(&client, "list", json!({"prefix": "k-"})).await;
                    assert_eq!(keys(&list).len(), 500, "{list}");
                    lists += 1;
                }
                lists
            })
        })
        .collect();
    for round in 0..30 {
        let key = format!("new-{round:02}");
        let grant = s.acquire(&key, "h", 15_000).await;
        assert_eq!(grant["granted"], true, "{grant}");
        let list = s.list(json!({"prefix": "new-"})).await;
        assert!(
            keys(&list).contains(&key),
            "round {round}: a list left out {key}, acquired before it began: {list}"
        );
    }
    stop.cancel();
    for lister in listers {
        assert!(lister.await.unwrap() > 0, "the listers listed meanwhile");
    }
}
