//! The Rust holder side against a real gateway: typed calls, the keeper,
//! the owner inbox.

use std::time::Duration;

use crate::common;
use crate::common::{NatsServer, Setup, eventually};
use bytes::Bytes;
use dagnats_leases_client::wire::reply::Owner;
use dagnats_leases_client::{
    ClientError, KeeperOptions, Kind, LeaseClient, LeaseKeeper, Ownership, serve_inbox,
};
use serde_json::json;
use tokio::time::Instant;

fn keeper(client: &LeaseClient, key: &str, holder: &str, ttl_s: u64, wait: bool) -> LeaseKeeper {
    LeaseKeeper::start(
        client.clone(),
        KeeperOptions {
            key: key.into(),
            holder: holder.into(),
            ttl: Duration::from_secs(ttl_s),
            wait,
        },
    )
}

async fn until_owner(keeper: &LeaseKeeper) -> (u64, u64, Instant) {
    let mut watch = keeper.watch();
    let owner = tokio::time::timeout(
        Duration::from_secs(15),
        watch.wait_for(|o| matches!(o, Ownership::Owner { .. })),
    )
    .await
    .expect("owner within 15 s")
    .unwrap()
    .clone();
    match owner {
        Ownership::Owner {
            tenure,
            fence,
            until,
        } => (tenure, fence, until),
        Ownership::NotOwner => unreachable!(),
    }
}

#[tokio::test]
async fn typed_calls_return_the_wire_replies_and_kinds() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let ttl = Duration::from_secs(15);
    let grant = leases.acquire("k", "a", ttl).await.unwrap();
    assert!(grant.granted);
    let other = leases.acquire("k", "b", ttl).await.unwrap();
    assert!(!other.granted);
    assert_eq!(other.lease.holder, "a");
    let renewed = leases
        .renew("k", "a", grant.lease.revision, ttl)
        .await
        .unwrap();
    assert!(renewed.lease.revision > grant.lease.revision);
    let err = leases
        .renew("k", "b", renewed.lease.revision, ttl)
        .await
        .unwrap_err();
    assert!(err.is_lost(), "{err:?}");
    match leases.owner("k").await.unwrap() {
        Owner::Held(lease) => assert_eq!(lease, renewed.lease),
        Owner::Free(free) => panic!("{free:?}"),
    }
    let released = leases
        .release("k", "a", renewed.lease.revision)
        .await
        .unwrap();
    assert!(released.released);
    let err = leases
        .forward("k", Bytes::from_static(b"x"), Duration::from_millis(500))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(&Kind::NotHeld));
    let err = leases
        .acquire("k", "a", Duration::from_millis(1500))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid(_)), "{err:?}");
}

#[tokio::test]
async fn no_gateway_is_reported_as_such() {
    let server = NatsServer::start().await;
    let leases = LeaseClient::new(common::client(&server.url).await);
    let err = leases.owner("k").await.unwrap_err();
    assert_eq!(err, ClientError::NoGateway);
}

#[tokio::test]
async fn a_forward_too_large_for_max_payload_is_payload_too_large_and_nothing_is_sent() {
    use futures::StreamExt;
    let server = NatsServer::start().await;
    let client = common::client(&server.url).await;
    let mut heard = client.subscribe("api.leases.*").await.unwrap();
    common::settle(&client).await;
    let leases = LeaseClient::new(client.clone());
    // Base64 in the request makes it a third larger than max_payload.
    let payload = Bytes::from(vec![b'x'; client.server_info().max_payload * 3 / 4 + 1]);
    let err = leases
        .forward("k", payload, Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::PayloadTooLarge(_)), "{err:?}");
    assert_eq!(err.kind(), Some(&Kind::PayloadTooLarge));
    // A last call that is sent, with nobody to answer it.
    let quick = Duration::from_millis(300);
    let owner = leases.with_timeout(quick).owner("k").await;
    assert_eq!(owner, Err(ClientError::Timeout(quick)));
    let first = heard
        .next()
        .await
        .expect("the owner read reached the subject");
    assert_eq!(
        first.subject.as_str(),
        "api.leases.owner",
        "nothing before it"
    );
}

#[tokio::test]
async fn a_copy_tells_its_wait_only_where_it_changes_the_answer() {
    // A gateway that never answers: every copy of every call reaches it,
    // and it notes what each one said it still waits (`None`: nothing).
    use dagnats_leases_client::wire::names::HEADER_WAIT_MS;
    use futures::StreamExt;
    let server = NatsServer::start().await;
    let client = common::client(&server.url).await;
    let mut heard = client.subscribe("api.leases.*").await.unwrap();
    common::settle(&client).await;
    let leases = LeaseClient::new(client.clone());
    let lister = leases.clone().with_timeout(Duration::from_secs(2));
    let (renew, list, forward) = tokio::join!(
        leases.renew("k", "a", 7, Duration::from_secs(30)),
        lister.list("", None, None),
        leases.forward("k", Bytes::from_static(b"x"), Duration::from_millis(500)),
    );
    for answer in [renew.map(drop), list.map(drop), forward.map(drop)] {
        assert!(matches!(answer, Err(ClientError::Timeout(_))), "{answer:?}");
    }
    let mut waits: std::collections::BTreeMap<String, Vec<Option<u64>>> = Default::default();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(200), heard.next()).await {
        let wait = msg.headers.as_ref().and_then(|h| h.get(HEADER_WAIT_MS));
        let wait = wait.map(|v| v.as_str().parse::<u64>().unwrap());
        waits.entry(msg.subject.to_string()).or_default().push(wait);
    }
    // The renew's first copy waits the default 5 s, past the gateway's own
    // 4.5 s budget and its margin: nothing to say. Its copies at 2.5 s
    // and 3.75 s say what is left.
    let renews = &waits["api.leases.renew"];
    assert_eq!(renews.len(), 3, "{waits:?}");
    assert_eq!(renews[0], None, "{waits:?}");
    assert!(
        matches!(renews[1], Some(ms) if ms > 1_250 && ms <= 2_500),
        "{waits:?}"
    );
    assert!(matches!(renews[2], Some(ms) if ms <= 1_250), "{waits:?}");
    // Nothing but the wait bounds a list: every copy says it.
    let lists = &waits["api.leases.list"];
    assert_eq!(lists.len(), 3, "{waits:?}");
    assert!(
        matches!(lists[0], Some(ms) if ms > 1_000 && ms <= 2_000),
        "{waits:?}"
    );
    assert!(lists.iter().all(Option::is_some), "{waits:?}");
    // A forward's own timeout bounds it, and it is sent once.
    assert_eq!(waits["api.leases.forward"], vec![None], "{waits:?}");
}

#[tokio::test]
async fn keeper_holds_the_lease_past_its_ttl_by_renewing() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let keeper = keeper(&leases, "k", "a", 1, false);
    let (tenure, _, _) = until_owner(&keeper).await;
    let start = Instant::now();
    let mut watch = keeper.watch();
    // Three TTLs later it is still the owner, at a higher fence.
    while start.elapsed() < Duration::from_secs(3) {
        tokio::time::timeout(Duration::from_secs(2), watch.changed())
            .await
            .expect("a renewal at least every TTL")
            .unwrap();
        assert!(
            keeper.ownership().fence().is_some(),
            "{:?}",
            keeper.ownership()
        );
    }
    let Ownership::Owner { fence, .. } = keeper.ownership() else {
        panic!()
    };
    assert!(fence > tenure);
    let owner = s.call("owner", json!({"key": "k"})).await;
    assert_eq!(owner["holder"], "a");
    assert_eq!(owner["revision"], fence);
    keeper.shutdown().await;
    assert_eq!(
        s.call("owner", json!({"key": "k"})).await["held"],
        false,
        "released on shutdown"
    );
}

#[tokio::test]
async fn a_waiting_keeper_is_woken_by_the_release_not_the_ttl() {
    use futures::StreamExt;

    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let first = keeper(&leases, "k", "a", 60, true);
    until_owner(&first).await;
    let mut acquires = s.client.subscribe("api.leases.acquire").await.unwrap();
    s.client.flush().await.unwrap();
    let second = keeper(&leases, "k", "b", 60, true);
    // It asked, was not granted, and waits.
    let asked = async {
        while let Some(msg) = acquires.next().await {
            let body: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
            if body["holder"] == "b" {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), asked)
        .await
        .expect("the second keeper asked");
    assert_eq!(second.ownership(), Ownership::NotOwner);
    let released_at = Instant::now();
    first.shutdown().await;
    until_owner(&second).await;
    // Far sooner than the 60 s TTL that polling would have waited for.
    assert!(released_at.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn keeper_reports_not_owner_by_its_deadline_when_the_server_is_gone() {
    let mut s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let keeper = keeper(&leases, "k", "a", 2, false);
    until_owner(&keeper).await;
    let mut watch = keeper.watch();
    s.server.stop();
    let Ownership::Owner { until, .. } = watch.borrow_and_update().clone() else {
        panic!()
    };
    tokio::time::timeout(
        Duration::from_secs(5),
        watch.wait_for(|o| *o == Ownership::NotOwner),
    )
    .await
    .expect("NotOwner once renewals cannot land")
    .unwrap();
    // The fence was unusable from `until` on, whatever the watch delay.
    assert!(Instant::now() >= until);
    assert_eq!(keeper.ownership().fence(), None);
}

#[tokio::test]
async fn two_keepers_never_own_the_key_at_overlapping_times() {
    let s = Setup::start().await;
    // Separate connections: closing A's cuts A off like a partition would.
    let conn_a = common::client(&s.server.url).await;
    let a = keeper(&LeaseClient::new(conn_a.clone()), "k", "a", 1, true);
    let b = keeper(
        &LeaseClient::new(common::client(&s.server.url).await),
        "k",
        "b",
        1,
        true,
    );
    until_owner(&a).await;
    assert_eq!(b.ownership(), Ownership::NotOwner);
    // Record when B becomes owner, as it happens.
    let mut b_watch = b.watch();
    let b_owner_at = tokio::spawn(async move {
        b_watch
            .wait_for(|o| matches!(o, Ownership::Owner { .. }))
            .await
            .unwrap();
        Instant::now()
    });
    let Ownership::Owner { fence: a_fence, .. } = a.ownership() else {
        panic!()
    };
    conn_a.drain().await.unwrap();
    let mut a_watch = a.watch();
    let mut a_until = None;
    loop {
        match a_watch.borrow_and_update().clone() {
            Ownership::Owner { until, .. } => a_until = Some(until),
            Ownership::NotOwner => break,
        }
        a_watch.changed().await.unwrap();
    }
    let a_until = a_until.expect("A was owner");
    let b_owner_at = tokio::time::timeout(Duration::from_secs(10), b_owner_at)
        .await
        .expect("B takes over")
        .unwrap();
    assert!(
        a_until <= b_owner_at,
        "A's entitlement ended before B's began"
    );
    let Ownership::Owner {
        tenure: b_tenure, ..
    } = b.ownership()
    else {
        panic!()
    };
    assert!(
        b_tenure > a_fence,
        "B's tenure {b_tenure} fences out A's {a_fence}"
    );
}

#[tokio::test]
async fn the_owner_inbox_handles_requests_only_for_keys_it_owns() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let keeper = keeper(&leases, "mine", "worker", 15, false);
    let (tenure, _, _) = until_owner(&keeper).await;
    // The gateway also names "worker" for "theirs", but this process does
    // not act as its owner.
    leases
        .acquire("theirs", "worker", Duration::from_secs(15))
        .await
        .unwrap();
    let ownership = keeper.watch();
    let tenure_of = move |key: &str| {
        (key == "mine")
            .then(|| ownership.borrow().tenure())
            .flatten()
    };
    let handler = move |req: dagnats_leases_client::InboxRequest| async move {
        assert!(
            req.fence >= tenure,
            "fence {} below tenure {tenure}",
            req.fence
        );
        let text = format!("{}:{}", req.key, String::from_utf8_lossy(&req.payload));
        Bytes::from(text)
    };
    let inbox = tokio::spawn(serve_inbox(s.client.clone(), "worker", tenure_of, handler));
    let reply = eventually("the inbox to answer", Duration::from_secs(5), || async {
        leases
            .forward("mine", Bytes::from_static(b"hi"), Duration::from_secs(1))
            .await
            .ok()
    })
    .await;
    assert_eq!(reply.payload.0, Bytes::from_static(b"mine:hi"));
    let err = leases
        .forward("theirs", Bytes::from_static(b"hi"), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), Some(&Kind::OwnerRejected), "{err:?}");
    inbox.abort();
}

#[tokio::test]
async fn an_owner_inbox_answers_a_request_sent_from_another_connection_the_moment_it_is_subscribed()
{
    use dagnats_leases_client::OwnerInbox;
    use dagnats_leases_client::wire::names::HEADER_FENCE;
    let server = NatsServer::start().await;
    let other = common::client(&server.url).await;
    let inbox = OwnerInbox::subscribe(common::client(&server.url).await, "worker")
        .await
        .unwrap();
    // No wait of any kind: the subscription is the server's already.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(HEADER_FENCE, "7");
    let request = other.request_with_headers("dagnats.lease.inbox.worker.k", headers, "hi".into());
    let serve = inbox.serve(
        |key: &str| (key == "k").then_some(7),
        |req: dagnats_leases_client::InboxRequest| async move { req.payload },
    );
    let reply = tokio::select! {
        reply = request => reply.expect("the inbox answers, never no responders"),
        served = serve => panic!("the inbox stopped serving: {served:?}"),
    };
    assert_eq!(reply.payload, Bytes::from_static(b"hi"));
}

/// A member of the gateways' queue group on `subject` that swallows the
/// first `requests` it gets, as a gateway on a frozen node does until its
/// routes close; the server drops it once it got them. In the group when
/// this returns.
async fn hole(client: &async_nats::Client, subject: &str, requests: u64) -> async_nats::Subscriber {
    use dagnats_leases_client::wire::names::QUEUE_GROUP;
    let mut hole = client
        .queue_subscribe(subject.to_string(), QUEUE_GROUP.into())
        .await
        .unwrap();
    hole.unsubscribe_after(requests).await.unwrap();
    common::settle(client).await;
    hole
}

/// How many requests `hole` got. The hole is out of the group when this
/// returns, so the next round's requests cannot meet it.
async fn swallowed(client: &async_nats::Client, mut hole: async_nats::Subscriber) -> usize {
    use futures::StreamExt;
    // Whatever the server handed the hole has been read by now.
    common::settle(client).await;
    let mut got = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::ZERO, hole.next()).await {
        got += 1;
    }
    // Already gone if it got all it swallows; a second UNSUB is harmless.
    let _ = hole.unsubscribe().await;
    common::settle(client).await;
    got
}

/// The resend tests' call timeout: copies go at 2 s and 3 s, and the last
/// has 1 s to be answered, ample for a gateway sharing two cores with the
/// other tests.
const RESEND_TIMEOUT: Duration = Duration::from_secs(4);

/// How many calls a test makes before the queue group, with even odds
/// each time, has picked the hole as often as the test needs.
const ROUNDS: usize = 40;

/// Makes `call` round after round, each time with a fresh [`hole`] on
/// `subject` that swallows `requests`, until a round in which the hole got
/// all of them; that round's number and answer.
async fn until_swallowed<T, F: Future<Output = T>>(
    client: &async_nats::Client,
    (subject, requests): (&str, u64),
    mut call: impl FnMut(usize) -> F,
) -> (usize, T) {
    for round in 0..ROUNDS {
        let hole = hole(client, subject, requests).await;
        let answer = call(round).await;
        if swallowed(client, hole).await as u64 == requests {
            return (round, answer);
        }
    }
    panic!("in {ROUNDS} rounds the queue group never gave the hole {requests} request(s)")
}

#[tokio::test]
async fn a_renew_lost_twice_in_a_gateway_that_never_answers_is_sent_again_and_answered() {
    // A renew whose first two copies the hole swallows is still answered
    // within the client's timeout, by the copy at three quarters of it.
    use dagnats_leases_client::wire::names::SUBJECT_RENEW;
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone()).with_timeout(RESEND_TIMEOUT);
    let ttl = Duration::from_secs(30);
    let first = leases.acquire("k", "a", ttl).await.unwrap().lease.revision;
    let fence = std::cell::Cell::new(first);
    let hole_client = common::client(&s.server.url).await;
    let (leases, fence_now) = (&leases, &fence);
    until_swallowed(&hole_client, (SUBJECT_RENEW, 2), |round| async move {
        let renewed = leases
            .renew("k", "a", fence_now.get(), ttl)
            .await
            .unwrap_or_else(|err| panic!("round {round}: {err}"));
        let fence = fence_now.get();
        assert!(renewed.lease.revision > fence, "round {round}: {renewed:?}");
        fence_now.set(renewed.lease.revision);
    })
    .await;
    // The copies left one lease, at the last fence answered.
    let owner = leases.owner("k").await.unwrap();
    assert!(matches!(owner, Owner::Held(lease) if lease.revision == fence.get()));
}

#[tokio::test]
async fn an_acquire_lost_in_a_gateway_that_never_answers_is_sent_again_and_answered() {
    // Acquire is idempotent: its copy gets the first one's lease.
    use dagnats_leases_client::wire::names::SUBJECT_ACQUIRE;
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone()).with_timeout(RESEND_TIMEOUT);
    let hole_client = common::client(&s.server.url).await;
    let leases = &leases;
    let (round, (key, grant)) =
        until_swallowed(&hole_client, (SUBJECT_ACQUIRE, 1), |round| async move {
            let key = format!("k-{round}");
            let grant = leases
                .acquire(&key, "a", Duration::from_secs(30))
                .await
                .unwrap_or_else(|err| panic!("round {round}: {err}"));
            assert!(grant.granted, "round {round}: {grant:?}");
            (key, grant)
        })
        .await;
    let owner = leases.owner(&key).await.unwrap();
    assert!(
        matches!(&owner, Owner::Held(l) if l.revision == grant.lease.revision),
        "round {round}: {owner:?}"
    );
}

#[tokio::test]
async fn a_forward_lost_in_a_gateway_that_never_answers_is_not_sent_again() {
    // The owner could process a copy as well ("a timeout is never
    // retried"): the caller hears a timeout, the one outcome that says it
    // may have happened.
    use dagnats_leases_client::wire::names::SUBJECT_FORWARD;
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone()).with_timeout(Duration::from_secs(1));
    let hole_client = common::client(&s.server.url).await;
    let leases = &leases;
    // Nobody holds the key: a copy reaching the gateway would answer
    // `not_held` at once.
    let (round, called) = until_swallowed(&hole_client, (SUBJECT_FORWARD, 1), |_| async move {
        leases
            .forward("f", Bytes::from_static(b"x"), Duration::from_millis(100))
            .await
    })
    .await;
    assert!(
        matches!(called, Err(ClientError::Timeout(_))),
        "round {round}: {called:?}"
    );
}

#[tokio::test]
async fn a_keeper_started_holding_a_grant_owns_at_once_from_that_request_and_renews_it() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let started = Instant::now();
    let grant = leases
        .acquire("k", "a", Duration::from_secs(3))
        .await
        .unwrap();
    let revision = grant.lease.revision;
    let options = KeeperOptions {
        key: "k".into(),
        holder: "a".into(),
        ttl: Duration::from_secs(3),
        wait: false,
    };
    let keeper = LeaseKeeper::holding(leases.clone(), options, started, grant.lease);
    match keeper.ownership() {
        Ownership::Owner {
            tenure,
            fence,
            until,
        } => {
            assert_eq!((tenure, fence), (revision, revision));
            assert!(
                until <= started + Duration::from_secs(3),
                "counted from the request's start"
            );
        }
        Ownership::NotOwner => panic!("a keeper started holding owns at once"),
    }
    // No second acquire: its next write is the renew at a third of the TTL.
    let renewed = eventually("a renewal", Duration::from_secs(5), || async {
        match keeper.ownership() {
            Ownership::Owner { tenure, fence, .. } if fence > revision => Some(tenure),
            _ => None,
        }
    })
    .await;
    assert_eq!(renewed, revision, "the tenure stays the grant's");
    keeper.shutdown().await;
    let owner = leases.owner("k").await.unwrap();
    assert!(
        matches!(owner, Owner::Free(_)),
        "released on shutdown: {owner:?}"
    );
}

#[tokio::test]
async fn fence_tenure_and_wait_owner_follow_the_keepers_ownership() {
    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let a = keeper(&leases, "k", "a", 3, true);
    let fence = tokio::time::timeout(Duration::from_secs(5), a.wait_owner())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a.fence(), a.tenure()), (Some(fence), Some(fence)));
    let b = keeper(&leases, "k", "b", 3, false);
    let err = tokio::time::timeout(Duration::from_secs(5), b.wait_owner())
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_lost(), "a keeper that will not wait stops: {err:?}");
    assert_eq!((b.fence(), b.tenure()), (None, None));
    a.shutdown().await;
}

/// The README's Rust example, as written there (rustfmt would rewrap it).
#[rustfmt::skip]
#[tokio::test]
async fn the_readmes_rust_example_runs_as_written() -> Result<(), Box<dyn std::error::Error>> {
    let s = Setup::start().await;
    let readme = include_str!("../../../../README.md");
    let block = readme
        .split("Rust, [`crates/client`]")
        .nth(1)
        .and_then(|rest| rest.split("```rust\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the README's Rust example");
    let this = include_str!("client.rs");
    for line in block.lines() {
        let line = line.replace("\"nats://127.0.0.1:4222\"", "&s.server.url");
        assert!(this.contains(&line), "the test runs the README's line {line:?}");
    }
    let client = LeaseClient::new(async_nats::connect(&s.server.url).await?);
    let opts = KeeperOptions { key: "notify-leader".into(), holder: "notify-7f3a".into(), ttl: Duration::from_secs(15), wait: true };
    let keeper = LeaseKeeper::start(client, opts);
    let fence = keeper.wait_owner().await?; // before each write: keeper.fence(); None: stop acting as owner
    println!("leading at fence {fence}"); keeper.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_keeper_shut_down_while_its_acquire_is_in_flight_releases_what_it_was_granted() {
    use futures::StreamExt;

    let s = Setup::start().await;
    let leases = LeaseClient::new(s.client.clone());
    let mut acquires = s.client.subscribe("api.leases.acquire").await.unwrap();
    s.client.flush().await.unwrap();
    let signal = |name: &str| {
        let sent = std::process::Command::new("kill")
            .args([name, &s.gateway.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    signal("-STOP");
    let k = keeper(&leases, "k", "a", 60, false);
    tokio::time::timeout(Duration::from_secs(10), acquires.next())
        .await
        .expect("the acquire is in flight");
    let stopping = tokio::spawn(k.shutdown());
    signal("-CONT");
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the keeper stops once its acquire is answered")
        .unwrap();
    let owner = leases.owner("k").await.unwrap();
    assert!(
        matches!(owner, Owner::Free(_)),
        "released, not held for its 60 s TTL: {owner:?}"
    );
}
