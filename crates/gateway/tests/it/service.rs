//! The gateway as an instance of the NATS service `dagnats-api` (ADR-32):
//! discovery on `$SRV.PING`, `$SRV.INFO` and `$SRV.STATS`, each reply
//! checked field by field against the ADR's `io.nats.micro.v1` schemas, the
//! error headers of a failed call, and the queue group left as it was.

use std::collections::BTreeSet;

use crate::common::service::{collect, collect_json, only_json};
use crate::common::{Setup, TwoGateways, call, timestamp};
use serde_json::{Value, json};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The lease endpoints the NATS front serves, by name and subject.
const ENDPOINTS: [(&str, &str); 8] = [
    ("acquire", "api.leases.acquire"),
    ("renew", "api.leases.renew"),
    ("release", "api.leases.release"),
    ("owner", "api.leases.owner"),
    ("forward", "api.leases.forward"),
    ("list", "api.leases.list"),
    ("transfer", "api.leases.transfer"),
    ("history", "api.leases.history"),
];

/// The names of an object's fields.
fn fields(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("an object: {value}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// The fields of an ADR-32 reply: the standard ones and `more`.
fn identity_and<'a>(more: &[&'a str]) -> BTreeSet<&'a str> {
    let standard = ["type", "name", "id", "version", "metadata"];
    standard.into_iter().chain(more.iter().copied()).collect()
}

/// ADR-32's standard fields, with the reply's `type`; returns the id.
fn assert_identity<'a>(reply: &'a Value, kind: &str) -> &'a str {
    assert_eq!(reply["type"], kind, "{reply}");
    assert_eq!(reply["name"], "dagnats-api", "{reply}");
    assert_eq!(reply["version"], VERSION, "{reply}");
    assert_eq!(reply["metadata"], json!({}), "{reply}");
    let id = reply["id"].as_str().expect("the id is a string");
    assert_eq!(id.len(), 22, "a NUID-like id: {id}");
    id
}

/// The ids of two gateways, from `$SRV.PING`.
async fn ids(c: &async_nats::Client) -> BTreeSet<String> {
    collect_json(c, "$SRV.PING.dagnats-api")
        .await
        .iter()
        .map(|pong| pong["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn every_gateway_answers_ping_once_alone_and_by_name() {
    let two = TwoGateways::start().await;
    let c = &two.client;
    for subject in ["$SRV.PING", "$SRV.PING.dagnats-api"] {
        let pongs = collect_json(c, subject).await;
        assert_eq!(
            pongs.len(),
            2,
            "{subject}: one reply per gateway: {pongs:?}"
        );
        let ids: BTreeSet<&str> = pongs
            .iter()
            .map(|pong| {
                assert_eq!(fields(pong), identity_and(&[]));
                assert_identity(pong, "io.nats.micro.v1.ping_response")
            })
            .collect();
        assert_eq!(ids.len(), 2, "each gateway has an id of its own: {pongs:?}");
    }
    let pongs = collect_json(c, "$SRV.PING.other-service").await;
    assert!(
        pongs.is_empty(),
        "another service's ping is not ours: {pongs:?}"
    );
}

#[tokio::test]
async fn a_ping_info_or_stats_by_name_and_id_reaches_that_gateway_only() {
    let two = TwoGateways::start().await;
    let c = &two.client;
    let ids = ids(c).await;
    assert_eq!(ids.len(), 2, "{ids:?}");
    for id in &ids {
        for (verb, kind) in [
            ("PING", "io.nats.micro.v1.ping_response"),
            ("INFO", "io.nats.micro.v1.info_response"),
            ("STATS", "io.nats.micro.v1.stats_response"),
        ] {
            let reply = only_json(c, &format!("$SRV.{verb}.dagnats-api.{id}")).await;
            assert_eq!(assert_identity(&reply, kind), id, "{verb}: {reply}");
        }
    }
}

#[tokio::test]
async fn info_lists_every_lease_endpoint_in_the_queue_group() {
    let setup = Setup::start().await;
    for subject in ["$SRV.INFO", "$SRV.INFO.dagnats-api"] {
        let info = only_json(&setup.client, subject).await;
        assert_eq!(
            fields(&info),
            identity_and(&["description", "endpoints"]),
            "{info}"
        );
        assert_identity(&info, "io.nats.micro.v1.info_response");
        assert!(
            info["description"].as_str().unwrap().contains("leases"),
            "{info}"
        );
        let endpoints = info["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), ENDPOINTS.len(), "{info}");
        for ((name, subject), endpoint) in ENDPOINTS.iter().zip(endpoints) {
            assert_eq!(
                endpoint,
                &json!({"name": name, "subject": subject,
                        "queue_group": "dagnats-leases", "metadata": {}}),
            );
        }
    }
}

#[tokio::test]
async fn stats_count_successes_and_failures_with_the_last_error() {
    let setup = Setup::start().await;
    let granted = setup
        .call(
            "acquire",
            json!({"key": "k", "holder": "h", "ttl_ms": 5000}),
        )
        .await;
    assert_eq!(granted["granted"], true, "{granted}");
    let lost = setup
        .call(
            "renew",
            json!({"key": "k", "holder": "other", "revision": 1, "ttl_ms": 5000}),
        )
        .await;
    assert_eq!(lost["kind"], "lost", "{lost}");

    let stats = only_json(&setup.client, "$SRV.STATS").await;
    assert_eq!(
        fields(&stats),
        identity_and(&["endpoints", "started"]),
        "{stats}"
    );
    assert_identity(&stats, "io.nats.micro.v1.stats_response");
    let started = timestamp(&stats["started"]);
    assert!(started <= time::OffsetDateTime::now_utc(), "{stats}");
    let endpoints = stats["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), ENDPOINTS.len(), "{stats}");
    for ((name, subject), endpoint) in ENDPOINTS.iter().zip(endpoints) {
        assert_eq!(
            fields(endpoint),
            BTreeSet::from([
                "name",
                "subject",
                "queue_group",
                "num_requests",
                "num_errors",
                "last_error",
                "processing_time",
                "average_processing_time"
            ]),
            "{endpoint}"
        );
        assert_eq!(endpoint["name"], *name);
        assert_eq!(endpoint["subject"], *subject);
        assert_eq!(endpoint["queue_group"], "dagnats-leases");
        let (requests, errors, last_error) = match *name {
            "acquire" => (1, 0, String::new()),
            "renew" => (1, 1, format!("409:{}", lost["error"].as_str().unwrap())),
            _ => (0, 0, String::new()),
        };
        assert_eq!(endpoint["num_requests"], requests, "{endpoint}");
        assert_eq!(endpoint["num_errors"], errors, "{endpoint}");
        assert_eq!(endpoint["last_error"], last_error, "{endpoint}");
        let total = endpoint["processing_time"].as_u64().unwrap();
        let average = endpoint["average_processing_time"].as_u64().unwrap();
        match total.checked_div(requests) {
            None => assert_eq!((total, average), (0, 0), "{endpoint}"),
            Some(expected) => {
                assert!(total > 0, "nanoseconds spent: {endpoint}");
                assert_eq!(average, expected, "{endpoint}");
            }
        }
    }
}

/// `op`'s whole reply to `body`, headers and all, and its body as JSON.
async fn raw_call(c: &async_nats::Client, op: &str, body: &Value) -> (Value, async_nats::Message) {
    let reply = c
        .request(format!("api.leases.{op}"), body.to_string().into())
        .await
        .unwrap();
    let json = serde_json::from_slice(&reply.payload).unwrap();
    (json, reply)
}

#[tokio::test]
async fn a_failed_call_sets_the_service_error_headers_and_keeps_its_body() {
    let setup = Setup::start().await;
    let cases = [
        (
            "acquire",
            json!({"key": "k", "holder": "h", "ttl_ms": 1500}),
            "invalid",
            "400",
        ),
        (
            "release",
            json!({"key": "free", "holder": "h", "revision": 7}),
            "lost",
            "409",
        ),
        (
            "forward",
            json!({"key": "free", "payload": ""}),
            "not_held",
            "404",
        ),
    ];
    for (op, body, kind, code) in cases {
        let (json, reply) = raw_call(&setup.client, op, &body).await;
        assert_eq!(json["kind"], kind, "{op}: {json}");
        assert_eq!(fields(&json), BTreeSet::from(["error", "kind"]), "{json}");
        let headers = reply.headers.expect("a failed call carries headers");
        assert_eq!(
            headers.get("Nats-Service-Error").map(|v| v.as_str()),
            json["error"].as_str(),
            "{op}"
        );
        assert_eq!(
            headers.get("Nats-Service-Error-Code").map(|v| v.as_str()),
            Some(code),
            "{op}"
        );
    }
    let acquire = json!({"key": "k", "holder": "h", "ttl_ms": 5000});
    let (_, granted) = raw_call(&setup.client, "acquire", &acquire).await;
    let ok = granted
        .headers
        .as_ref()
        .is_none_or(|h| h.get("Nats-Service-Error").is_none());
    assert!(ok, "a success carries no error header");
}

#[tokio::test]
async fn a_lease_request_still_gets_exactly_one_reply_with_two_gateways() {
    let two = TwoGateways::start().await;
    let c = &two.client;
    let body = json!({"key": "one", "holder": "h", "ttl_ms": 5000}).to_string();
    let replies = collect(c, "api.leases.acquire", body.as_bytes()).await;
    assert_eq!(replies.len(), 1, "the queue group picks one gateway");
    let reply: Value = serde_json::from_slice(&replies[0].payload).unwrap();
    assert_eq!(reply["granted"], true, "{reply}");
    let owner = call(c, "owner", json!({"key": "one"})).await;
    assert_eq!(owner["holder"], "h", "{owner}");
}

#[tokio::test]
async fn a_long_error_sentence_is_cut_in_the_headers_and_stats_and_whole_in_the_body() {
    let setup = Setup::start().await;
    let key = "x".repeat(900_000);
    let (body, reply) = raw_call(&setup.client, "owner", &json!({"key": key})).await;
    assert_eq!(body["kind"], "invalid");
    let sentence = body["error"].as_str().unwrap();
    assert!(sentence.contains(&key), "the body quotes the input whole");
    let headers = reply.headers.expect("error headers");
    let header = headers.get("Nats-Service-Error").unwrap().as_str();
    let cut = header.strip_suffix('…').expect("the header is cut");
    assert_eq!(cut.len(), 512, "{header}");
    assert!(sentence.starts_with(cut), "{header}");
    assert_eq!(
        headers.get("Nats-Service-Error-Code").unwrap().as_str(),
        "400"
    );

    let stats = only_json(&setup.client, "$SRV.STATS").await;
    let owner = &stats["endpoints"][3];
    assert_eq!(owner["name"], "owner");
    assert_eq!(owner["last_error"], format!("400:{header}"), "{owner}");
}

#[tokio::test]
async fn an_error_body_that_fits_max_payload_only_without_headers_is_sent_without_them() {
    let (setup, _config) = Setup::with_max_payload(4096).await;
    // About 3.8 KB of body: it fits 4096 bytes, body and headers do not.
    let key = "x".repeat(3_700);
    let (body, reply) = raw_call(&setup.client, "owner", &json!({"key": key})).await;
    assert_eq!(body["kind"], "invalid", "{body}");
    // Within 600 bytes of the limit: the headers (a 512-byte sentence) do
    // not fit beside it.
    let size = reply.payload.len();
    assert!((3_500..4_096).contains(&size), "{size}");
    let has_headers = reply
        .headers
        .as_ref()
        .is_some_and(|h| h.get("Nats-Service-Error").is_some());
    assert!(!has_headers, "the body, as it was, rather than no reply");
}

#[tokio::test]
async fn stats_of_all_gateways_add_up_to_the_requests_sent_once_each() {
    let two = TwoGateways::start().await;
    let c = &two.client;
    const N: u64 = 20;
    for i in 0..N {
        let reply = call(
            c,
            "acquire",
            json!({"key": format!("k{i}"), "holder": "h", "ttl_ms": 5000}),
        )
        .await;
        assert_eq!(reply["granted"], true, "{reply}");
    }
    let stats = collect_json(c, "$SRV.STATS.dagnats-api").await;
    assert_eq!(stats.len(), 2, "{stats:?}");
    let answered: u64 = stats
        .iter()
        .map(|s| s["endpoints"][0]["num_requests"].as_u64().unwrap())
        .sum();
    assert_eq!(
        answered, N,
        "each request counted by the one gateway that answered it"
    );
}
