//! The loss deadline: when the gateway stops answering, a keeper's
//! `fence()` is null from the start of its last granting request plus the
//! TTL on (docs/protocol.md, Holder rules and client libraries).
//!
//! The runner cannot see inside the library, but it sees each request
//! reach the server, after the library sent it: the last write's request,
//! as the runner saw it, plus the TTL is an upper bound of the deadline.
//! With replies held back by a proxy, a deadline counted from the reply
//! instead would land a whole delay later, past that bound.

use std::time::Duration;

use dagnats_leases_client::wire::change::ChangeKind;
use dagnats_leases_client::wire::names::{SUBJECT_ACQUIRE, SUBJECT_RENEW};
use dagnats_leases_testkit::nats::settle;
use tokio::time::sleep_until;

use crate::ctx::Ctx;
use crate::proxy::DelayProxy;
use crate::taps::{LEASE_SUBJECTS, Tap, change_subject};

pub async fn fence_is_null_from_the_deadline_when_the_gateway_stops_answering(ctx: &Ctx) {
    null_from_the_deadline(ctx, None).await;
}

pub async fn the_deadline_counts_from_the_start_of_the_granting_request_not_its_reply(ctx: &Ctx) {
    null_from_the_deadline(ctx, Some(ctx.spec.ms("reply_delay_ms"))).await;
}

/// A keeper owns a key on a gateway of the scenario's own, with what the
/// server sends the driver delayed by `reply_delay` if given; the gateway
/// is paused right after it answered a renewal; `fence()` must be null
/// from the bound of the deadline on.
async fn null_from_the_deadline(ctx: &Ctx, reply_delay: Option<Duration>) {
    let world = ctx.own_world().await;
    let proxy = match reply_delay {
        Some(_) => Some(DelayProxy::start(world.server.port).await),
        None => None,
    };
    let url = proxy
        .as_ref()
        .map_or(world.server.url.clone(), |p| p.url.clone());
    let d = ctx.driver(&url).await;
    let (key, holder) = (ctx.name("k"), ctx.name("a"));
    let ttl = ctx.spec.ms("ttl_ms");
    let requests = Tap::start(&world.client, LEASE_SUBJECTS).await;
    let changes = Tap::start(&world.client, &change_subject(&key)).await;
    // The gateway's replies, on their way to the driver's inbox.
    let replies = Tap::start(&world.client, "_INBOX.>").await;
    if let (Some(proxy), Some(delay)) = (&proxy, reply_delay) {
        proxy.delay(delay);
        ctx.note(format!(
            "the proxy now delays what the server sends the driver by {delay:?}"
        ));
    }
    d.keeper_start("k", &key, &holder, ttl, false).await;
    d.ownership_from(0, "k", true, ttl * 5).await;
    let (_, renewed) = changes.change_from(0, ChangeKind::Renewed, ttl * 2).await;
    // Paused once that renewal's reply has left the gateway: the keeper
    // gets it (late, through the proxy) and its next renew meets the pause.
    let granted = |msg: &async_nats::Message| {
        let body: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap_or_default();
        body["granted"] == true && body["key"] == key && body["revision"] == renewed.revision
    };
    let replied = replies.seen.first_from(0, ttl, granted).await;
    replied.unwrap_or_else(|| {
        panic!(
            "no reply to the renewal at {} within {ttl:?}",
            renewed.revision
        )
    });
    world.signal_gateway("STOP", &ctx.transcript);
    // Every write the gateway made before the pause, and its request, has
    // reached the runner.
    settle(&world.client).await;
    let writes = changes.changes();
    let (written_at, last) = writes.last().cloned().expect("a write was seen");
    // The request that made the last write: a renew at the fence before
    // it, or the acquire. Found by its body, not by when each tap noted
    // it; the last such copy seen bounds its start.
    let granting = match writes.len() {
        1 => requests.requests(SUBJECT_ACQUIRE, &key, Some(&holder)),
        n => {
            let before = writes[n - 2].1.revision;
            let renews = requests.requests(SUBJECT_RENEW, &key, Some(&holder));
            renews
                .into_iter()
                .filter(|(_, body)| body["revision"] == before)
                .collect()
        }
    };
    let granting = granting
        .into_iter()
        .map(|(at, _)| at)
        .max()
        .expect("the last write's request was seen");
    let deadline = granting + ttl;
    let t = &ctx.transcript;
    ctx.note(format!(
        "last write {} at revision {} seen at {:.3}s, its request at {:.3}s: deadline by {:.3}s",
        last.event.as_str(),
        last.revision,
        t.secs(written_at),
        t.secs(granting),
        t.secs(deadline)
    ));
    sleep_until(deadline + ctx.spec.ms("slack_ms")).await;
    let (fence, tenure) = d.keeper_state("k").await;
    assert_eq!(
        (fence, tenure),
        (None, None),
        "fence() and tenure() after the deadline"
    );
    let (lost_at, _) = d
        .ownership_from(0, "k", false, ctx.spec.ms("reported_within_ms"))
        .await;
    let late = lost_at.saturating_duration_since(deadline).as_secs_f64();
    let early = deadline.saturating_duration_since(lost_at).as_secs_f64();
    ctx.figure_ms(
        "loss reported after the deadline's bound",
        (late - early) * 1000.0,
    );
    world.signal_gateway("CONT", &ctx.transcript);
}
