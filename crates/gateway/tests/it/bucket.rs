//! The `leases` bucket: provisioned as docs/protocol.md, Storage: the leases
//! bucket, says, never
//! deleted or recreated, updated where safe, refused where not.

use std::time::Duration;

use crate::common;
use crate::common::{Gateway, NatsServer, Setup, client, eventually, js_api, stream_info};
use base64::Engine;
use serde_json::{Value, json};

#[tokio::test]
async fn bucket_is_provisioned_as_the_contract_says() {
    let s = Setup::start().await;
    let info = stream_info(&s.client).await;
    let config = &info["config"];
    assert_eq!(config["name"], "KV_leases");
    assert_eq!(
        config["subjects"],
        json!(["$KV.leases.>", "dagnats.leases.barrier.*"])
    );
    assert_eq!(config["max_msgs_per_subject"], 1);
    assert_eq!(config["allow_msg_ttl"], true);
    assert_eq!(config["subject_delete_marker_ttl"], 5_000_000_000u64);
    assert_eq!(config["allow_direct"], false);
    assert_eq!(
        config["republish"],
        json!({"src": "$KV.leases.*", "dest": "dagnats.lease.changed.{{wildcard(1)}}"})
    );
    assert_eq!(config["num_replicas"], 1);
    assert_eq!(config["storage"], "file");
    assert_eq!(config["max_age"], 0);
    assert_eq!(config["allow_rollup_hdrs"], true);
    // nats-server 2.12+ (the tests run 2.15): writes may share atomic batches.
    assert_eq!(config["allow_atomic"], true);
}

async fn create_stream(client: &async_nats::Client, config: Value) {
    let created = js_api(client, "STREAM.CREATE.KV_leases", config).await;
    assert!(created.get("error").is_none(), "{created}");
}

async fn assert_refused(config: Value, reason: &str) {
    let server = NatsServer::start().await;
    let c = client(&server.url).await;
    create_stream(&c, config).await;
    assert_refused_on(&server, &c, reason).await;
}

/// A gateway started on `server`, whose `KV_leases` exists, refuses it for
/// `reason` and leaves it as it was.
async fn assert_refused_on(server: &NatsServer, c: &async_nats::Client, reason: &str) {
    let before = stream_info(c).await["config"].clone();
    let mut gateway = Gateway::spawn(&server.url, &[], &[]);
    let status = gateway
        .wait_exit(Duration::from_secs(15))
        .await
        .expect("the gateway refuses to start");
    assert!(!status.success());
    let log = gateway.log.text();
    assert!(
        log.contains("refusing to use the existing KV_leases stream"),
        "{log}"
    );
    assert!(log.contains(reason), "{log}");
    assert_eq!(
        stream_info(c).await["config"],
        before,
        "the stream was touched"
    );
}

#[tokio::test]
async fn existing_bucket_on_memory_storage_is_refused() {
    let config = json!({"name": "KV_leases", "subjects": ["$KV.leases.>"], "storage": "memory",
        "allow_msg_ttl": true, "max_msgs_per_subject": 1});
    assert_refused(config, "file storage").await;
}

#[tokio::test]
async fn existing_stream_with_other_subjects_is_refused() {
    let config = json!({"name": "KV_leases", "subjects": ["something.else.>"], "storage": "file"});
    assert_refused(config, "subjects").await;
}

/// The stream as gateways made it before the barriers had subjects of
/// their own.
fn earlier_gateways_stream() -> Value {
    json!({"name": "KV_leases", "subjects": ["$KV.leases.>"], "storage": "file",
        "max_msgs_per_subject": 1, "max_age": 0, "allow_rollup_hdrs": true,
        "allow_direct": false, "allow_msg_ttl": true,
        "subject_delete_marker_ttl": 5_000_000_000u64,
        "republish": {"src": "$KV.leases.*", "dest": "dagnats.lease.changed.{{wildcard(1)}}"},
        "discard": "new", "deny_delete": true, "num_replicas": 1, "allow_atomic": true})
}

#[tokio::test]
async fn a_bucket_of_earlier_gateways_gets_the_barrier_subjects_in_place_and_loses_their_barriers()
{
    let server = NatsServer::start().await;
    let c = client(&server.url).await;
    create_stream(&c, earlier_gateways_stream()).await;
    // A lease, and the barriers earlier gateways wrote among the keys.
    let written_at = time::OffsetDateTime::now_utc();
    let seq = common::records::write_lease(&c, "k", "h", 60_000, written_at, 60).await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        "Nats-Expected-Last-Subject-Sequence",
        seq.to_string().as_str(),
    );
    headers.insert(
        "Nats-Expected-Last-Subject-Sequence-Subject",
        "$KV.leases.k",
    );
    for (subject, headers) in [
        ("$KV.leases._dagnats.read", headers),
        ("$KV.leases._dagnats.list", async_nats::HeaderMap::new()),
    ] {
        let ack = c
            .request_with_headers(subject, headers, "".into())
            .await
            .unwrap();
        let ack: Value = serde_json::from_slice(&ack.payload).unwrap();
        assert!(ack["seq"].as_u64().is_some(), "{ack}");
    }
    let before = stream_info(&c).await;

    let gateway = Gateway::start(&server.url).await;
    let after = stream_info(&c).await;
    assert_eq!(
        after["created"], before["created"],
        "updated, not recreated"
    );
    assert_eq!(
        after["config"]["subjects"],
        json!(["$KV.leases.>", "dagnats.leases.barrier.*"])
    );
    let leftovers = js_api(
        &c,
        "STREAM.INFO.KV_leases",
        json!({"subjects_filter": "$KV.leases._dagnats.>"}),
    )
    .await;
    assert!(
        leftovers["state"].get("subjects").is_none(),
        "the earlier barriers were purged: {leftovers}"
    );
    assert!(gateway.log.text().contains("purged the barriers"));
    assert_eq!(
        after["state"]["last_seq"], before["state"]["last_seq"],
        "the sequence, hence every fence, is where it was"
    );
    // The lease is served as it was, and its next fence is above them all.
    let owner = common::call(&c, "owner", json!({"key": "k"})).await;
    assert_eq!(
        (&owner["holder"], &owner["revision"]),
        (&json!("h"), &json!(seq)),
        "{owner}"
    );
    let renew = json!({"key": "k", "holder": "h", "revision": seq, "ttl_ms": 60_000});
    let renewed = common::call(&c, "renew", renew).await;
    let last = before["state"]["last_seq"].as_u64().unwrap();
    assert!(renewed["revision"].as_u64().unwrap() > last, "{renewed}");
}

#[tokio::test]
async fn a_bucket_whose_barrier_subjects_another_stream_captures_is_refused() {
    let server = NatsServer::start().await;
    let c = client(&server.url).await;
    let other = json!({"name": "OTHER", "subjects": ["dagnats.leases.>"], "storage": "file"});
    let created = js_api(&c, "STREAM.CREATE.OTHER", other).await;
    assert!(created.get("error").is_none(), "{created}");
    create_stream(&c, earlier_gateways_stream()).await;
    assert_refused_on(&server, &c, "subjects overlap").await;
}

#[tokio::test]
async fn existing_bucket_without_ttl_is_updated_in_place() {
    let server = NatsServer::start().await;
    let c = client(&server.url).await;
    create_stream(
        &c,
        json!({"name": "KV_leases", "subjects": ["$KV.leases.>"], "storage": "file",
            "max_msgs_per_subject": 5, "allow_direct": true, "allow_rollup_hdrs": true}),
    )
    .await;
    c.request("$KV.leases.other", "kept".into()).await.unwrap();
    let before = stream_info(&c).await;
    let _gateway = Gateway::start(&server.url).await;
    let after = stream_info(&c).await;
    assert_eq!(
        after["created"], before["created"],
        "updated, not recreated"
    );
    assert_eq!(after["state"]["messages"], 1, "messages kept");
    assert_eq!(after["config"]["allow_msg_ttl"], true);
    assert_eq!(after["config"]["allow_direct"], false);
    assert_eq!(after["config"]["max_msgs_per_subject"], 1);
    assert_eq!(
        after["config"]["subject_delete_marker_ttl"],
        5_000_000_000u64
    );
    assert_eq!(after["config"]["republish"]["src"], "$KV.leases.*");
}

#[tokio::test]
async fn gateway_restart_never_recreates_the_bucket_and_fences_keep_growing() {
    let mut s = Setup::start().await;
    let a = s
        .call(
            "acquire",
            json!({"key": "k", "holder": "a", "ttl_ms": 1000}),
        )
        .await;
    let created = stream_info(&s.client).await["created"].clone();
    drop(std::mem::replace(
        &mut s.gateway,
        Gateway::start(&s.server.url).await,
    ));
    assert_eq!(stream_info(&s.client).await["created"], created);
    let b = s
        .call(
            "acquire",
            json!({"key": "k2", "holder": "b", "ttl_ms": 1000}),
        )
        .await;
    assert!(b["revision"].as_u64() > a["revision"].as_u64());
}

#[tokio::test]
async fn bucket_deleted_at_runtime_is_created_again_above_the_last_fence() {
    let s = Setup::start().await;
    let a = s
        .call(
            "acquire",
            json!({"key": "k", "holder": "a", "ttl_ms": 60000}),
        )
        .await;
    let deleted = js_api(&s.client, "STREAM.DELETE.KV_leases", json!({})).await;
    assert_eq!(deleted["success"], true, "{deleted}");
    let b = eventually(
        "the bucket to be created again",
        Duration::from_secs(15),
        || async {
            let b = s
                .call(
                    "acquire",
                    json!({"key": "k", "holder": "b", "ttl_ms": 1000}),
                )
                .await;
            match b["kind"].as_str() {
                Some("unavailable") => None,
                _ => Some(b),
            }
        },
    )
    .await;
    assert_eq!(b["granted"], true, "{b}");
    assert!(
        b["revision"].as_u64() > a["revision"].as_u64(),
        "{a} then {b}"
    );
}

fn header_block(message: &Value) -> String {
    let hdrs = message["hdrs"].as_str().unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(hdrs)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn every_stored_lease_record_carries_a_whole_second_ttl() {
    let s = Setup::start().await;
    for key in ["a", "b", "c"] {
        let g = s
            .call(
                "acquire",
                json!({"key": key, "holder": "h", "ttl_ms": 60000}),
            )
            .await;
        let r = s
            .call(
                "renew",
                json!({"key": key, "holder": "h", "revision": g["revision"], "ttl_ms": 30000}),
            )
            .await;
        if key == "b" {
            let body = json!({"key": key, "holder": "h", "revision": r["revision"]});
            s.call("release", body).await;
        }
    }
    let state = stream_info(&s.client).await["state"].clone();
    let (first, last) = (
        state["first_seq"].as_u64().unwrap(),
        state["last_seq"].as_u64().unwrap(),
    );
    let mut checked = 0;
    for seq in first..=last {
        let got = js_api(&s.client, "STREAM.MSG.GET.KV_leases", json!({"seq": seq})).await;
        let Some(message) = got.get("message") else {
            continue;
        };
        let block = header_block(message);
        let ttl = block
            .lines()
            .find_map(|l| l.strip_prefix("Nats-TTL: "))
            .unwrap_or_else(|| panic!("message {seq} has no Nats-TTL: {block:?}"));
        let secs = ttl.strip_suffix('s').expect("TTL in seconds");
        assert!(secs.parse::<u64>().unwrap() >= 1, "{ttl}");
        assert!(block.contains("Dagnats-Lease-Event: "), "{block:?}");
        checked += 1;
    }
    assert_eq!(checked, 3, "a, b's tombstone and c are stored");
}

#[tokio::test]
async fn a_corrupt_record_answers_internal_never_a_guess() {
    let s = Setup::start().await;
    let seq = common::records::write_corrupt(&s.client, "k").await;
    let before = common::stream_state(&s.client).await;
    for (op, body) in [
        ("owner", json!({"key": "k"})),
        (
            "acquire",
            json!({"key": "k", "holder": "h", "ttl_ms": 1000}),
        ),
        (
            "renew",
            json!({"key": "k", "holder": "h", "revision": seq, "ttl_ms": 1000}),
        ),
        (
            "release",
            json!({"key": "k", "holder": "h", "revision": seq}),
        ),
        ("forward", json!({"key": "k", "payload": ""})),
    ] {
        let reply = s.call(op, body).await;
        assert_eq!(reply["kind"], "internal", "{op}: {reply}");
        assert!(
            !reply["error"].as_str().unwrap().contains("not a record"),
            "causes stay in the log"
        );
    }
    assert_eq!(
        common::stream_state(&s.client).await,
        before,
        "nothing was overwritten"
    );
    assert!(
        s.gateway.log.text().contains("corrupt record"),
        "the cause is logged"
    );
}

/// Checks every 200 ms, so a test sees several within a second or two.
const QUICK_CHECKS: [(&str, &str); 1] = [("DAGNATS_BUCKET_RECHECK_MS", "200")];

#[tokio::test]
async fn a_bucket_sealed_while_serving_is_unavailable_with_the_reason_not_an_exit() {
    let server = NatsServer::start().await;
    let mut gateway = Gateway::start_with(&server.url, &[], &QUICK_CHECKS).await;
    let c = client(&server.url).await;
    let mut config = stream_info(&c).await["config"].clone();
    config["sealed"] = json!(true);
    let sealed = js_api(&c, "STREAM.UPDATE.KV_leases", config).await;
    assert!(sealed.get("error").is_none(), "{sealed}");
    let http = common::Http::of(&gateway).await;
    let ready = eventually("readyz to say why", Duration::from_secs(10), || async {
        let ready = http.get("/readyz").await;
        (ready.status == 503).then_some(ready)
    })
    .await;
    common::assert_error(&ready, 503, "unavailable");
    assert!(
        ready.body["error"].as_str().unwrap().contains("sealed"),
        "{}",
        ready.body
    );
    let reply = common::call(&c, "owner", json!({"key": "k"})).await;
    assert_eq!(reply["kind"], "unavailable", "{reply}");
    assert!(
        gateway.log.text().contains("the stream is sealed"),
        "the log says why"
    );
    assert!(
        gateway.wait_exit(Duration::from_secs(2)).await.is_none(),
        "the gateway keeps running through several checks"
    );
}

#[tokio::test]
async fn a_scale_the_server_refuses_leaves_the_gateway_serving_at_the_replicas_it_has() {
    let server = NatsServer::start().await;
    let _creator = Gateway::start(&server.url).await;
    // Three replicas on a single server: the server refuses the scale.
    let mut gateway = Gateway::start_with(&server.url, &["--replicas", "3"], &QUICK_CHECKS).await;
    let refused = gateway
        .log
        .wait_for("could not scale the leases bucket", Duration::from_secs(10))
        .await;
    assert!(refused.is_some(), "{}", gateway.log.text());
    let http = common::Http::of(&gateway).await;
    assert_eq!(http.get("/readyz").await.status, 200);
    let grant = http.acquire("k", "h", 5_000).await;
    assert_eq!(grant.body["granted"], true, "{}", grant.body);
    assert!(
        gateway.wait_exit(Duration::from_secs(2)).await.is_none(),
        "the gateway keeps running through several checks"
    );
    assert_eq!(http.get("/readyz").await.status, 200);
    let c = client(&server.url).await;
    assert_eq!(stream_info(&c).await["config"]["num_replicas"], 1);
    let log = gateway.log.text();
    assert_eq!(
        log.matches("could not scale").count(),
        1,
        "scaled once, at start: {log}"
    );
    assert!(log.contains("not this gateway's --replicas 3"), "{log}");
}

#[tokio::test]
async fn a_recreated_bucket_starts_above_every_fence_any_gateway_handed_out() {
    let server = NatsServer::start().await;
    let c = client(&server.url).await;
    let a = Gateway::start(&server.url).await;
    let http_a = common::Http::of(&a).await;
    let mut fences = Vec::new();
    for key in ["x", "y", "z"] {
        let grant = http_a.acquire(key, "a", 60_000).await.body;
        let renewed = http_a
            .renew(key, "a", &grant["revision"], 60_000)
            .await
            .body;
        fences.extend([grant["revision"].as_u64(), renewed["revision"].as_u64()]);
    }
    let highest = fences.into_iter().map(Option::unwrap).max().unwrap();
    // B comes up after those writes: it never read them, nor saw their events.
    let b = Gateway::start(&server.url).await;
    let http_b = common::Http::of(&b).await;
    a.terminate().await;
    let deleted = js_api(&c, "STREAM.DELETE.KV_leases", json!({})).await;
    assert_eq!(deleted["success"], true, "{deleted}");
    let grant = eventually(
        "B to create the bucket again",
        Duration::from_secs(15),
        || async {
            let reply = http_b.acquire("x", "b", 60_000).await;
            (reply.status == 200).then_some(reply.body)
        },
    )
    .await;
    assert_eq!(grant["granted"], true, "{grant}");
    let fence = grant["revision"].as_u64().unwrap();
    assert!(
        fence > highest,
        "B's first fence {fence} is above A's {highest}"
    );
}
