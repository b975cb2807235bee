//! Each `LeaseClient` call against the shared gateway: its reply under the
//! wire's names and values, and the `lost` answers of the fenced calls.

use serde_json::{Value, json};

use super::{assert_lease, assert_names_no_owner, revision};
use crate::ctx::Ctx;
use crate::driver::Driver;
use crate::world::World;

fn ttl(ctx: &Ctx) -> u64 {
    ctx.spec.u64("ttl_ms")
}

async fn acquire(d: &Driver, key: &str, holder: &str, ttl_ms: u64) -> Value {
    d.call_ok(
        "acquire",
        json!({"key": key, "holder": holder, "ttl_ms": ttl_ms}),
    )
    .await
}

async fn renew(d: &Driver, key: &str, holder: &str, revision: u64, ttl_ms: u64) -> Value {
    let args = json!({"key": key, "holder": holder, "revision": revision, "ttl_ms": ttl_ms});
    d.call_ok("renew", args).await
}

/// The runner's own owner read.
async fn owner(world: &World, key: &str) -> Value {
    world.call("owner", json!({"key": key})).await
}

pub async fn acquire_of_a_free_key_is_granted(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let grant = acquire(&d, &key, &a, ttl(ctx)).await;
    let wire = owner(&world, &key).await;
    assert_eq!(
        (&wire["holder"], &wire["ttl_ms"]),
        (&json!(a), &json!(ttl(ctx))),
        "{wire}"
    );
    assert_lease(&grant, &wire, Some(true));
}

pub async fn acquire_of_a_held_key_is_not_granted_and_names_the_holder(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let held = world
        .call(
            "acquire",
            json!({"key": key, "holder": a, "ttl_ms": ttl(ctx)}),
        )
        .await;
    assert_eq!(held["granted"], true, "{held}");
    let refused = acquire(&d, &key, &b, ttl(ctx)).await;
    assert_lease(&refused, &owner(&world, &key).await, Some(false));
    assert_eq!(refused["holder"], json!(a));
}

pub async fn acquire_by_the_holder_again_returns_the_same_lease(ctx: &Ctx) {
    let (_world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let first = acquire(&d, &key, &a, ttl(ctx)).await;
    let again = acquire(&d, &key, &a, ttl(ctx)).await;
    // The same revision and the same expiry: acquire does not extend.
    assert_lease(&again, &first, None);
}

pub async fn renew_extends_the_lease_at_a_higher_fence_in_the_same_tenure(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let grant = acquire(&d, &key, &a, ttl(ctx)).await;
    let renewed = renew(&d, &key, &a, revision(&grant), ttl(ctx)).await;
    assert_lease(&renewed, &owner(&world, &key).await, Some(true));
    assert!(
        revision(&renewed) > revision(&grant),
        "{renewed} after {grant}"
    );
    assert_eq!(
        super::instant(&renewed["acquired_at"]),
        super::instant(&grant["acquired_at"])
    );
    assert!(super::instant(&renewed["expires_at"]) >= super::instant(&grant["expires_at"]));
}

pub async fn renew_at_a_stale_fence_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let first = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    // Two renewals: a renew at the first fence is then no retry of the
    // one that replaced it.
    let second = revision(&renew(&d, &key, &a, first, ttl(ctx)).await);
    let third = revision(&renew(&d, &key, &a, second, ttl(ctx)).await);
    let args = json!({"key": key, "holder": a, "revision": first, "ttl_ms": ttl(ctx)});
    let err = d.call_fails("renew", args, "lost").await;
    assert_names_no_owner(&err);
    assert_eq!(
        revision(&owner(&world, &key).await),
        third,
        "a lost renew writes nothing"
    );
}

pub async fn renew_by_another_holder_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let fence = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    let args = json!({"key": key, "holder": b, "revision": fence, "ttl_ms": ttl(ctx)});
    let err = d.call_fails("renew", args, "lost").await;
    assert_names_no_owner(&err);
    assert_eq!(owner(&world, &key).await["holder"], json!(a));
}

pub async fn release_frees_the_key_at_a_higher_fence(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let fence = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    let released = d
        .call_ok(
            "release",
            json!({"key": key, "holder": a, "revision": fence}),
        )
        .await;
    let at = revision(&released);
    assert!(
        at > fence,
        "the release writes at a higher fence: {released}"
    );
    let expected =
        json!({"released": true, "held": false, "key": key, "holder": a, "revision": at});
    assert_eq!(released, expected);
    assert_eq!(
        owner(&world, &key).await,
        json!({"held": false, "key": key})
    );
}

pub async fn a_release_retried_gets_the_first_answer(ctx: &Ctx) {
    let (_world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    let fence = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    let args = json!({"key": key, "holder": a, "revision": fence});
    let first = d.call_ok("release", args.clone()).await;
    let retried = d.call_ok("release", args).await;
    assert_eq!(retried, first);
}

pub async fn a_release_after_the_key_moved_on_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let fence = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    let args = json!({"key": key, "holder": a, "revision": fence});
    d.call_ok("release", args.clone()).await;
    let taken = world
        .call(
            "acquire",
            json!({"key": key, "holder": b, "ttl_ms": ttl(ctx)}),
        )
        .await;
    assert_eq!(taken["granted"], true, "{taken}");
    let err = d.call_fails("release", args, "lost").await;
    assert_names_no_owner(&err);
    assert_eq!(owner(&world, &key).await["holder"], json!(b));
}

pub async fn owner_of_a_held_key_is_its_lease(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a) = (ctx.name("k"), ctx.name("a"));
    world
        .call(
            "acquire",
            json!({"key": key, "holder": a, "ttl_ms": ttl(ctx)}),
        )
        .await;
    let held = d.call_ok("owner", json!({"key": key})).await;
    assert_lease(&held, &owner(&world, &key).await, None);
    assert_eq!(held["held"], true);
}

pub async fn owner_of_a_free_key_is_not_held(ctx: &Ctx) {
    let (_world, d) = ctx.on_shared_world().await;
    let key = ctx.name("k");
    let free = d.call_ok("owner", json!({"key": key})).await;
    assert_eq!(free, json!({"held": false, "key": key}));
}

pub async fn transfer_gives_the_other_holder_a_new_tenure_at_a_higher_fence(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let grant = acquire(&d, &key, &a, ttl(ctx)).await;
    let args =
        json!({"key": key, "holder": a, "revision": revision(&grant), "to": b, "ttl_ms": ttl(ctx)});
    let moved = d.call_ok("transfer", args).await;
    assert_lease(&moved, &owner(&world, &key).await, Some(true));
    assert_eq!(moved["holder"], json!(b));
    assert!(revision(&moved) > revision(&grant), "{moved} after {grant}");
    assert!(super::instant(&moved["acquired_at"]) >= super::instant(&grant["acquired_at"]));
}

pub async fn transfer_at_a_stale_fence_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let first = revision(&acquire(&d, &key, &a, ttl(ctx)).await);
    let second = revision(&renew(&d, &key, &a, first, ttl(ctx)).await);
    revision(&renew(&d, &key, &a, second, ttl(ctx)).await);
    let args = json!({"key": key, "holder": a, "revision": first, "to": b, "ttl_ms": ttl(ctx)});
    let err = d.call_fails("transfer", args, "lost").await;
    assert_names_no_owner(&err);
    assert_eq!(owner(&world, &key).await["holder"], json!(a));
}

pub async fn transfer_of_a_free_key_is_lost(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    let args = json!({"key": key, "holder": a, "revision": 1, "to": b, "ttl_ms": ttl(ctx)});
    let err = d.call_fails("transfer", args, "lost").await;
    assert_names_no_owner(&err);
    assert_eq!(
        owner(&world, &key).await,
        json!({"held": false, "key": key})
    );
}

pub async fn list_pages_through_a_prefix_with_after_limit_and_next(ctx: &Ctx) {
    let (world, d) = ctx.on_shared_world().await;
    let prefix = ctx.name("list-");
    let count = ctx.spec.u64("leases") as usize;
    let keys: Vec<String> = (0..count).map(|i| format!("{prefix}{i:02}")).collect();
    // Shares the prefix but for its last character: never listed.
    let outside = ctx.name("listx");
    let holder = ctx.name("h");
    for key in keys.iter().chain([&outside]) {
        world
            .call(
                "acquire",
                json!({"key": key, "holder": holder, "ttl_ms": ttl(ctx)}),
            )
            .await;
    }
    let mut wire = Vec::new();
    for key in &keys {
        wire.push(owner(&world, key).await);
    }
    let limit = ctx.spec.u64("limit") as usize;
    assert!(
        count > limit,
        "scenarios.toml: more leases than one page holds"
    );
    let mut after: Option<String> = None;
    for start in (0..count).step_by(limit) {
        let end = (start + limit).min(count);
        let next = (end < count).then(|| keys[end - 1].clone());
        let page = d
            .call_ok(
                "list",
                json!({"prefix": prefix, "after": after, "limit": limit}),
            )
            .await;
        assert_page(&page, &wire[start..end], next.as_ref());
        after = next;
    }
    let all = d
        .call_ok(
            "list",
            json!({"prefix": prefix, "after": null, "limit": null}),
        )
        .await;
    assert_page(&all, &wire, None);
}

/// A list answer of exactly `leases` (as the wire's owner reads show
/// them), ending with `next`.
fn assert_page(page: &Value, leases: &[Value], next: Option<&String>) {
    let fields: Vec<&String> = page.as_object().expect("an object").keys().collect();
    assert_eq!(fields, ["leases", "next"], "{page}");
    let got = page["leases"]
        .as_array()
        .unwrap_or_else(|| panic!("leases is a list: {page}"));
    assert_eq!(got.len(), leases.len(), "{page}");
    for (got, wire) in got.iter().zip(leases) {
        assert_lease(got, wire, None);
    }
    assert_eq!(page["next"], json!(next), "{page}");
}
