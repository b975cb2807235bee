//! `FenceGate`: a write at a fence below the highest admitted is refused
//! with `stale_fence`; equal and higher ones are admitted. One gate's
//! fences never touch another's.

use serde_json::json;

use crate::ctx::Ctx;

pub async fn the_fence_gate_admits_equal_and_higher_fences_and_refuses_lower_ones(ctx: &Ctx) {
    let bare = ctx.bare().await;
    let d = ctx.driver(&bare.server.url).await;
    let fences = ctx.spec.u64s("fences");
    let admitted = ctx.spec.bools("admitted");
    assert_eq!(
        fences.len(),
        admitted.len(),
        "scenarios.toml: one outcome per fence"
    );
    for (fence, admitted) in fences.into_iter().zip(admitted) {
        let answer = d
            .request(json!({"op": "gate.admit", "gate": "g1", "fence": fence}))
            .await;
        match (answer, admitted) {
            (Ok(ok), true) => assert_eq!(ok, json!({}), "fence {fence}"),
            (Err(err), false) => assert_eq!(err.kind, "stale_fence", "fence {fence}: {err:?}"),
            (answer, _) => panic!("fence {fence}: {answer:?}, expected admitted: {admitted}"),
        }
    }
    let fresh = ctx.spec.u64("other_gate_fence");
    let other = d
        .request(json!({"op": "gate.admit", "gate": "g2", "fence": fresh}))
        .await;
    assert_eq!(
        other.ok(),
        Some(json!({})),
        "a new gate admits fence {fresh}"
    );
}
