//! Bad input of every kind: a clear `invalid`, the gateway keeps serving,
//! and nothing in the bucket changes.

use crate::common::{Setup, call_raw, stream_state};
use serde_json::{Value, json};

/// Sends each body to `op` and checks every reply is exactly
/// `{"error": <non-empty>, "kind": "invalid"}` and the bucket is untouched.
async fn assert_all_invalid(s: &Setup, op: &str, bodies: Vec<Vec<u8>>) {
    let before = stream_state(&s.client).await;
    for body in bodies {
        let reply = call_raw(&s.client, op, body.clone()).await;
        let shown = String::from_utf8_lossy(&body[..body.len().min(80)]).to_string();
        assert_eq!(reply["kind"], "invalid", "{op} {shown}: {reply}");
        assert!(
            reply["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{reply}"
        );
        assert_eq!(reply.as_object().unwrap().len(), 2, "{reply}");
    }
    assert_eq!(
        stream_state(&s.client).await,
        before,
        "{op}: the bucket changed"
    );
    // Still serving.
    let ok = s.acquire("still-ok", "h", 1000).await;
    assert_eq!(ok["granted"], true, "{ok}");
    let released = s.release("still-ok", "h", &ok["revision"]).await;
    assert_eq!(released["released"], true);
}

fn json_bodies(values: Vec<Value>) -> Vec<Vec<u8>> {
    values
        .into_iter()
        .map(|v| v.to_string().into_bytes())
        .collect()
}

fn with(base: &Value, field: &str, value: Value) -> Value {
    let mut body = base.clone();
    body[field] = value;
    body
}

fn without(base: &Value, field: &str) -> Value {
    let mut body = base.clone();
    body.as_object_mut().unwrap().remove(field);
    body
}

/// `base` with each of `bad` in `field`, then with `field` left out.
fn bad_or_missing(base: &Value, field: &str, bad: Vec<Value>) -> Vec<Value> {
    let mut bodies: Vec<Value> = bad.into_iter().map(|v| with(base, field, v)).collect();
    bodies.push(without(base, field));
    bodies
}

/// Values that are not a valid key or holder.
fn bad_names() -> Vec<Value> {
    vec![
        json!(""),
        json!("a.b"),
        json!("*"),
        json!(">"),
        json!("a*"),
        json!("a>"),
        json!("with space"),
        json!("tab\t"),
        json!("ключ"),
        json!("emoji-🔒"),
        json!("k".repeat(129)),
        json!(null),
        json!(7),
        json!(["k"]),
        json!({"k": 1}),
        json!(true),
    ]
}

/// Values that are not a valid ttl_ms.
fn bad_ttls() -> Vec<Value> {
    vec![
        json!(1500),
        json!(999),
        json!(0),
        json!(600_001),
        json!(601_000),
        json!(-1000),
        json!(1000.5),
        json!(1500.0),
        json!(-1e3),
        json!("1000"),
        json!(null),
        json!(u64::MAX),
        json!(1e30),
    ]
}

#[tokio::test]
async fn ttl_of_1500_ms_is_invalid() {
    let s = Setup::start().await;
    let body = json!({"key": "k", "holder": "h", "ttl_ms": 1500});
    let reply = s.call("acquire", body).await;
    assert_eq!(
        reply,
        json!({
            "error": "invalid request: ttl_ms must be a whole number of seconds from 1000 to 600000, got 1500",
            "kind": "invalid"
        })
    );
}

#[tokio::test]
async fn body_that_is_not_a_json_object_is_invalid_on_every_subject() {
    let s = Setup::start().await;
    let bodies = || {
        vec![
            b"".to_vec(),
            b"not json".to_vec(),
            b"{".to_vec(),
            b"[\"k\",\"h\",1000]".to_vec(),
            b"\"k\"".to_vec(),
            b"42".to_vec(),
            b"null".to_vec(),
            vec![0xff, 0xfe, 0x00],
            format!("{{\"key\":\"{}\"}}", "x".repeat(900_000)).into_bytes(),
        ]
    };
    for op in ["acquire", "renew", "release", "owner"] {
        assert_all_invalid(&s, op, bodies()).await;
    }
}

#[tokio::test]
async fn bad_keys_and_holders_are_invalid() {
    let s = Setup::start().await;
    let acquire = json!({"key": "k", "holder": "h", "ttl_ms": 1000});
    let renew = json!({"key": "k", "holder": "h", "revision": 1, "ttl_ms": 1000});
    let release = json!({"key": "k", "holder": "h", "revision": 1});
    let owner = json!({"key": "k"});
    for (op, base, fields) in [
        ("acquire", &acquire, &["key", "holder"][..]),
        ("renew", &renew, &["key", "holder"][..]),
        ("release", &release, &["key", "holder"][..]),
        ("owner", &owner, &["key"][..]),
    ] {
        let mut bodies = Vec::new();
        for field in fields {
            bodies.extend(bad_or_missing(base, field, bad_names()));
        }
        assert_all_invalid(&s, op, json_bodies(bodies)).await;
    }
}

#[tokio::test]
async fn bad_ttls_are_invalid_and_ttl_is_required_on_acquire_and_renew() {
    let s = Setup::start().await;
    let acquire = json!({"key": "k", "holder": "h", "ttl_ms": 1000});
    let renew = json!({"key": "k", "holder": "h", "revision": 1, "ttl_ms": 1000});
    for (op, base) in [("acquire", &acquire), ("renew", &renew)] {
        let bodies = bad_or_missing(base, "ttl_ms", bad_ttls());
        assert_all_invalid(&s, op, json_bodies(bodies)).await;
    }
}

#[tokio::test]
async fn revision_is_required_and_never_zero_on_renew_and_release() {
    let s = Setup::start().await;
    let renew = json!({"key": "k", "holder": "h", "revision": 1, "ttl_ms": 1000});
    let release = json!({"key": "k", "holder": "h", "revision": 1});
    for (op, base) in [("renew", &renew), ("release", &release)] {
        let bad = vec![
            json!(0),
            json!(-1),
            json!(1.5),
            json!("1"),
            json!(null),
            json!(1e30),
            json!([1]),
        ];
        let bodies = bad_or_missing(base, "revision", bad);
        assert_all_invalid(&s, op, json_bodies(bodies)).await;
    }
}

#[tokio::test]
async fn whole_numbers_written_as_floats_are_those_integers() {
    let s = Setup::start().await;
    let acquire = json!({"key": "k", "holder": "h", "ttl_ms": 3000.0});
    let granted = s.call("acquire", acquire).await;
    assert_eq!(granted["granted"], true, "{granted}");
    assert_eq!(granted["ttl_ms"], json!(3000));
    let revision = granted["revision"].as_u64().unwrap() as f64;
    let renew = json!({"key": "k", "holder": "h", "revision": revision, "ttl_ms": 2e3});
    let renewed = s.call("renew", renew).await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    assert_eq!(renewed["ttl_ms"], json!(2000));
    let release = json!({"key": "k", "holder": "h", "revision": renewed["revision"].as_f64()});
    assert_eq!(s.call("release", release).await["released"], true);
}

#[tokio::test]
async fn the_longest_key_and_holder_are_valid() {
    let s = Setup::start().await;
    let (key, holder) = ("K-_9".repeat(32), "h_-Z".repeat(32));
    assert_eq!(key.len(), 128);
    let reply = s.acquire(&key, &holder, 600_000).await;
    assert_eq!(reply["granted"], true, "{reply}");
    assert_eq!(reply["key"], key.as_str());
    assert_eq!(reply["holder"], holder.as_str());
    let owner = s.owner(&key).await;
    assert_eq!(owner["holder"], holder.as_str());
}

#[tokio::test]
async fn unknown_fields_are_ignored() {
    let s = Setup::start().await;
    let body =
        json!({"key": "k", "holder": "h", "ttl_ms": 1000, "extra": {"nested": [1, 2]}, "v": 9});
    assert_eq!(s.call("acquire", body).await["granted"], true);
}

#[tokio::test]
async fn a_wait_header_that_is_not_a_whole_number_of_milliseconds_is_invalid() {
    // The caller's Dagnats-Lease-Wait-Ms bounds the call; one that says
    // nothing readable is refused like a bad body, before any work.
    use dagnats_leases_client::wire::names::HEADER_WAIT_MS;
    let s = Setup::start().await;
    let before = stream_state(&s.client).await;
    let body = json!({"key": "k", "holder": "h", "ttl_ms": 5000}).to_string();
    for wait in ["soon", "-1", "1.5", "", "18446744073709551616"] {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(HEADER_WAIT_MS, wait);
        let reply = s
            .client
            .request_with_headers("api.leases.acquire", headers, body.clone().into())
            .await
            .unwrap();
        let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(reply["kind"], "invalid", "{wait:?}: {reply}");
        assert!(
            reply["error"].as_str().unwrap().contains(HEADER_WAIT_MS),
            "{reply}"
        );
    }
    assert_eq!(stream_state(&s.client).await, before, "the bucket changed");
    // A readable wait serves as usual.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_WAIT_MS, "3000");
    let reply = s
        .client
        .request_with_headers("api.leases.acquire", headers, body.into())
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(reply["granted"], true, "{reply}");
}
