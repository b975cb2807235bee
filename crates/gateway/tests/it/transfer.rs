//! `api.leases.transfer` over NATS and HTTP: the holder hands its lease to
//! another holder in one compare-and-set write, a new tenure at a higher
//! fence; anything else is `lost` or `invalid`, and the old holder's fence
//! is stale everywhere afterwards.

use std::time::Duration;

use crate::common;
use crate::common::lease_ops::transfer;
use crate::common::{
    Gateway, Http, NatsServer, Setup, assert_error, eventually, stream_state, timestamp,
};
use bytes::Bytes;
use dagnats_leases_client::wire::names::{HEADER_EVENT, HEADER_PREVIOUS_HOLDER};
use dagnats_leases_client::{
    ChangeEvent, ChangeKind, ClientError, FenceGate, KeeperOptions, LeaseClient, LeaseKeeper,
    Ownership, serve_inbox,
};
use futures::StreamExt;
use serde_json::Value;

fn rev(v: &Value) -> u64 {
    v["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no revision: {v}"))
}

fn assert_kind(reply: &Value, kind: &str) {
    assert_eq!(reply["kind"], kind, "{reply}");
    assert!(
        reply["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{reply}"
    );
}

/// Waits until the wall clock is past `at`, so a timestamp taken later
/// differs from it (the wire's timestamps have millisecond precision).
async fn clock_past(at: &Value) {
    let at = timestamp(at);
    eventually("the clock to move on", Duration::from_secs(1), || async {
        (time::OffsetDateTime::now_utc() > at + Duration::from_millis(2)).then_some(())
    })
    .await
}

#[tokio::test]
async fn transfer_grants_to_with_a_higher_fence_and_a_new_tenure() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let renewed = s.renew("k", "a", rev(&a), 15_000).await;
    clock_past(&a["acquired_at"]).await;
    let moved = s.transfer("k", "a", rev(&renewed), "b", 5_000).await;
    assert_eq!(moved["granted"], true, "{moved}");
    assert_eq!(moved["held"], true);
    assert_eq!(moved["key"], "k");
    assert_eq!(moved["holder"], "b");
    assert_eq!(moved["ttl_ms"], 5_000);
    assert!(rev(&moved) > rev(&renewed), "{moved}");
    let acquired = timestamp(&moved["acquired_at"]);
    assert!(acquired > timestamp(&a["acquired_at"]), "{moved}");
    assert_eq!(
        timestamp(&moved["expires_at"]) - acquired,
        Duration::from_secs(5)
    );
    // The owner reads exactly the lease the transfer answered.
    let mut lease = moved.clone();
    lease.as_object_mut().unwrap().remove("granted");
    assert_eq!(s.owner("k").await, lease);
}

#[tokio::test]
async fn after_a_transfer_the_old_holders_renew_and_release_are_lost_and_the_new_one_renews() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let moved = s.transfer("k", "a", rev(&a), "b", 15_000).await;
    assert_kind(&s.renew("k", "a", rev(&a), 15_000).await, "lost");
    assert_kind(&s.renew("k", "a", rev(&moved), 15_000).await, "lost");
    assert_kind(&s.release("k", "a", rev(&moved)).await, "lost");
    let renewed = s.renew("k", "b", rev(&moved), 15_000).await;
    assert_eq!(renewed["granted"], true, "{renewed}");
    // Renew keeps the tenure the transfer started.
    assert_eq!(renewed["acquired_at"], moved["acquired_at"]);
    let back = s.acquire("k", "a", 15_000).await;
    assert_eq!(
        (back["granted"].clone(), back["holder"].clone()),
        (false.into(), "b".into())
    );
}

#[tokio::test]
async fn transfer_by_a_wrong_holder_at_a_wrong_revision_or_of_a_free_key_is_lost() {
    let s = Setup::start().await;
    let first = s.acquire("k", "a", 15_000).await;
    let a = s.renew("k", "a", rev(&first), 15_000).await;
    let before = stream_state(&s.client).await;
    for (holder, revision, to) in [
        ("c", rev(&a), "b"),
        ("a", rev(&a) + 1, "b"),
        ("a", rev(&first), "b"),
        ("b", rev(&a), "a"),
    ] {
        let reply = s.transfer("k", holder, revision, to, 15_000).await;
        assert_kind(&reply, "lost");
    }
    assert_kind(&s.transfer("free", "a", rev(&a), "b", 15_000).await, "lost");
    assert_eq!(stream_state(&s.client).await, before, "nothing was written");
    let released = s.release("k", "a", rev(&a)).await;
    assert_eq!(released["released"], true);
    assert_kind(&s.transfer("k", "a", rev(&a), "b", 15_000).await, "lost");
    assert_eq!(s.owner("k").await["held"], false);
}

#[tokio::test]
async fn transfer_of_an_expired_lease_is_lost() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 1_000).await;
    s.wait_free("the lease to expire", "k").await;
    assert_kind(&s.transfer("k", "a", rev(&a), "b", 15_000).await, "lost");
    assert_eq!(s.owner("k").await["held"], false);
}

#[tokio::test]
async fn transfer_to_the_holder_itself_or_out_of_bounds_is_invalid() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let before = stream_state(&s.client).await;
    let r = rev(&a);
    let mut missing_revision = transfer("k", "a", r, "b", 15_000);
    missing_revision.as_object_mut().unwrap().remove("revision");
    let mut missing_to = transfer("k", "a", r, "b", 15_000);
    missing_to.as_object_mut().unwrap().remove("to");
    for body in [
        transfer("k", "a", r, "a", 15_000),
        transfer("k", "a", r, "b.c", 15_000),
        transfer("k", "a", r, "", 15_000),
        transfer("k", "a", r, &"b".repeat(129), 15_000),
        transfer("k", "a", 0, "b", 15_000),
        transfer("k", "a", "3", "b", 15_000),
        transfer("k", "a", r, "b", 1_500),
        transfer("k", "a", r, "b", 601_000),
        transfer("k.x", "a", r, "b", 15_000),
        missing_revision,
        missing_to,
    ] {
        let reply = s.call("transfer", body.clone()).await;
        assert_kind(&reply, "invalid");
    }
    assert_eq!(stream_state(&s.client).await, before, "nothing was written");
    assert_eq!(s.owner("k").await["holder"], "a");
}

#[tokio::test]
async fn a_retried_transfer_whose_reply_was_lost_gets_the_same_grant() {
    let s = Setup::start().await;
    let a = s.acquire("k", "a", 15_000).await;
    let first = s.transfer("k", "a", rev(&a), "b", 15_000).await;
    let before = stream_state(&s.client).await;
    let again = s.transfer("k", "a", rev(&a), "b", 15_000).await;
    assert_eq!(again, first);
    assert_eq!(
        stream_state(&s.client).await,
        before,
        "the retry wrote nothing"
    );
    // A gateway that did not make the write answers the retry the same
    // way, from the record: retries spread over both in the queue group.
    let other = Gateway::start(&s.server.url).await;
    other.wait_bucket_ready().await;
    for _ in 0..20 {
        assert_eq!(s.transfer("k", "a", rev(&a), "b", 15_000).await, first);
    }
    assert_eq!(stream_state(&s.client).await, before, "no retry wrote");
    // Once the new holder wrote again, the old request is simply stale, on
    // either gateway. (`other` stays up: a request the queue group routed
    // to it just after a kill would be lost until the server saw it go.)
    s.renew("k", "b", rev(&first), 15_000).await;
    assert_kind(&s.transfer("k", "a", rev(&a), "b", 15_000).await, "lost");
}

/// k's change events from now on (the server knows of the subscription).
async fn changes_of_k(client: &async_nats::Client) -> async_nats::Subscriber {
    let changes = client
        .subscribe(ChangeEvent::subject(Some("k")))
        .await
        .unwrap();
    common::settle(client).await;
    changes
}

async fn next_change(changes: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .expect("a change within 5 s")
        .unwrap()
}

#[tokio::test]
async fn a_transfer_is_an_acquired_change_naming_the_previous_holder() {
    let s = Setup::start().await;
    let mut changes = changes_of_k(&s.client).await;
    let a = s.acquire("k", "a", 15_000).await;
    let moved = s.transfer("k", "a", rev(&a), "b", 15_000).await;
    let acquired = next_change(&mut changes).await;
    let headers = acquired.headers.as_ref().unwrap();
    assert!(headers.get(HEADER_PREVIOUS_HOLDER).is_none());
    let msg = next_change(&mut changes).await;
    let headers = msg.headers.as_ref().unwrap();
    assert_eq!(headers.get(HEADER_EVENT).unwrap().as_str(), "acquired");
    assert_eq!(headers.get(HEADER_PREVIOUS_HOLDER).unwrap().as_str(), "a");
    let change = dagnats_leases_client::changes::from_message(&msg).unwrap();
    assert_eq!(change.event, ChangeKind::Acquired);
    assert_eq!(change.revision, rev(&moved));
    assert_eq!(change.holder.as_deref(), Some("b"));
    assert_eq!(change.previous_holder.as_deref(), Some("a"));
    let first = dagnats_leases_client::changes::from_message(&acquired).unwrap();
    assert_eq!(first.previous_holder, None);
}

#[tokio::test]
async fn http_transfer_answers_as_nats_does_and_needs_the_write_token() {
    let server = NatsServer::start().await;
    let gateway = Gateway::spawn(&server.url, &[], &[("DAGNATS_HTTP_TOKEN", "w")]);
    gateway.wait_bucket_ready().await;
    let nats = common::client(&server.url).await;
    let http = Http::of(&gateway).await;
    let writer = http.with_token("w");
    let via_nats = |body| common::call(&nats, "transfer", body);
    let a = writer.acquire("k", "a", 15_000).await;
    assert_eq!(a.status, 200);
    assert_error(
        &http.transfer("k", "a", rev(&a.body), "b", 15_000).await,
        401,
        "unauthorized",
    );
    assert_error(
        &writer.transfer("k", "a", rev(&a.body), "a", 15_000).await,
        400,
        "invalid",
    );
    assert_error(
        &writer
            .transfer("k", "a", rev(&a.body) + 1, "b", 15_000)
            .await,
        409,
        "lost",
    );
    let moved = writer.transfer("k", "a", rev(&a.body), "b", 5_000).await;
    assert_eq!(moved.status, 200, "{:?}", moved.body);
    assert_eq!(moved.body["holder"], "b");
    assert_eq!(moved.body["granted"], true);
    assert!(rev(&moved.body) > rev(&a.body));
    // The NATS retry of the same transfer gets the same body.
    let retried = via_nats(transfer("k", "a", rev(&a.body), "b", 5_000)).await;
    assert_eq!(retried, moved.body);
    assert_error(
        &writer.renew("k", "a", rev(&a.body), 15_000).await,
        409,
        "lost",
    );
    // The dashboard's recent past names the holder the lease came from.
    let recent = eventually(
        "the transfer in the recent events",
        Duration::from_secs(5),
        || async {
            let recent = writer.get("/v1/events/recent").await.body;
            let events = recent["events"].as_array().cloned().unwrap_or_default();
            events
                .into_iter()
                .find(|e| e["revision"] == moved.body["revision"])
        },
    )
    .await;
    assert_eq!(recent["event"], "acquired");
    assert_eq!(recent["holder"], "b");
    assert_eq!(recent["previous_holder"], "a");
}

#[tokio::test]
async fn after_a_transfer_the_old_holder_stops_and_its_fence_is_refused() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let keeper = LeaseKeeper::start(
        leases.clone(),
        KeeperOptions {
            key: "k".into(),
            holder: "a".into(),
            ttl: Duration::from_secs(3),
            wait: false,
        },
    );
    let mut ownership = keeper.watch();
    let owned = tokio::time::timeout(
        Duration::from_secs(10),
        ownership.wait_for(|o| matches!(o, Ownership::Owner { .. })),
    )
    .await
    .expect("a owns k within 10 s")
    .unwrap()
    .clone();
    let tenure = owned.tenure().unwrap();
    let watch = keeper.watch();
    let tenure_of = move |key: &str| (key == "k").then(|| watch.borrow().tenure()).flatten();
    let inbox_a = tokio::spawn(serve_inbox(s.client.clone(), "a", tenure_of, |_| async {
        Bytes::from_static(b"from a")
    }));
    // The holder's fence as the gateway reads it (the keeper may renew in
    // between: then transfer again at the new one).
    let moved = eventually("the transfer to land", Duration::from_secs(10), || async {
        let fence = rev(&s.owner("k").await);
        leases
            .transfer("k", "a", fence, "b", Duration::from_secs(15))
            .await
            .ok()
            .map(|grant| (fence, grant))
    })
    .await;
    let (old_fence, grant) = moved;
    let new_fence = grant.lease.revision;
    assert!(new_fence > old_fence);
    // A downstream store that saw the new owner's fence refuses the old one.
    let gate = FenceGate::default();
    gate.admit(tenure).unwrap();
    gate.admit(new_fence).unwrap();
    let stale = gate.admit(old_fence).unwrap_err();
    assert_eq!((stale.fence, stale.highest), (old_fence, new_fence));
    // The old holder's next renew is lost: it stops acting as owner, and
    // its inbox rejects even a request that carries the new fence.
    tokio::time::timeout(
        Duration::from_secs(5),
        ownership.wait_for(|o| matches!(o, Ownership::NotOwner)),
    )
    .await
    .expect("a stops owning k within a renew period")
    .unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Dagnats-Lease-Fence", new_fence.to_string().as_str());
    let rejected = s
        .client
        .request_with_headers("dagnats.lease.inbox.a.k", headers, Bytes::new())
        .await
        .unwrap();
    let reject = rejected
        .headers
        .as_ref()
        .and_then(|h| h.get("Dagnats-Lease-Reject"));
    assert_eq!(reject.map(|v| v.as_str()), Some("stale"));
    // Forward reaches the new holder, at the transfer's fence.
    let inbox_b = tokio::spawn(serve_inbox(
        s.client.clone(),
        "b",
        move |key: &str| (key == "k").then_some(new_fence),
        |req| async move { Bytes::from(format!("from b at {}", req.fence)) },
    ));
    let reply = eventually("b's inbox to answer", Duration::from_secs(5), || async {
        leases
            .forward("k", Bytes::from_static(b"hi"), Duration::from_secs(1))
            .await
            .ok()
    })
    .await;
    assert_eq!((reply.holder.as_str(), reply.revision), ("b", new_fence));
    assert_eq!(reply.payload.0, format!("from b at {new_fence}"));
    inbox_a.abort();
    inbox_b.abort();
    keeper.shutdown().await;
}

fn keeper(leases: &LeaseClient, holder: &str, wait: bool) -> LeaseKeeper {
    LeaseKeeper::start(
        leases.clone(),
        KeeperOptions {
            key: "k".into(),
            holder: holder.into(),
            ttl: Duration::from_secs(3),
            wait,
        },
    )
}

async fn until_owner(keeper: &LeaseKeeper) -> Ownership {
    let mut ownership = keeper.watch();
    tokio::time::timeout(
        Duration::from_secs(10),
        ownership.wait_for(|o| matches!(o, Ownership::Owner { .. })),
    )
    .await
    .expect("owner within 10 s")
    .unwrap()
    .clone()
}

/// How many calls of `endpoint` the gateway has answered (its `$SRV.STATS`).
async fn answered(client: &async_nats::Client, endpoint: &str) -> u64 {
    let reply = client
        .request("$SRV.STATS.dagnats-api", Bytes::new())
        .await
        .unwrap();
    let stats: Value = serde_json::from_slice(&reply.payload).unwrap();
    stats["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == endpoint)
        .and_then(|e| e["num_requests"].as_u64())
        .unwrap()
}

/// Keeper `a` owns k; keeper `b` waits for it: its acquire was answered
/// `granted: false`, and it subscribed to k's changes before that acquire.
async fn a_owns_and_b_waits(s: &Setup, leases: &LeaseClient) -> (LeaseKeeper, LeaseKeeper) {
    let a = keeper(leases, "a", false);
    until_owner(&a).await;
    let b = keeper(leases, "b", true);
    eventually(
        "b's acquire to be answered",
        Duration::from_secs(5),
        || async { (answered(&s.client, "acquire").await >= 2).then_some(()) },
    )
    .await;
    assert_eq!(b.ownership(), Ownership::NotOwner);
    (a, b)
}

#[tokio::test]
async fn a_keeper_hands_off_and_the_waiting_successor_takes_over_at_the_transferred_fence() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let mut changes = changes_of_k(&s.client).await;
    let (mut a, b) = a_owns_and_b_waits(&s, &leases).await;
    let a_ownership = a.watch();
    let moved = a.hand_off("b").await.unwrap();
    assert!(moved.granted);
    assert_eq!(moved.lease.holder, "b");
    assert_eq!(*a_ownership.borrow(), Ownership::NotOwner);
    // b owns k in the tenure the transfer began, at the fence of the renew
    // it sent at the transferred fence (no acquire: the key was never free).
    let Ownership::Owner { tenure, fence, .. } = until_owner(&b).await else {
        unreachable!()
    };
    assert_eq!(tenure, moved.lease.revision);
    assert!(fence > tenure, "fence {fence}, tenure {tenure}");
    // The key's history: a's acquire (and renews), the transfer, then b's
    // renews; never a release or an expiry in between.
    let mut seen = Vec::new();
    while seen.last().map(|c: &ChangeEvent| c.revision) != Some(fence) {
        let msg = next_change(&mut changes).await;
        seen.push(dagnats_leases_client::changes::from_message(&msg).unwrap());
    }
    assert!(
        seen.iter().all(|c| !c.event.ends_tenure()),
        "the key was freed in between: {seen:?}"
    );
    let transfer = seen
        .iter()
        .position(|c| c.revision == tenure)
        .expect("the transfer's change");
    assert_eq!(seen[transfer].event, ChangeKind::Acquired);
    assert_eq!(seen[transfer].previous_holder.as_deref(), Some("a"));
    assert_eq!(
        (seen[transfer + 1..]
            .iter()
            .map(|c| (c.event, c.holder.as_deref())))
        .collect::<Vec<_>>(),
        [(ChangeKind::Renewed, Some("b"))],
        "{seen:?}"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn a_hand_off_by_a_keeper_that_does_not_hold_the_key_is_lost_without_a_call() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let (a, mut b) = a_owns_and_b_waits(&s, &leases).await;
    let err = b.hand_off("c").await.unwrap_err();
    assert!(err.is_lost(), "{err:?}");
    assert_eq!(answered(&s.client, "transfer").await, 0);
    assert_eq!(s.owner("k").await["holder"], "a");
    a.shutdown().await;
}

#[tokio::test]
async fn a_hand_off_to_itself_or_an_invalid_holder_is_invalid_and_the_keeper_keeps_the_lease() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let (mut a, b) = a_owns_and_b_waits(&s, &leases).await;
    let Ownership::Owner { tenure, .. } = a.ownership() else {
        panic!("a owns k")
    };
    for to in ["a", "not.a.holder", ""] {
        let err = a.hand_off(to).await.unwrap_err();
        assert!(matches!(err, ClientError::Invalid(_)), "{to:?}: {err:?}");
    }
    assert_eq!(answered(&s.client, "transfer").await, 0);
    assert!(
        matches!(a.ownership(), Ownership::Owner { tenure: t, .. } if t == tenure),
        "a still owns k in its tenure"
    );
    assert_eq!(s.owner("k").await["holder"], "a");
    a.shutdown().await;
    b.shutdown().await;
}
