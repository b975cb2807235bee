//! The kinds a gateway answers a call it may not serve with: `unsupported`
//! on a nats-server too old for the bucket, `forbidden` when its policy
//! refuses the caller (docs/protocol.md, Error kinds and Authorization).
//! The library raises each as the gateway sent it.

use serde_json::json;

use super::{assert_names_no_owner, every_call};
use crate::ctx::Ctx;
use crate::world::World;

pub async fn every_call_to_a_gateway_on_a_server_older_than_2_11_is_unsupported(ctx: &Ctx) {
    let world = World::on_an_older_server().await;
    let d = ctx.driver(&world.server.url).await;
    for (method, args) in every_call(&ctx.name("k"), &ctx.name("a"), &ctx.name("b")) {
        let err = d.call_fails(method, args, "unsupported").await;
        assert_names_no_owner(&err);
    }
}

pub async fn every_call_the_policy_refuses_is_forbidden_and_changes_nothing(ctx: &Ctx) {
    // The driver connects with no Nats-Request-Info: the `local` principal,
    // which may only read.
    let policy =
        "[[principal]]\nname = \"reader\"\nlocal = true\nprefixes = [\"\"]\nrights = [\"read\"]\n";
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, policy).expect("the policy is written");
    let world = World::start_with(&["--policy", path.to_str().unwrap()]).await;
    let d = ctx.driver(&world.server.url).await;
    let (key, a, b) = (ctx.name("k"), ctx.name("a"), ctx.name("b"));
    for (method, args) in every_call(&key, &a, &b) {
        if matches!(method, "owner" | "list") {
            continue;
        }
        let err = d.call_fails(method, args, "forbidden").await;
        assert_names_no_owner(&err);
    }
    let free = json!({"held": false, "key": key});
    assert_eq!(d.call_ok("owner", json!({"key": key})).await, free);
    let list = json!({"prefix": key, "after": null, "limit": null});
    let listed = d.call_ok("list", list).await;
    assert_eq!(listed["leases"], json!([]), "{listed}");
    assert_eq!(world.call("owner", json!({"key": key})).await, free);
}
