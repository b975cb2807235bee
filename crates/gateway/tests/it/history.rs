//! The tenure history (docs/protocol.md, Tenure history): every tenure
//! recorded once, from the bucket's own stream, whatever the number of
//! gateways; read newest first a page at a time over NATS, HTTP and the
//! CLI; kept for `--history-max-age`, or not at all with `0`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::common;
use crate::common::lease_ops::{acquire, release};
use crate::common::{
    Gateway, Http, NatsServer, Setup, assert_error, call, client, eventually, js_api, timestamp,
};
use futures::StreamExt;
use serde_json::{Value, json};

fn rev(v: &Value) -> u64 {
    v["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no revision: {v}"))
}

/// `api.leases.history` with `body`.
async fn history(client: &async_nats::Client, body: Value) -> Value {
    call(client, "history", body).await
}

/// The tenures of `key` once the history shows `n` of them ended, newest
/// first.
async fn ended(client: &async_nats::Client, key: &str, n: usize) -> Vec<Value> {
    eventually(
        &format!("{n} ended tenures of {key} in the history"),
        Duration::from_secs(30),
        || async {
            let reply = history(client, json!({"key": key})).await;
            let tenures = reply["tenures"].as_array().cloned().unwrap_or_default();
            let done = tenures.iter().filter(|t| !t["end"].is_null()).count();
            (done >= n).then_some(tenures)
        },
    )
    .await
}

/// The server's timestamp and revision of `key`'s last message.
async fn last_write(client: &async_nats::Client, key: &str) -> (String, u64) {
    let got = js_api(
        client,
        "STREAM.MSG.GET.KV_leases",
        json!({"last_by_subj": format!("$KV.leases.{key}")}),
    )
    .await;
    let message = &got["message"];
    (
        message["time"]
            .as_str()
            .expect("a stored message")
            .to_string(),
        message["seq"].as_u64().unwrap(),
    )
}

/// Every record of the history stream, oldest first: `(subject, body)`.
async fn records(client: &async_nats::Client) -> Vec<(String, Value)> {
    let info = js_api(client, "STREAM.INFO.leases_history", json!({})).await;
    let (first, last) = (
        info["state"]["first_seq"].as_u64().unwrap(),
        info["state"]["last_seq"].as_u64().unwrap(),
    );
    let mut out = Vec::new();
    for seq in first..=last {
        let got = js_api(client, "STREAM.MSG.GET.leases_history", json!({"seq": seq})).await;
        let message = &got["message"];
        if message.is_null() {
            continue;
        }
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD
            .decode(message["data"].as_str().unwrap())
            .unwrap();
        let subject = message["subject"].as_str().unwrap().to_string();
        out.push((subject, serde_json::from_slice(&data).unwrap()));
    }
    out
}

/// A tenure as the wire shows it, from its parts.
fn tenure(
    key: &str,
    holder: &str,
    start: &Value,
    end: Option<(&str, &str, u64)>,
    renewals: u64,
) -> Value {
    let (ended_at, end, end_revision) = match end {
        Some((how, at, revision)) => (json!(at), json!(how), json!(revision)),
        None => (Value::Null, Value::Null, Value::Null),
    };
    json!({
        "key": key, "holder": holder, "tenure": rev(start),
        "acquired_at": start["acquired_at"], "ended_at": ended_at, "end": end,
        "end_revision": end_revision, "renewals": renewals,
    })
}

/// The wire's form of a server timestamp (milliseconds, `Z`).
fn millis(at: &str) -> String {
    dagnats_leases_wire::timefmt::format(timestamp(&json!(at)))
}

#[tokio::test]
async fn acquire_renew_twice_release_is_one_tenure_released_with_two_renewals_at_the_release_revision()
 {
    let s = Setup::start().await;
    let granted = s.acquire("job-leader", "a", 15_000).await;
    let once = s.renew("job-leader", "a", rev(&granted), 15_000).await;
    let twice = s.renew("job-leader", "a", rev(&once), 15_000).await;
    let released = s.release("job-leader", "a", rev(&twice)).await;
    let (released_at, revision) = last_write(&s.client, "job-leader").await;
    assert_eq!(revision, rev(&released));
    let tenures = ended(&s.client, "job-leader", 1).await;
    let expected = tenure(
        "job-leader",
        "a",
        &granted,
        Some(("released", &millis(&released_at), rev(&released))),
        2,
    );
    assert_eq!(tenures, std::slice::from_ref(&expected));
    let reply = history(&s.client, json!({"key": "job-leader"})).await;
    assert_eq!(reply, json!({"tenures": [expected.clone()], "next": null}));
    let http = Http::of(&s.gateway).await;
    let one = http.get("/v1/leases/job-leader/history").await;
    assert_eq!((one.status, &one.body), (200, &reply));
    let all = http.get("/v1/history?prefix=job").await;
    assert_eq!((all.status, &all.body), (200, &reply));
}

#[tokio::test]
async fn an_open_tenure_has_null_ends_and_the_renewals_so_far() {
    let s = Setup::start().await;
    let granted = s.acquire("k", "a", 15_000).await;
    let renewed = s.renew("k", "a", rev(&granted), 15_000).await;
    s.renew("k", "a", rev(&renewed), 15_000).await;
    let open = tenure("k", "a", &granted, None, 2);
    eventually("the open tenure", Duration::from_secs(30), || async {
        let reply = history(&s.client, json!({"key": "k"})).await;
        (reply["tenures"] == json!([open.clone()])).then_some(())
    })
    .await;
}

#[tokio::test]
async fn renewing_writes_nothing_to_the_history() {
    let s = Setup::start().await;
    let granted = s.acquire("k", "a", 15_000).await;
    let open = tenure("k", "a", &granted, None, 0);
    eventually(
        "the tenure's start record",
        Duration::from_secs(30),
        || async {
            let reply = history(&s.client, json!({"key": "k"})).await;
            (reply["tenures"] == json!([open.clone()])).then_some(())
        },
    )
    .await;
    let before = records(&s.client).await;
    let mut fence = rev(&granted);
    for _ in 0..10 {
        fence = rev(&s.renew("k", "a", fence, 15_000).await);
    }
    let released = s.release("k", "a", fence).await;
    ended(&s.client, "k", 1).await;
    let after = records(&s.client).await;
    assert_eq!(
        after.len(),
        before.len() + 1,
        "ten renewals wrote nothing; the release one record: {after:?}"
    );
    assert_eq!(after.last().unwrap().1["renewals"], 10);
    assert_eq!(after.last().unwrap().1["end_revision"], rev(&released));
}

#[tokio::test]
async fn a_transfer_ends_one_tenure_transferred_and_starts_the_next_at_the_transfer_revision() {
    let s = Setup::start().await;
    let granted = s.acquire("k", "a", 15_000).await;
    let renewed = s.renew("k", "a", rev(&granted), 15_000).await;
    let moved = s.transfer("k", "a", rev(&renewed), "b", 15_000).await;
    let (moved_at, _) = last_write(&s.client, "k").await;
    let tenures = ended(&s.client, "k", 1).await;
    assert_eq!(
        tenures,
        [
            tenure("k", "b", &moved, None, 0),
            tenure(
                "k",
                "a",
                &granted,
                Some(("transferred", &millis(&moved_at), rev(&moved))),
                1
            ),
        ]
    );
}

#[tokio::test]
async fn an_admin_revoke_ends_the_tenure_revoked() {
    let s = Setup::start().await;
    let granted = s.acquire("k", "a", 15_000).await;
    let http = Http::of(&s.gateway).await;
    let revoked = http
        .send(http.request(reqwest::Method::DELETE, "/v1/leases/k"))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let (revoked_at, _) = last_write(&s.client, "k").await;
    let tenures = ended(&s.client, "k", 1).await;
    let end = ("revoked", millis(&revoked_at), rev(&revoked.body));
    let expected = tenure("k", "a", &granted, Some((end.0, &end.1, end.2)), 0);
    assert_eq!(tenures, [expected]);
}

/// Subscribes to `key`'s change events: the expiry marker is one of them.
async fn markers(client: &async_nats::Client, key: &str) -> async_nats::Subscriber {
    let sub = client
        .subscribe(format!("dagnats.lease.changed.{key}"))
        .await
        .unwrap();
    common::settle(client).await;
    sub
}

/// The next expiry marker among `events`: its server timestamp and revision.
async fn next_marker(events: &mut async_nats::Subscriber) -> (String, u64) {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("an expiry within 30 s")
            .unwrap();
        let headers = event.headers.unwrap_or_default();
        if headers.get("Nats-Marker-Reason").is_some() {
            let at = headers.get("Nats-Time-Stamp").unwrap().as_str().to_string();
            let revision = headers
                .get("Nats-Sequence")
                .unwrap()
                .as_str()
                .parse()
                .unwrap();
            return (at, revision);
        }
    }
}

#[tokio::test]
async fn a_kill_9d_holders_lease_is_recorded_expired_at_the_servers_marker() {
    let s = Setup::start().await;
    let mut events = markers(&s.client, "leader").await;
    let mut holder = common::command(
        &s.server.url,
        &["hold", "leader", "--holder", "h1", "--ttl-ms", "2000"],
    )
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let held = eventually("the holder to hold", Duration::from_secs(15), || async {
        let owner = call(&s.client, "owner", json!({"key": "leader"})).await;
        (owner["held"] == true).then_some(owner)
    })
    .await;
    holder.kill().unwrap();
    holder.wait().unwrap();
    let (marker_at, marker) = next_marker(&mut events).await;
    let tenures = ended(&s.client, "leader", 1).await;
    let last = &tenures[0];
    assert_eq!(last["end"], "expired", "{last}");
    assert_eq!(last["end_revision"], marker);
    assert_eq!(last["holder"], "h1");
    assert_eq!(last["acquired_at"], held["acquired_at"]);
    let recorded = timestamp(&last["ended_at"]);
    let marked = timestamp(&json!(marker_at));
    assert!(
        (recorded - marked).abs() <= time::Duration::seconds(2),
        "ended_at {recorded} is not within 2 s of the marker's {marked}"
    );
}

#[tokio::test]
async fn an_expiry_while_every_gateway_is_down_is_recorded_when_one_comes_back() {
    let server = NatsServer::start().await;
    let nats = client(&server.url).await;
    let gateway = Gateway::start(&server.url).await;
    let granted = call(&nats, "acquire", acquire("k", "a", 1_000)).await;
    ended_or_open(&nats, "k").await;
    let mut events = markers(&nats, "k").await;
    gateway.terminate().await;
    let (marker_at, marker) = next_marker(&mut events).await;
    let _back = Gateway::start(&server.url).await;
    let tenures = ended(&nats, "k", 1).await;
    let at = millis(&marker_at);
    let expected = tenure("k", "a", &granted, Some(("expired", &at, marker)), 0);
    assert_eq!(tenures, [expected]);
}

/// Waits until the history knows `key` (its tenure's start is recorded).
async fn ended_or_open(client: &async_nats::Client, key: &str) {
    eventually(
        "the tenure in the history",
        Duration::from_secs(30),
        || async {
            let reply = history(client, json!({"key": key})).await;
            (reply["tenures"].as_array().is_some_and(|t| !t.is_empty())).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn an_expiry_whose_marker_is_gone_before_a_gateway_returns_is_recorded_expired_when_it_was_due()
 {
    let server = NatsServer::start().await;
    let nats = client(&server.url).await;
    let gateway = Gateway::start(&server.url).await;
    let granted = call(&nats, "acquire", acquire("k", "a", 1_000)).await;
    ended_or_open(&nats, "k").await;
    gateway.terminate().await;
    eventually("the marker to be gone", Duration::from_secs(15), || async {
        let got = js_api(
            &nats,
            "STREAM.MSG.GET.KV_leases",
            json!({"last_by_subj": "$KV.leases.k"}),
        )
        .await;
        (got["error"]["err_code"] == 10037).then_some(())
    })
    .await;
    let _back = Gateway::start(&server.url).await;
    let tenures = ended(&nats, "k", 1).await;
    let last = &tenures[0];
    assert_eq!(last["end"], "expired", "{last}");
    assert_eq!(last["ended_at"], granted["expires_at"], "{last}");
    assert!(last["end_revision"].as_u64().unwrap() > rev(&granted));
}

/// Acquires and releases `job-<i>`: `((key, tenure), end revision)`. A
/// key of its own each time: a key written again before the history read
/// its last change may lose a tenure while no writer runs (docs/protocol.md,
/// Tenure history, what can be missed), and this is about duplicates.
async fn cycle(nats: &async_nats::Client, i: usize) -> ((String, u64), u64) {
    let key = format!("job-{i}");
    let granted = call(nats, "acquire", acquire(&key, "h", 15_000)).await;
    assert_eq!(granted["granted"], true, "{granted}");
    let released = call(nats, "release", release(&key, "h", rev(&granted))).await;
    ((key, rev(&granted)), rev(&released))
}

#[tokio::test]
async fn with_two_gateways_and_one_restarted_mid_way_each_tenure_is_recorded_exactly_once() {
    let server = NatsServer::start().await;
    let nats = client(&server.url).await;
    let first = Gateway::start(&server.url).await;
    let second = Gateway::start(&server.url).await;
    let mut expected = BTreeMap::new();
    for i in 0..20 {
        expected.extend([cycle(&nats, i).await]);
    }
    // Killed, not stopped: whatever it was writing is handed out again.
    drop(first);
    for i in 20..40 {
        expected.extend([cycle(&nats, i).await]);
    }
    let _again = Gateway::start(&server.url).await;
    drop(second);
    for i in 40..60 {
        expected.extend([cycle(&nats, i).await]);
    }
    let count = || async {
        let mut ended = BTreeMap::new();
        for (subject, record) in records(&nats).await {
            if record["end"].is_null() {
                continue;
            }
            let key = subject.trim_start_matches("dagnats.history.").to_string();
            let id = (key, record["tenure"].as_u64().unwrap());
            *ended.entry(id).or_insert(0u32) += 1;
        }
        ended
    };
    let caught_up = dagnats_leases_testkit::within(Duration::from_secs(60), || async {
        let ended = count().await;
        (ended.len() >= expected.len()).then_some(ended)
    })
    .await;
    let recorded = match caught_up {
        Some(recorded) => recorded,
        None => panic!(
            "the history recorded {:?} of {} tenures",
            count().await.keys().collect::<Vec<_>>(),
            expected.len()
        ),
    };
    let twice: Vec<_> = recorded.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "tenures recorded more than once: {twice:?}"
    );
    assert_eq!(
        recorded.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    let mut starts: HashMap<(String, u64), u32> = HashMap::new();
    for (subject, record) in records(&nats).await {
        let key = subject.trim_start_matches("dagnats.history.").to_string();
        if record["end"].is_null() {
            *starts
                .entry((key, record["tenure"].as_u64().unwrap()))
                .or_default() += 1;
        }
    }
    assert!(
        starts.values().all(|n| *n == 1),
        "a tenure's start recorded twice: {starts:?}"
    );
    let page = history(&nats, json!({"prefix": "job", "limit": 1000})).await;
    let listed: Vec<_> = page["tenures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let id = (
                t["key"].as_str().unwrap().to_string(),
                t["tenure"].as_u64().unwrap(),
            );
            assert_eq!(t["end_revision"], expected[&id], "{t}");
            id
        })
        .collect();
    assert_eq!(listed.len(), expected.len());
}

#[tokio::test]
async fn paging_with_before_returns_every_tenure_once_newest_first() {
    let s = Setup::start().await;
    let mut tenures = Vec::new();
    for i in 0..25 {
        let key = format!("page-{}", i % 3);
        let granted = s.acquire(&key, "h", 15_000).await;
        s.release(&key, "h", rev(&granted)).await;
        tenures.push(rev(&granted));
    }
    eventually("25 tenures", Duration::from_secs(30), || async {
        let all = history(&s.client, json!({"prefix": "page", "limit": 1000})).await;
        let done = all["tenures"].as_array().unwrap();
        (done.len() == 25 && done.iter().all(|t| !t["end"].is_null())).then_some(())
    })
    .await;
    let (seen, pages) = every_page(&s.client, "page", 7).await;
    assert_eq!(pages, 4);
    tenures.reverse();
    assert_eq!(seen, tenures, "every tenure once, newest first");
    let http = Http::of(&s.gateway).await;
    let first = http.get("/v1/history?prefix=page&limit=7").await;
    let next = first.body["next"].as_str().unwrap().to_string();
    let second = http
        .get(&format!("/v1/history?prefix=page&limit=7&before={next}"))
        .await;
    let ids = |reply: &common::HttpReply| -> Vec<u64> {
        reply.body["tenures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tenure"].as_u64().unwrap())
            .collect()
    };
    assert_eq!([ids(&first), ids(&second)].concat(), tenures[..14]);
}

/// Every tenure of keys starting with `prefix`, a page of `limit` at a
/// time: the tenures in the order the pages give them, and how many pages.
async fn every_page(client: &async_nats::Client, prefix: &str, limit: u64) -> (Vec<u64>, usize) {
    let (mut seen, mut pages, mut before) = (Vec::new(), 0, Value::Null);
    loop {
        let body = json!({"prefix": prefix, "limit": limit, "before": before});
        let page = history(client, body).await;
        pages += 1;
        let got = page["tenures"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"));
        assert!(got.len() as u64 <= limit, "{page}");
        seen.extend(got.iter().map(|t| t["tenure"].as_u64().unwrap()));
        if page["next"].is_null() {
            return (seen, pages);
        }
        before = page["next"].clone();
    }
}

#[tokio::test]
async fn paging_an_older_history_reads_back_window_by_window_and_returns_every_tenure_once() {
    let s = Setup::start().await;
    let mut tenures = Vec::new();
    let mut cycle = async |i: usize| {
        let key = format!("old-{}", i % 3);
        let granted = s.acquire(&key, "h", 15_000).await;
        s.release(&key, "h", rev(&granted)).await;
        tenures.push(rev(&granted));
    };
    for i in 0..10 {
        cycle(i).await;
    }
    // Older than the first window a newest-first read looks back over.
    let then = time::OffsetDateTime::now_utc();
    eventually("12 s to pass", Duration::from_secs(15), || async {
        (time::OffsetDateTime::now_utc() - then > Duration::from_secs(12)).then_some(())
    })
    .await;
    for i in 10..20 {
        cycle(i).await;
    }
    eventually("20 ended tenures", Duration::from_secs(30), || async {
        let all = history(&s.client, json!({"prefix": "old", "limit": 1000})).await;
        let done = all["tenures"].as_array().unwrap();
        (done.len() == 20 && done.iter().all(|t| !t["end"].is_null())).then_some(())
    })
    .await;
    tenures.reverse();
    let (seen, pages) = every_page(&s.client, "old", 5).await;
    assert_eq!(seen, tenures, "every tenure once, newest first");
    assert_eq!(pages, 4);
}

#[tokio::test]
async fn since_and_until_keep_the_tenures_that_overlap_them() {
    let s = Setup::start().await;
    let old = s.acquire("k", "a", 15_000).await;
    let old_end = s.release("k", "a", rev(&old)).await;
    let (between, _) = last_write(&s.client, "k").await;
    let new = s.acquire("k", "b", 15_000).await;
    ended(&s.client, "k", 1).await;
    // The wire's form of the instant the old tenure ended, as its record shows it.
    let at = millis(&between);
    let after_old = history(&s.client, json!({"key": "k", "since": at})).await;
    let held = tenure("k", "b", &new, None, 0);
    assert_eq!(
        after_old["tenures"],
        json!([
            held,
            tenure("k", "a", &old, Some(("released", &at, rev(&old_end))), 0)
        ]),
        "a tenure that ended at since overlaps it"
    );
    let only_old = history(&s.client, json!({"key": "k", "until": old["acquired_at"]})).await;
    assert_eq!(
        only_old["tenures"].as_array().unwrap().len(),
        1,
        "{only_old}"
    );
    assert_eq!(only_old["tenures"][0]["holder"], "a");
}

#[tokio::test]
async fn the_history_stream_sits_beside_the_bucket_at_its_replicas_kept_7_days_by_default() {
    let cluster = common::cluster::Cluster::start().await;
    let _gateway = common::cluster::gateway(&cluster.urls()).await;
    let nats = cluster.client().await;
    let bucket = common::stream_info(&nats).await;
    let history = js_api(&nats, "STREAM.INFO.leases_history", json!({})).await;
    let config = &history["config"];
    assert_eq!(bucket["config"]["num_replicas"], 3, "{bucket}");
    assert_eq!(
        (&config["num_replicas"], &config["storage"]),
        (
            &bucket["config"]["num_replicas"],
            &bucket["config"]["storage"]
        ),
        "{history}"
    );
    assert_eq!(
        (&config["subjects"], &config["max_age"]),
        (
            &json!(["dagnats.history.>"]),
            &json!(7 * 86_400 * 1_000_000_000u64)
        ),
        "{history}"
    );
    let peers = history["cluster"]["replicas"].as_array().map(Vec::len);
    assert_eq!(peers, Some(common::cluster::NODES - 1), "{history}");
}

#[tokio::test]
async fn a_short_history_max_age_drops_old_tenures() {
    let server = NatsServer::start().await;
    let nats = client(&server.url).await;
    let _gateway = Gateway::start_with(&server.url, &["--history-max-age", "3s"], &[]).await;
    let old = call(&nats, "acquire", acquire("old", "a", 15_000)).await;
    call(&nats, "release", release("old", "a", rev(&old))).await;
    ended(&nats, "old", 1).await;
    let info = js_api(&nats, "STREAM.INFO.leases_history", json!({})).await;
    assert_eq!(info["config"]["max_age"], 3_000_000_000u64);
    eventually(
        "the old tenure to age out",
        Duration::from_secs(15),
        || async {
            let reply = history(&nats, json!({"key": "old"})).await;
            (reply["tenures"] == json!([])).then_some(())
        },
    )
    .await;
    let new = call(&nats, "acquire", acquire("new", "a", 15_000)).await;
    ended_or_open(&nats, "new").await;
    let reply = history(&nats, json!({})).await;
    assert_eq!(reply["tenures"], json!([tenure("new", "a", &new, None, 0)]));
}

#[tokio::test]
async fn history_max_age_0_answers_an_empty_history_and_writes_nothing() {
    let server = NatsServer::start().await;
    let nats = client(&server.url).await;
    let gateway = Gateway::start_with(&server.url, &[], &[("DAGNATS_HISTORY_MAX_AGE", "0")]).await;
    let granted = call(&nats, "acquire", acquire("k", "a", 15_000)).await;
    call(&nats, "release", release("k", "a", rev(&granted))).await;
    assert_eq!(
        history(&nats, json!({"key": "k"})).await,
        json!({"tenures": [], "next": null})
    );
    let http = Http::of(&gateway).await;
    let reply = http.get("/v1/history").await;
    assert_eq!(
        (reply.status, reply.body),
        (200, json!({"tenures": [], "next": null}))
    );
    let streams = js_api(&nats, "STREAM.NAMES", json!({})).await;
    assert_eq!(
        streams["streams"],
        json!(["KV_leases"]),
        "no history stream"
    );
    let consumers = js_api(&nats, "CONSUMER.NAMES.KV_leases", json!({})).await;
    assert_eq!(consumers["consumers"], json!([]), "no history consumer");
    // Still invalid when off: the request is checked before anything else.
    let bad = history(&nats, json!({"limit": 0})).await;
    assert_eq!(bad["kind"], "invalid", "{bad}");
}

#[tokio::test]
async fn every_bad_history_input_is_invalid_and_the_gateway_keeps_serving() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    for (body, query) in [
        (json!({"since": "yesterday"}), "since=yesterday"),
        (
            json!({"until": "2026-13-01T00:00:00Z"}),
            "until=2026-13-01T00:00:00Z",
        ),
        (
            json!({"since": "2026-10-18T12:00:01Z", "until": "2026-10-18T12:00:00Z"}),
            "since=2026-10-18T12:00:01Z&until=2026-10-18T12:00:00Z",
        ),
        (json!({"key": "a.b"}), "key=a.b"),
        (json!({"key": ""}), "key="),
        (json!({"prefix": "a*"}), "prefix=a*"),
        (json!({"limit": 0}), "limit=0"),
        (json!({"limit": 1001}), "limit=1001"),
        (json!({"limit": "ten"}), "limit=ten"),
        (json!({"before": "x"}), "before=x"),
    ] {
        let reply = history(&s.client, body.clone()).await;
        assert_eq!(reply["kind"], "invalid", "{body}: {reply}");
        assert!(reply["error"].as_str().is_some_and(|e| !e.is_empty()));
        let over_http = http.get(&format!("/v1/history?{query}")).await;
        assert_error(&over_http, 400, "invalid");
        if body.get("key").is_none() && body.get("prefix").is_none() {
            let one_key = http.get(&format!("/v1/leases/k/history?{query}")).await;
            assert_error(&one_key, 400, "invalid");
        }
    }
    for bad in [&b"[]"[..], b"not json", b"{\"limit\": -1}"] {
        let reply = common::call_raw(&s.client, "history", bad.to_vec()).await;
        assert_eq!(reply["kind"], "invalid", "{reply}");
    }
    let key_path = http.get("/v1/leases/a*b/history").await;
    assert_error(&key_path, 400, "invalid");
    let granted = s.acquire("k", "a", 15_000).await;
    assert_eq!(granted["granted"], true, "still serving: {granted}");
}

/// `dagnats-leases` with `args` against `s`'s server: exit code and stdout.
fn cli(s: &Setup, args: &[&str]) -> (i32, String) {
    let out = common::command(&s.server.url, args).output().unwrap();
    let code = out.status.code().expect("exited");
    (code, String::from_utf8(out.stdout).unwrap())
}

#[tokio::test]
async fn the_cli_prints_a_keys_a_prefixs_or_every_tenure_newest_first_as_lines_or_json() {
    let s = Setup::start().await;
    let first = s.acquire("cli-k", "a", 15_000).await;
    let released = s.release("cli-k", "a", rev(&first)).await;
    let second = s.acquire("cli-k", "b", 15_000).await;
    ended(&s.client, "cli-k", 1).await;
    let other = s.acquire("other", "c", 15_000).await;
    ended_or_open(&s.client, "other").await;
    let json_lines = |args: &[&str]| -> Vec<Value> {
        let (code, out) = cli(&s, args);
        assert_eq!(code, 0, "{out}");
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let lines = json_lines(&["history", "cli-k", "--json"]);
    let reply = history(&s.client, json!({"key": "cli-k"})).await;
    assert_eq!(json!(lines), reply["tenures"], "one JSON tenure a line");
    assert_eq!(lines[0]["tenure"], rev(&second));
    assert_eq!(lines[1]["end_revision"], rev(&released));
    let by_prefix = json_lines(&["history", "--prefix", "cli-", "--json"]);
    assert_eq!(by_prefix, lines, "the prefix's keys only");
    let every = json_lines(&["history", "--json"]);
    assert_eq!(every[0], tenure("other", "c", &other, None, 0));
    assert_eq!(every[1..], lines);
    let (code, out) = cli(&s, &["history", "cli-k", "--since", "1h", "--limit", "1"]);
    assert_eq!(code, 0, "{out}");
    let line = format!(
        "cli-k  b  {} -> now  held  tenure {}  renewals 0\n",
        second["acquired_at"].as_str().unwrap(),
        rev(&second)
    );
    assert_eq!(out, line);
}

#[tokio::test]
async fn every_bad_history_input_to_the_cli_exits_2_and_asks_nothing() {
    let s = Setup::start().await;
    let mut asked = s.client.subscribe("api.leases.>").await.unwrap();
    common::settle(&s.client).await;
    for bad in [
        &["history", "a.b"][..],
        &["history", "--prefix", "a*"],
        &["history", "--since", "yesterday"],
        &["history", "--until", "2026-13-01T00:00:00Z"],
        &["history", "--since", "1m", "--until", "2h"],
        &["history", "--limit", "0"],
        &["history", "--limit", "ten"],
    ] {
        let (code, out) = cli(&s, bad);
        assert_eq!((code, out.as_str()), (2, ""), "{bad:?}");
    }
    // Whatever the commands sent reached the server before they exited.
    common::settle(&s.client).await;
    let sent = futures::FutureExt::now_or_never(asked.next());
    assert!(sent.is_none(), "a request was sent: {sent:?}");
    let granted = s.acquire("k", "a", 15_000).await;
    assert_eq!(granted["granted"], true, "still serving: {granted}");
}

/// The value of `series` on `/metrics` once it is `want`, within 30 s.
async fn metric_reaches(http: &Http, series: &str, want: f64) {
    let prefix = format!("{series} ");
    let got = dagnats_leases_testkit::within(Duration::from_secs(30), || async {
        let text = http.metrics().await;
        let value = text
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.parse::<f64>().ok());
        (value == Some(want)).then_some(())
    })
    .await;
    if got.is_none() {
        let text = http.metrics().await;
        let shown: Vec<&str> = text.lines().filter(|l| l.starts_with("dagnats_")).collect();
        panic!("{series} never reached {want}: {shown:#?}");
    }
}

#[tokio::test]
async fn the_history_counts_ended_tenures_hand_overs_and_a_flapping_key_on_metrics() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    let holders = ["a", "b"];
    let mut fence = rev(&s.acquire("flap-1", "a", 15_000).await);
    for i in 0..6 {
        let (from, to) = (holders[i % 2], holders[(i + 1) % 2]);
        fence = rev(&s.transfer("flap-1", from, fence, to, 15_000).await);
    }
    let refused = s.acquire("flap-1", "c", 15_000).await;
    assert_eq!(refused["granted"], false, "{refused}");
    s.release("flap-1", "a", fence).await;
    metric_reaches(
        &http,
        r#"dagnats_tenures_ended_total{end="transferred"}"#,
        6.0,
    )
    .await;
    metric_reaches(&http, r#"dagnats_tenures_ended_total{end="released"}"#, 1.0).await;
    metric_reaches(&http, "dagnats_tenure_duration_seconds_count", 7.0).await;
    metric_reaches(&http, r#"dagnats_handovers_total{prefix="flap"}"#, 6.0).await;
    metric_reaches(&http, r#"dagnats_key_flapping{key="flap-1"}"#, 1.0).await;
    metric_reaches(&http, "dagnats_flapping_keys", 1.0).await;
    metric_reaches(&http, "dagnats_acquires_not_granted_total", 1.0).await;
}

#[tokio::test]
async fn tenures_ended_by_expiry_and_by_revoke_are_counted_by_their_end() {
    let s = Setup::start().await;
    let http = Http::of(&s.gateway).await;
    s.acquire("gone", "a", 1_000).await;
    s.acquire("taken", "a", 15_000).await;
    let revoked = http
        .send(http.request(reqwest::Method::DELETE, "/v1/leases/taken"))
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    metric_reaches(&http, r#"dagnats_tenures_ended_total{end="revoked"}"#, 1.0).await;
    metric_reaches(&http, r#"dagnats_tenures_ended_total{end="expired"}"#, 1.0).await;
    metric_reaches(&http, "dagnats_tenure_duration_seconds_count", 2.0).await;
}

/// `key` held by "a" while a waiter for it (started by the caller) is
/// refused, then released: once the waiter is granted, `granted` says so,
/// the gateway has counted one wait, and it was longer than nothing.
async fn the_wait_is_counted<F, G>(s: &Setup, key: &str, held: &Value, granted: G)
where
    G: FnOnce() -> F,
    F: Future<Output = ()>,
{
    let http = Http::of(&s.gateway).await;
    metric_reaches(&http, "dagnats_acquires_not_granted_total", 1.0).await;
    s.release(key, "a", rev(held)).await;
    granted().await;
    metric_reaches(&http, "dagnats_acquire_wait_seconds_count", 1.0).await;
    let text = http.metrics().await;
    let waited: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("dagnats_acquire_wait_seconds_sum ")?
                .parse()
                .ok()
        })
        .expect("a wait recorded");
    assert!(waited > 0.0, "the waiter had waited, {waited} s: {text}");
}

/// Waits until `holder` holds `key`.
async fn held_by(s: &Setup, key: &str, holder: &str) {
    eventually(
        &format!("{holder} to hold {key}"),
        Duration::from_secs(15),
        || async {
            let owner = s.call("owner", json!({"key": key})).await;
            (owner["holder"] == holder).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_waiting_keepers_grant_counts_how_long_it_waited() {
    use dagnats_leases_client::{KeeperOptions, LeaseClient, LeaseKeeper};
    let s = Setup::start().await;
    let held = s.acquire("wait-1", "a", 15_000).await;
    let keeper = LeaseKeeper::start(
        LeaseClient::new(s.client.clone()),
        KeeperOptions {
            key: "wait-1".into(),
            holder: "b".into(),
            ttl: Duration::from_secs(15),
            wait: true,
        },
    );
    the_wait_is_counted(&s, "wait-1", &held, || held_by(&s, "wait-1", "b")).await;
    keeper.shutdown().await;
}

#[tokio::test]
async fn holds_grant_after_waiting_counts_how_long_it_waited() {
    let s = Setup::start().await;
    let held = s.acquire("wait-hold", "a", 15_000).await;
    let args = ["hold", "wait-hold", "--holder", "b", "--ttl-ms", "15000"];
    let mut hold = common::command(&s.server.url, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    the_wait_is_counted(&s, "wait-hold", &held, || held_by(&s, "wait-hold", "b")).await;
    hold.kill().unwrap();
    hold.wait().unwrap();
}

#[tokio::test]
async fn runs_grant_after_waiting_counts_how_long_it_waited() {
    let s = Setup::start().await;
    let held = s.acquire("wait-run", "a", 15_000).await;
    let args = ["run", "wait-run", "--holder", "b", "--", "true"];
    let run = common::command(&s.server.url, &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let run = std::cell::RefCell::new(run);
    // The command exits at once: run's exit says it was granted.
    let ran = || async {
        let status = eventually("run to exit", Duration::from_secs(15), || async {
            run.borrow_mut().try_wait().unwrap()
        })
        .await;
        assert_eq!(status.code(), Some(0), "run ran its command");
    };
    the_wait_is_counted(&s, "wait-run", &held, ran).await;
}
