//! The lease rules of docs/protocol.md, Operations, over NATS, one test per
//! rule, against a real nats-server and the real gateway binary.

use std::time::Duration;

use crate::common;
use crate::common::lease_ops::{acquire, renew};
use crate::common::{Setup, eventually, stream_state, timestamp};
use serde_json::{Value, json};

fn assert_lost(reply: &Value) {
    assert_eq!(reply["kind"], "lost", "{reply}");
    assert!(
        reply["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{reply}"
    );
    assert_eq!(reply.as_object().unwrap().len(), 2, "{reply}");
}

/// Awaits `call` and asserts it left the stream as it was: no write.
async fn writing_nothing(s: &Setup, call: impl Future<Output = Value>) -> Value {
    let before = stream_state(&s.client).await;
    let reply = call.await;
    assert_eq!(
        stream_state(&s.client).await,
        before,
        "the call wrote nothing"
    );
    reply
}

#[tokio::test]
async fn acquire_grants_a_free_key() {
    let s = Setup::start().await;
    let body = acquire("notify-leader", "notify-7f3a", 15_000);
    let text = common::call_text(&s.client, "acquire", body.to_string().into_bytes()).await;
    let reply: Value = serde_json::from_str(&text).unwrap();
    // The field order of docs/protocol.md, Replies.
    let order = [
        "granted",
        "held",
        "key",
        "holder",
        "revision",
        "acquired_at",
        "expires_at",
        "ttl_ms",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|f| text.find(&format!("\"{f}\":")).unwrap())
        .collect();
    assert!(positions.is_sorted(), "{text}");
    assert_eq!(reply.as_object().unwrap().len(), order.len());
    assert_eq!(reply["granted"], true);
    assert_eq!(reply["held"], true);
    assert_eq!(reply["key"], "notify-leader");
    assert_eq!(reply["holder"], "notify-7f3a");
    assert!(reply["revision"].as_u64().unwrap() >= 1);
    assert_eq!(reply["ttl_ms"], 15_000);
    let acquired = timestamp(&reply["acquired_at"]);
    let expires = timestamp(&reply["expires_at"]);
    assert_eq!(expires - acquired, Duration::from_secs(15));
}

#[tokio::test]
async fn acquire_of_a_held_key_names_the_holder_and_is_not_granted() {
    let s = Setup::start().await;
    let first = s.acquire("k", "holder-a", 15_000).await;
    let other = s.acquire("k", "holder-b", 5_000).await;
    assert_eq!(other["granted"], false);
    assert_eq!(other["held"], true);
    assert_eq!(other["holder"], "holder-a");
    assert_eq!(other["revision"], first["revision"]);
    assert_eq!(other["acquired_at"], first["acquired_at"]);
    assert_eq!(other["expires_at"], first["expires_at"]);
    assert_eq!(other["ttl_ms"], 15_000);
}

#[tokio::test]
async fn acquire_by_current_holder_is_idempotent_and_does_not_extend_ttl() {
    let s = Setup::start().await;
    let first = s.acquire("k", "h", 2_000).await;
    let before = stream_state(&s.client).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = s.acquire("k", "h", 10_000).await;
    assert_eq!(again, first, "same lease, same revision, same expiry");
    assert_eq!(
        stream_state(&s.client).await["last_seq"],
        before["last_seq"],
        "no write"
    );
    // Freed by the first TTL, not a later one.
    s.wait_free("the first TTL to free the key", "k").await;
}

#[tokio::test]
async fn fence_grows_across_holders() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    let released = s.release("k", "a", &a["revision"]).await;
    let b = s.acquire("k", "b", 1_000).await;
    assert_eq!(b["granted"], true);
    let (ra, rr, rb) = (
        a["revision"].as_u64().unwrap(),
        released["revision"].as_u64().unwrap(),
        b["revision"].as_u64().unwrap(),
    );
    assert!(ra < rr && rr < rb, "{ra} < {rr} < {rb}");
    // After an expiry too: the server's marker sits between the tenures.
    let c = eventually("b's lease to expire", Duration::from_secs(5), || async {
        let c = s.acquire("k", "c", 1_000).await;
        (c["granted"] == true).then_some(c)
    })
    .await;
    assert!(c["revision"].as_u64().unwrap() > rb);
}

#[tokio::test]
async fn expired_lease_is_freed_by_the_server_and_can_be_taken() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    let held = s.owner("k").await;
    assert_eq!(held["holder"], "a");
    let expires = timestamp(&a["expires_at"]);
    eventually("the key to be freed", Duration::from_secs(5), || async {
        let owner = s.owner("k").await;
        (owner == json!({"held": false, "key": "k"})).then_some(())
    })
    .await;
    assert!(
        time::OffsetDateTime::now_utc() >= expires,
        "never freed early"
    );
    let b = s.acquire("k", "b", 1_000).await;
    assert_eq!(
        (b["granted"].clone(), b["holder"].clone()),
        (json!(true), json!("b"))
    );
}

#[tokio::test]
async fn renew_extends_the_lease_with_a_new_fence_and_keeps_acquired_at() {
    let s = Setup::start().await;
    let a = s.acquire("k", "h", 2_000).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = s.renew("k", "h", &a["revision"], 3_000).await;
    assert_eq!(r["granted"], true);
    assert_eq!(r["held"], true);
    assert_eq!(r["key"], "k");
    assert_eq!(r["holder"], "h");
    assert!(r["revision"].as_u64() > a["revision"].as_u64());
    assert_eq!(
        r["acquired_at"], a["acquired_at"],
        "the tenure stays the same"
    );
    assert_eq!(r["ttl_ms"], 3_000);
    assert!(timestamp(&r["expires_at"]) > timestamp(&a["expires_at"]));
    let owner = s.owner("k").await;
    assert_eq!(owner["revision"], r["revision"]);
    assert_eq!(owner["ttl_ms"], 3_000);
}

#[tokio::test]
async fn renew_keeps_the_key_past_its_first_ttl() {
    let s = Setup::start().await;
    let mut lease = s.acquire("k", "h", 1_000).await;
    let first_expiry = timestamp(&lease["expires_at"]);
    while time::OffsetDateTime::now_utc() < first_expiry + Duration::from_millis(700) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        lease = s.renew("k", "h", &lease["revision"], 1_000).await;
        assert_eq!(lease["granted"], true, "{lease}");
    }
    let owner = s.owner("k").await;
    assert_eq!(owner["holder"], "h");
}

#[tokio::test]
async fn renew_by_another_holder_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    assert_lost(&writing_nothing(&s, s.renew("k", "b", &a["revision"], 15_000)).await);
}

#[tokio::test]
async fn renew_at_a_stale_revision_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let r = s.renew("k", "a", &a["revision"], 15_000).await;
    let r2 = s.renew("k", "a", &r["revision"], 15_000).await;
    assert_eq!(r2["granted"], true);
    // a's first fence is two writes old: not a retry of the last renew.
    assert_lost(&s.renew("k", "a", &a["revision"], 15_000).await);
    let wrong = json!(a["revision"].as_u64().unwrap() + 1_000);
    assert_lost(&s.renew("k", "a", &wrong, 15_000).await);
}

#[tokio::test]
async fn renew_of_a_free_key_is_lost() {
    let s = Setup::start().await;
    assert_lost(&s.renew("nobody", "a", &json!(1), 15_000).await);
}

#[tokio::test]
async fn renew_after_expiry_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    s.wait_free("expiry", "k").await;
    assert_lost(&s.renew("k", "a", &a["revision"], 1_000).await);
}

#[tokio::test]
async fn renew_retried_after_a_lost_reply_gets_the_same_outcome() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let first = s.renew("k", "a", &a["revision"], 15_000).await;
    let retry = writing_nothing(&s, s.renew("k", "a", &a["revision"], 15_000)).await;
    assert_eq!(retry, first);
}

#[tokio::test]
async fn renew_retried_on_another_gateway_gets_the_same_outcome() {
    // The second gateway has never seen this lease: it must read the
    // record to recognise the retry.
    let s = Setup::start().await;
    let other = common::Gateway::start(&s.server.url).await;
    let a = s.acquire("k", "a", 15_000).await;
    let first = s.renew("k", "a", &a["revision"], 15_000).await;
    drop(s.gateway);
    // The killed gateway's subscriptions outlive it until the server reads
    // its closed socket, and a request routed there is lost: sent as the
    // client sends it, a copy then reaches `other`.
    let leases = dagnats_leases_client::LeaseClient::new(s.client.clone());
    let body = renew("k", "a", &a["revision"], 15_000).to_string();
    let retry = leases
        .request(
            dagnats_leases_client::wire::names::SUBJECT_RENEW,
            body.into(),
        )
        .await
        .expect("a reply from the gateway left");
    let retry: Value = serde_json::from_slice(&retry).unwrap();
    assert_eq!(retry, first);
    drop(other);
}

#[tokio::test]
async fn release_frees_the_key_and_replies_with_the_release_fence() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let r = s.release("k", "a", &a["revision"]).await;
    let fence = r["revision"].as_u64().unwrap();
    assert!(fence > a["revision"].as_u64().unwrap());
    assert_eq!(
        r,
        json!({"released": true, "held": false, "key": "k", "holder": "a", "revision": fence})
    );
    assert_eq!(s.owner("k").await, json!({"held": false, "key": "k"}));
}

#[tokio::test]
async fn release_ignores_fields_it_does_not_use_such_as_ttl_ms() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let body = json!({"key": "k", "holder": "a", "revision": a["revision"], "ttl_ms": 15_000});
    assert_eq!(s.call("release", body).await["released"], true);
}

#[tokio::test]
async fn release_retried_after_a_lost_reply_gets_the_same_outcome() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let first = s.release("k", "a", &a["revision"]).await;
    let retry = writing_nothing(&s, s.release("k", "a", &a["revision"])).await;
    assert_eq!(retry, first);
}

#[tokio::test]
async fn release_of_an_expired_lease_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    s.wait_free("expiry", "k").await;
    assert_lost(&s.release("k", "a", &a["revision"]).await);
}

#[tokio::test]
async fn release_by_another_holder_or_at_a_stale_revision_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let r = s.renew("k", "a", &a["revision"], 15_000).await;
    let before = stream_state(&s.client).await;
    assert_lost(&s.release("k", "b", &r["revision"]).await);
    assert_lost(&s.release("k", "a", &json!(1_000_000)).await);
    assert_eq!(stream_state(&s.client).await, before);
    assert_eq!(s.owner("k").await["revision"], r["revision"]);
}

#[tokio::test]
async fn release_of_a_free_key_is_lost() {
    let s = Setup::start().await;
    assert_lost(&s.release("nobody", "a", &json!(1)).await);
}

#[tokio::test]
async fn owner_of_a_free_key_is_held_false_and_the_key() {
    let s = Setup::start().await;
    let owner = s.owner("free").await;
    assert_eq!(owner, json!({"held": false, "key": "free"}));
}

#[tokio::test]
async fn owner_reports_the_lease_and_has_no_side_effects() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let before = stream_state(&s.client).await;
    for _ in 0..3 {
        let owner = s.owner("k").await;
        let mut expected = a.clone();
        expected.as_object_mut().unwrap().remove("granted");
        assert_eq!(owner, expected);
    }
    s.owner("free").await;
    assert_eq!(stream_state(&s.client).await, before);
}

#[tokio::test]
async fn leases_survive_a_server_restart() {
    let mut s = Setup::start().await;
    let a = s.acquire("k", "a", 60_000).await;
    s.server.restart().await;
    let owner = eventually(
        "the gateway to reconnect",
        Duration::from_secs(15),
        || async {
            // No responders until the gateway has subscribed again.
            let owner = common::try_call(&s.client, "owner", json!({"key": "k"})).await?;
            (owner["kind"] != "unavailable").then_some(owner)
        },
    )
    .await;
    assert_eq!(owner["holder"], "a");
    assert_eq!(owner["revision"], a["revision"]);
    let r = s.renew("k", "a", &a["revision"], 60_000).await;
    assert_eq!(r["granted"], true, "{r}");
    s.client = common::client(&s.server.url).await;
}

#[tokio::test]
async fn renew_in_the_last_moment_before_expiry_is_lost_and_writes_nothing() {
    // A renew that could land after the server's expiry is due is refused:
    // nats-server would acknowledge it and then let the overdue expiry
    // erase it (docs/operations.md), leaving two holders entitled.
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    let expires = timestamp(&a["expires_at"]);
    let wait = expires - time::OffsetDateTime::now_utc() - Duration::from_millis(150);
    tokio::time::sleep(wait.try_into().unwrap_or_default()).await;
    let mut writes = s.client.subscribe("$KV.leases.k").await.unwrap();
    s.client.flush().await.unwrap();
    assert_lost(&s.renew("k", "a", &a["revision"], 1_000).await);
    use futures::StreamExt;
    let wrote = tokio::time::timeout(Duration::from_millis(300), writes.next()).await;
    assert!(wrote.is_err(), "the gateway wrote nothing");
}

#[tokio::test]
async fn a_renew_acknowledged_too_late_leaves_nothing_held_and_its_retry_is_lost() {
    // The renew reaches the server in time, its acknowledgement only once the
    // lease is within the expiry margin: the gateway answers lost and takes the
    // renewed record back, so the key is free and a retry of the same renew
    // answers lost too (docs/protocol.md, Operations: the same outcome).
    let server = common::NatsServer::start().await;
    let proxy = common::proxy::Proxy::start(&server.url).await;
    let _gateway = common::Gateway::start(&proxy.url).await;
    let c = common::client(&server.url).await;
    let now = time::OffsetDateTime::now_utc();
    // Due in 1 s by the record, kept 30 s by the server.
    let seq = common::records::write_lease(&c, "k", "a", 1_000, now, 30).await;
    let late = tokio::time::Instant::now() + Duration::from_millis(900);
    proxy.hold_publishes(
        &["$KV.leases.k"],
        std::sync::Arc::new(move || Box::pin(tokio::time::sleep_until(late))),
    );
    let renew = json!({"key": "k", "holder": "a", "revision": seq, "ttl_ms": 30_000});
    assert_lost(&common::call(&c, "renew", renew.clone()).await);
    assert_lost(&common::call(&c, "renew", renew).await);
    assert_eq!(
        common::call(&c, "owner", json!({"key": "k"})).await,
        json!({"held": false, "key": "k"})
    );
    let taken = common::call(&c, "acquire", acquire("k", "b", 5_000)).await;
    assert_eq!(taken["granted"], true, "{taken}");
    assert!(taken["revision"].as_u64().unwrap() > seq + 1);
}

#[tokio::test]
async fn release_past_expires_at_before_the_server_expires_the_lease_is_lost() {
    let s = Setup::start().await;
    let written_at = time::OffsetDateTime::now_utc() - Duration::from_secs(10);
    // Past its expires_at by 9 s; the server frees it in 30 s.
    let seq = common::records::write_lease(&s.client, "k", "h", 1_000, written_at, 30).await;
    let release = json!({"key": "k", "holder": "h", "revision": seq});
    assert_lost(&writing_nothing(&s, s.call("release", release)).await);
}

#[tokio::test]
async fn acquire_by_the_holder_of_an_overdue_lease_is_a_new_tenure_with_a_new_fence() {
    let s = Setup::start().await;
    let written_at = time::OffsetDateTime::now_utc() - Duration::from_secs(10);
    // Past its expires_at; the server frees it within about a second.
    let seq = common::records::write_lease(&s.client, "k", "h", 1_000, written_at, 1).await;
    let before = time::OffsetDateTime::now_utc();
    let grant = s.acquire("k", "h", 5_000).await;
    assert_eq!(grant["granted"], true, "{grant}");
    assert!(
        grant["revision"].as_u64().unwrap() >= seq + 2,
        "written over the server's expiry marker: {grant}"
    );
    assert!(timestamp(&grant["acquired_at"]) >= before - Duration::from_millis(5));
    assert!(timestamp(&grant["expires_at"]) > before);
    // The new tenure is what the server holds.
    assert_eq!(s.owner("k").await["revision"], grant["revision"]);
}
