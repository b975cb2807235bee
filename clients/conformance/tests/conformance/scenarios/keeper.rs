//! The keeper as a holder: how often it renews, and how soon it stops
//! acting as owner when a renew is `lost` or its process was paused past
//! its TTL (docs/protocol.md, Holder rules and client libraries).

use std::time::Duration;

use dagnats_leases_client::wire::change::ChangeKind;
use dagnats_leases_client::wire::names::SUBJECT_RENEW;
use serde_json::json;

use crate::ctx::Ctx;
use crate::taps::{Tap, change_subject};

/// How long a keeper may take to become the owner of a free key.
const OWNER_WITHIN: Duration = Duration::from_secs(10);

pub async fn the_keeper_renews_about_every_third_of_its_ttl(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, holder) = (ctx.name("k"), ctx.name("a"));
    let ttl = ctx.spec.ms("ttl_ms");
    let changes = Tap::start(&world.client, &change_subject(&key)).await;
    d.keeper_start("k", &key, &holder, ttl, false).await;
    let renewals = ctx.spec.u64("renewals") as usize;
    // The acquire, then `renewals` renewals.
    let within = ttl * (renewals as u32 + 2);
    changes
        .seen
        .first_from(renewals, within, |_| true)
        .await
        .unwrap_or_else(|| {
            panic!(
                "fewer than {renewals} renewals within {within:?}: {:?}",
                changes.changes()
            )
        });
    let writes = changes.changes();
    let kinds: Vec<ChangeKind> = writes
        .iter()
        .map(|(_, c)| c.event)
        .take(renewals + 1)
        .collect();
    let mut expected = vec![ChangeKind::Acquired];
    expected.extend(std::iter::repeat_n(ChangeKind::Renewed, renewals));
    assert_eq!(kinds, expected, "{writes:?}");
    let (min, max) = (
        ctx.spec.ms("renew_every_min_ms"),
        ctx.spec.ms("renew_every_max_ms"),
    );
    for pair in writes[..=renewals].windows(2) {
        let every = pair[1].0 - pair[0].0;
        ctx.figure("renewal after the write before it", every);
        assert!(
            (min..=max).contains(&every),
            "a renewal {every:?} after the write before it, not within {min:?} to {max:?}: {writes:?}"
        );
    }
}

pub async fn fence_is_null_at_once_when_a_renew_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, holder, intruder) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let ttl = ctx.spec.ms("ttl_ms");
    let renews = Tap::start(&world.client, SUBJECT_RENEW).await;
    d.keeper_start("k", &key, &holder, ttl, false).await;
    d.ownership_from(0, "k", true, OWNER_WITHIN).await;
    // One write takes the key away: a transfer at the current fence. A
    // keeper's renew landing first makes it `lost`; then try again.
    let mut attempts = 0;
    let (from, events_from) = loop {
        attempts += 1;
        assert!(
            attempts <= 10,
            "the keeper renewed before each of 10 transfers"
        );
        let fence = world.call("owner", json!({"key": key})).await["revision"].clone();
        let (from, events_from) = (renews.seen.len(), d.events.len());
        let moved = world
            .call(
                "transfer",
                json!({"key": key, "holder": holder, "revision": fence,
                                     "to": intruder, "ttl_ms": 60_000}),
            )
            .await;
        if moved["granted"] == true {
            ctx.note(format!("transferred to {intruder}: {moved}"));
            break (from, events_from);
        }
    };
    let by_keeper = |msg: &async_nats::Message| {
        let body: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap_or_default();
        body["key"] == key && body["holder"] == holder
    };
    let (renewed_at, _) = renews
        .seen
        .first_from(from, ttl, by_keeper)
        .await
        .unwrap_or_else(|| {
            panic!("the keeper sent no renew within its TTL ({ttl:?}) of the transfer")
        });
    let (lost_at, _) = d.ownership_from(events_from, "k", false, ttl).await;
    let within = ctx.spec.ms("lost_within_ms");
    let after = lost_at.saturating_duration_since(renewed_at);
    ctx.figure("loss reported after the renew answered lost", after);
    assert!(
        after <= within,
        "not owner only {after:?} after the renew answered lost was sent"
    );
    assert_eq!(d.keeper_state("k").await, (None, None));
}

pub async fn a_paused_holder_reports_null_before_it_renews_again(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, holder, intruder) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let ttl = ctx.spec.ms("ttl_ms");
    let changes = Tap::start(&world.client, &change_subject(&key)).await;
    d.keeper_start("k", &key, &holder, ttl, true).await;
    d.ownership_from(0, "k", true, OWNER_WITHIN).await;
    let from = changes.seen.len();
    d.signal("STOP");
    // Paused past its TTL: the server frees the key, another takes it.
    let expiry_within = ttl + ctx.spec.ms("expiry_lag_ms");
    changes
        .change_from(from, ChangeKind::Expired, expiry_within)
        .await;
    let taken = world
        .call(
            "acquire",
            json!({"key": key, "holder": intruder, "ttl_ms": 60_000}),
        )
        .await;
    assert_eq!(taken["granted"], true, "{taken}");
    let events_from = d.events.len();
    d.signal("CONT");
    let resumed_at = tokio::time::Instant::now();
    assert_eq!(
        d.keeper_state("k").await,
        (None, None),
        "fence() and tenure() right after the pause"
    );
    let (lost_at, _) = d
        .ownership_from(events_from, "k", false, ctx.spec.ms("reported_within_ms"))
        .await;
    ctx.figure("loss reported after SIGCONT", lost_at - resumed_at);
    let owned_again = d
        .events
        .all()
        .into_iter()
        .skip(events_from)
        .find(|(_, e)| e["owner"] == true);
    assert_eq!(owned_again, None, "the key is {intruder}'s");
    assert_eq!(d.keeper_state("k").await, (None, None));
}

pub async fn a_hand_off_to_itself_or_to_an_invalid_holder_is_invalid_and_the_keeper_keeps_the_lease(
    ctx: &Ctx,
) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, holder) = (ctx.name("k"), ctx.name("a"));
    d.keeper_start("k", &key, &holder, ctx.spec.ms("ttl_ms"), false)
        .await;
    d.ownership_from(0, "k", true, OWNER_WITHIN).await;
    let (_, tenure) = d.keeper_state("k").await;
    let mut refused = ctx.spec.strings("invalid_to");
    refused.push(holder.clone());
    for to in refused {
        let handed = d.request(json!({"op": "keeper.hand_off", "keeper": "k", "to": to}));
        let err = handed.await.expect_err("an invalid hand-off is refused");
        assert_eq!(err.kind, "invalid", "hand-off to {to:?}: {err:?}");
        super::assert_names_no_owner(&err);
    }
    let (fence, still) = d.keeper_state("k").await;
    assert!(fence.is_some(), "the keeper still owns the key");
    assert_eq!(still, tenure, "in the same tenure");
    let owner = world.call("owner", json!({"key": key})).await;
    assert_eq!(owner["holder"], json!(holder), "{owner}");
}
