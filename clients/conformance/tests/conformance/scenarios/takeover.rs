//! A keeper waiting for a held key, in a driver process of its own, takes
//! it over: soon after a release, within a TTL of its holder's process
//! being killed, woken by the key's change events rather than polling, and
//! at the transferred fence on a hand-off, the key never free between;
//! each of its tries says how long it has waited.

use std::time::Duration;

use dagnats_leases_client::wire::change::ChangeKind;
use dagnats_leases_client::wire::names::{HEADER_WAITED_MS, SUBJECT_ACQUIRE};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep_until};

use super::assert_names_no_owner;
use crate::ctx::Ctx;
use crate::driver::Driver;
use crate::taps::{Tap, change_subject};
use crate::world::World;

/// How long a keeper may take to become the owner of a free key.
const OWNER_WITHIN: Duration = Duration::from_secs(10);

/// A holder and a waiting keeper, each in a driver of its own, on the
/// shared gateway, with the runner watching the key.
struct Contest {
    world: std::sync::Arc<World>,
    key: String,
    a: String,
    b: String,
    holding: Driver,
    waiting: Driver,
    changes: Tap,
    acquires: Tap,
    /// When the waiting keeper's first acquire reached the server.
    waiting_since: Instant,
}

impl Contest {
    /// Keeper `a` owns the key (TTL `ttl`); keeper `b` (waiting) has asked
    /// for it once and been refused.
    async fn start(ctx: &Ctx, ttl: Duration) -> Contest {
        let world = ctx.world().await;
        let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
        let changes = Tap::start(&world.client, &change_subject(&key)).await;
        let acquires = Tap::start(&world.client, SUBJECT_ACQUIRE).await;
        let holding = ctx.driver(&world.server.url).await;
        holding.keeper_start("a", &key, &a, ttl, true).await;
        holding.ownership_from(0, "a", true, OWNER_WITHIN).await;
        let waiting = ctx.driver(&world.server.url).await;
        waiting.keeper_start("b", &key, &b, ttl, true).await;
        let mut contest = Contest {
            world,
            key,
            a,
            b,
            holding,
            waiting,
            changes,
            acquires,
            waiting_since: Instant::now(),
        };
        contest.waiting_since = contest.acquires_by_b_from(0, OWNER_WITHIN).await;
        contest
    }

    /// When keeper `b`'s first acquire from position `from` on reached
    /// the server.
    async fn acquires_by_b_from(&self, from: usize, within: Duration) -> Instant {
        let (key, b) = (&self.key, &self.b);
        let by_b = |msg: &async_nats::Message| {
            let body: Value = serde_json::from_slice(&msg.payload).unwrap_or_default();
            body["key"] == json!(key) && body["holder"] == json!(b)
        };
        let found = self.acquires.seen.first_from(from, within, by_b).await;
        found
            .unwrap_or_else(|| panic!("keeper b sent no acquire within {within:?}"))
            .0
    }

    /// The highest revision `a` wrote.
    fn last_fence_of_a(&self) -> u64 {
        let writes = self.changes.changes().into_iter().map(|(_, c)| c);
        let by_a = writes.filter(|c| c.holder.as_deref() == Some(self.a.as_str()));
        by_a.map(|c| c.revision).max().expect("a wrote the key")
    }

    /// Keeper `a` stops (releasing); keeper `b` must own the key within
    /// `within` of the release. The release's revision and `b`'s tenure.
    async fn release_and_take_over(&self, ctx: &Ctx, within: Duration) -> (u64, u64) {
        let stop = json!({"op": "keeper.stop", "keeper": "a"});
        self.holding.ok(stop).await;
        let released = self
            .changes
            .change_from(0, ChangeKind::Released, OWNER_WITHIN);
        let (released_at, released) = released.await;
        let (owned_at, tenure) = self.b_owns(within + OWNER_WITHIN).await;
        let after = owned_at.saturating_duration_since(released_at);
        ctx.figure("takeover after the release", after);
        assert!(
            after <= within,
            "b took over {after:?} after the release, not within {within:?}"
        );
        (released.revision, tenure)
    }

    /// Keeper `b`'s takeover: when it was reported and at which tenure.
    async fn b_owns(&self, within: Duration) -> (Instant, u64) {
        let (at, event) = self.waiting.ownership_from(0, "b", true, within).await;
        let tenure = event["tenure"]
            .as_u64()
            .unwrap_or_else(|| panic!("no tenure: {event}"));
        (at, tenure)
    }
}

pub async fn a_waiting_keeper_takes_over_within_1s_of_a_release(ctx: &Ctx) {
    let c = Contest::start(ctx, ctx.spec.ms("ttl_ms")).await;
    let err = c
        .waiting
        .request(json!({"op": "keeper.wait_owner", "keeper": "b", "timeout_ms": 200}))
        .await
        .expect_err("b cannot own a key that a holds");
    assert_eq!(err.kind, "timeout", "{err:?}");
    assert_names_no_owner(&err);
    let within = ctx.spec.ms("takeover_within_ms");
    let (released, tenure) = c.release_and_take_over(ctx, within).await;
    assert!(
        tenure > released,
        "b's tenure {tenure} after the release at {released}"
    );
    let waited = c
        .waiting
        .ok(json!({"op": "keeper.wait_owner", "keeper": "b", "timeout_ms": null}))
        .await;
    assert!(
        waited["fence"].as_u64().is_some_and(|f| f >= tenure),
        "{waited}"
    );
}

pub async fn a_waiting_keeper_takes_over_within_ttl_plus_1s_of_the_holder_being_killed(ctx: &Ctx) {
    let ttl = ctx.spec.ms("ttl_ms");
    let c = Contest::start(ctx, ttl).await;
    c.holding.signal("KILL");
    let killed_at = Instant::now();
    let within = ttl + ctx.spec.ms("takeover_within_ms");
    let (owned_at, tenure) = c.b_owns(within + OWNER_WITHIN).await;
    let after = owned_at - killed_at;
    ctx.figure("takeover after SIGKILL", after);
    assert!(
        after <= within,
        "b took over {after:?} after a's process was killed, not within {within:?}"
    );
    let fence_of_a = c.last_fence_of_a();
    assert!(
        tenure > fence_of_a,
        "b's tenure {tenure} fences out a's {fence_of_a}"
    );
}

pub async fn a_waiting_keeper_is_woken_by_change_events_not_polling(ctx: &Ctx) {
    let c = Contest::start(ctx, ctx.spec.ms("ttl_ms")).await;
    let window = ctx.spec.ms("window_ms");
    let until = c.waiting_since + window;
    sleep_until(until).await;
    let (key, b) = (c.key.clone(), c.b.clone());
    let asked: Vec<Instant> = c
        .acquires
        .requests(SUBJECT_ACQUIRE, &key, Some(&b))
        .into_iter()
        .map(|(at, _)| at)
        .filter(|at| *at <= until)
        .collect();
    let renewed = c.changes.changes().into_iter().filter(|(at, ch)| {
        ch.event == ChangeKind::Renewed && *at >= c.waiting_since && *at <= until
    });
    assert!(
        renewed.count() >= 1,
        "a renewed within the window, so b had events to wake on"
    );
    let most = ctx.spec.u64("max_acquires_while_waiting") as usize;
    assert!(
        asked.len() <= most,
        "b sent {} acquires in {window:?} while a held the key",
        asked.len()
    );
    // And it is woken: the release brings it in at once.
    c.release_and_take_over(ctx, ctx.spec.ms("takeover_within_ms"))
        .await;
}

pub async fn a_hand_off_gives_the_waiting_keeper_the_transferred_fence_with_no_free_moment(
    ctx: &Ctx,
) {
    let c = Contest::start(ctx, ctx.spec.ms("ttl_ms")).await;
    let moved = c
        .holding
        .ok(json!({"op": "keeper.hand_off", "keeper": "a", "to": c.b}))
        .await;
    let handed_at = Instant::now();
    assert_eq!(
        (&moved["granted"], &moved["holder"], &moved["key"]),
        (&json!(true), &json!(c.b), &json!(c.key)),
        "{moved}"
    );
    let fence = super::revision(&moved);
    let within = ctx.spec.ms("takeover_within_ms");
    let (owned_at, tenure) = c.b_owns(within + OWNER_WITHIN).await;
    assert_eq!(tenure, fence, "b's tenure is the hand-off's revision");
    let after = owned_at.saturating_duration_since(handed_at);
    ctx.figure("takeover after the hand-off's answer", after);
    assert!(
        after <= within,
        "b took over {after:?} after the hand-off, not within {within:?}"
    );
    let freed: Vec<_> = c
        .changes
        .changes()
        .into_iter()
        .filter(|(_, ch)| ch.event.ends_tenure())
        .collect();
    assert!(freed.is_empty(), "the key was free for a moment: {freed:?}");
    let owner = c.world.call("owner", json!({"key": c.key})).await;
    assert_eq!(owner["holder"], json!(c.b), "{owner}");
}

pub async fn a_waiting_keepers_acquires_say_how_long_it_has_waited(ctx: &Ctx) {
    // Replies to every request, so the release waits for b's refusal.
    let replies = Tap::start(&ctx.world().await.client, "_INBOX.>").await;
    let c = Contest::start(ctx, ctx.spec.ms("ttl_ms")).await;
    let by_b = |msg: &async_nats::Message| {
        let body: Value = serde_json::from_slice(&msg.payload).unwrap_or_default();
        body["key"] == json!(c.key) && body["holder"] == json!(c.b)
    };
    let tries = || -> Vec<_> {
        let all = c.acquires.seen.all().into_iter();
        all.filter(|(_, msg)| by_b(msg)).collect()
    };
    let inbox = tries()[0]
        .1
        .reply
        .clone()
        .expect("an acquire asks for a reply");
    let answer = replies
        .seen
        .first_from(0, OWNER_WITHIN, |msg| msg.subject == inbox);
    let (_, refused) = answer.await.expect("b's first acquire answered");
    let refused: Value = serde_json::from_slice(&refused.payload).unwrap_or_default();
    assert_eq!(
        refused["granted"], false,
        "b's first try is refused: {refused}"
    );
    let before = c.acquires.seen.len();
    let (_, tenure) = c
        .release_and_take_over(ctx, ctx.spec.ms("takeover_within_ms"))
        .await;
    // The tap may see the acquire that took the key after b reports it.
    c.acquires_by_b_from(before, OWNER_WITHIN).await;
    let tries: Vec<_> = tries()
        .into_iter()
        .map(|(at, msg)| {
            let waited = msg.headers.as_ref().and_then(|h| h.get(HEADER_WAITED_MS));
            (at, waited.map(|v| v.as_str().to_string()))
        })
        .collect();
    let said = |i: usize| -> u64 {
        let (_, waited) = &tries[i];
        let waited = waited
            .as_deref()
            .unwrap_or_else(|| panic!("b's acquire {i} has no {HEADER_WAITED_MS}: {tries:?}"));
        waited
            .parse()
            .unwrap_or_else(|_| panic!("{HEADER_WAITED_MS}: {waited:?} is not milliseconds"))
    };
    assert!(
        tries.len() >= 2,
        "b tried once while a held the key and again to take it over (tenure {tenure}): {tries:?}"
    );
    assert_eq!(said(0), 0, "the first try has waited nothing");
    let tolerance = ctx.spec.ms("tolerance_ms");
    let first = tries[0].0;
    for (i, (at, _)) in tries.iter().enumerate().skip(1) {
        let seen = at.saturating_duration_since(first);
        let told = Duration::from_millis(said(i));
        assert!(
            told.abs_diff(seen) <= tolerance,
            "b's acquire {i} says it waited {told:?}; it came {seen:?} after the first"
        );
    }
}
