//! One function per scenario of `scenarios.toml`, named exactly as the
//! file names it, and the checks several of them share.
//!
//! - `calls`: each `LeaseClient` call and the wire errors it can meet.
//! - `forward`: forward and its error kinds, naming the owner.
//! - `bounds`: out-of-bounds input refused with `invalid`, nothing sent.
//! - `client_kinds`: `unavailable`, `timeout`, `internal`.
//! - `refused`: `unsupported` and `forbidden`, as the gateway answers them.
//! - `keeper`: the renew cadence, loss at once, a paused holder.
//! - `deadline`: the loss deadline when the gateway stops answering.
//! - `takeover`: a waiting keeper taking over, and hand-off.
//! - `inbox`: the owner inbox's rejections and acceptance.
//! - `gate`: `FenceGate`.

mod bounds;
mod calls;
mod client_kinds;
mod deadline;
mod forward;
mod gate;
mod inbox;
mod keeper;
mod refused;
mod takeover;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::ctx::Ctx;
use crate::driver::DriverError;

pub struct Scenario {
    pub name: &'static str,
    pub run: fn(Arc<Ctx>) -> BoxFuture<'static, ()>,
}

/// The registry: each entry's name is its function's.
macro_rules! scenarios {
    ($($module:ident :: $name:ident),* $(,)?) => {
        pub const ALL: &[Scenario] = &[$(Scenario {
            name: stringify!($name),
            run: |ctx| Box::pin(async move { $module::$name(&ctx).await }),
        }),*];
    };
}

scenarios![
    calls::acquire_of_a_free_key_is_granted,
    calls::acquire_of_a_held_key_is_not_granted_and_names_the_holder,
    calls::acquire_by_the_holder_again_returns_the_same_lease,
    calls::renew_extends_the_lease_at_a_higher_fence_in_the_same_tenure,
    calls::renew_at_a_stale_fence_is_lost,
    calls::renew_by_another_holder_is_lost,
    calls::release_frees_the_key_at_a_higher_fence,
    calls::a_release_retried_gets_the_first_answer,
    calls::a_release_after_the_key_moved_on_is_lost,
    calls::owner_of_a_held_key_is_its_lease,
    calls::owner_of_a_free_key_is_not_held,
    calls::transfer_gives_the_other_holder_a_new_tenure_at_a_higher_fence,
    calls::transfer_at_a_stale_fence_is_lost,
    calls::transfer_of_a_free_key_is_lost,
    calls::list_pages_through_a_prefix_with_after_limit_and_next,
    forward::forward_reaches_the_owner_and_returns_its_reply,
    forward::forward_to_a_free_key_is_not_held,
    forward::forward_with_no_owner_inbox_is_owner_unavailable_naming_the_owner,
    forward::forward_to_an_owner_that_never_answers_is_owner_timeout_naming_the_owner,
    forward::forward_to_an_owner_that_rejects_is_owner_rejected_naming_the_owner,
    forward::forward_of_a_reply_too_large_is_reply_too_large_naming_the_owner,
    bounds::a_key_out_of_bounds_is_invalid_and_nothing_is_sent,
    bounds::a_holder_out_of_bounds_is_invalid_and_nothing_is_sent,
    bounds::a_ttl_out_of_bounds_or_not_whole_seconds_is_invalid_and_nothing_is_sent,
    bounds::revision_0_is_invalid_and_nothing_is_sent,
    bounds::a_forward_timeout_out_of_bounds_is_invalid_and_nothing_is_sent,
    bounds::a_list_limit_out_of_bounds_is_invalid_and_nothing_is_sent,
    bounds::a_transfer_to_the_holder_itself_is_invalid_and_nothing_is_sent,
    bounds::a_forward_too_large_for_max_payload_is_payload_too_large_and_nothing_is_sent,
    client_kinds::no_gateway_is_unavailable,
    client_kinds::no_reply_within_the_client_timeout_is_timeout,
    client_kinds::an_unreadable_reply_is_internal,
    client_kinds::a_corrupt_record_is_internal,
    refused::every_call_to_a_gateway_on_a_server_older_than_2_11_is_unsupported,
    refused::every_call_the_policy_refuses_is_forbidden_and_changes_nothing,
    keeper::the_keeper_renews_about_every_third_of_its_ttl,
    keeper::fence_is_null_at_once_when_a_renew_is_lost,
    keeper::a_paused_holder_reports_null_before_it_renews_again,
    keeper::a_hand_off_to_itself_or_to_an_invalid_holder_is_invalid_and_the_keeper_keeps_the_lease,
    deadline::fence_is_null_from_the_deadline_when_the_gateway_stops_answering,
    deadline::the_deadline_counts_from_the_start_of_the_granting_request_not_its_reply,
    takeover::a_waiting_keeper_takes_over_within_1s_of_a_release,
    takeover::a_waiting_keeper_takes_over_within_ttl_plus_1s_of_the_holder_being_killed,
    takeover::a_waiting_keeper_is_woken_by_change_events_not_polling,
    takeover::a_hand_off_gives_the_waiting_keeper_the_transferred_fence_with_no_free_moment,
    takeover::a_waiting_keepers_acquires_say_how_long_it_has_waited,
    inbox::the_inbox_rejects_a_key_it_does_not_own,
    inbox::the_inbox_rejects_a_missing_or_malformed_fence,
    inbox::the_inbox_rejects_a_fence_below_its_tenure,
    inbox::the_inbox_accepts_a_fence_at_or_above_its_tenure,
    gate::the_fence_gate_admits_equal_and_higher_fences_and_refuses_lower_ones,
];

/// One valid call of each method on `key` as `holder` (transfer: to
/// `other`), but for whatever the arguments themselves are.
pub fn every_call(key: &str, holder: &str, other: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "acquire",
            json!({"key": key, "holder": holder, "ttl_ms": 3000}),
        ),
        (
            "renew",
            json!({"key": key, "holder": holder, "revision": 5, "ttl_ms": 3000}),
        ),
        (
            "release",
            json!({"key": key, "holder": holder, "revision": 5}),
        ),
        ("owner", json!({"key": key})),
        (
            "transfer",
            json!({"key": key, "holder": holder, "revision": 5, "to": other, "ttl_ms": 3000}),
        ),
        ("list", json!({"prefix": key, "after": null, "limit": null})),
        (
            "forward",
            json!({"key": key, "payload_b64": "", "timeout_ms": 1000}),
        ),
    ]
}

/// The scenario named `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    ALL.iter().find(|s| s.name == name)
}

/// The fields every lease carries, times among them.
const TIMES: [&str; 2] = ["acquired_at", "expires_at"];

/// `answer` is `wire` (a lease as the gateway sent it, read by the runner)
/// field for field, with `granted` besides when given, and nothing else;
/// times are compared as instants.
pub fn assert_lease(answer: &Value, wire: &Value, granted: Option<bool>) {
    let mut expected = wire.as_object().expect("a lease object").clone();
    if let Some(granted) = granted {
        expected.insert("granted".into(), granted.into());
    }
    let got = answer
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {answer}"));
    let names = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(got),
        names(&expected),
        "fields of {answer}, against the wire's {wire}"
    );
    for (name, want) in &expected {
        if TIMES.contains(&name.as_str()) {
            assert_eq!(
                instant(&got[name]),
                instant(want),
                "{name} of {answer} against {wire}"
            );
        } else {
            assert_eq!(&got[name], want, "{name} of {answer} against {wire}");
        }
    }
}

/// An RFC 3339 time of a lease.
pub fn instant(value: &Value) -> OffsetDateTime {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("a time is a string: {value}"));
    OffsetDateTime::parse(text, &Rfc3339)
        .unwrap_or_else(|err| panic!("not RFC 3339: {text}: {err}"))
}

/// A failure that names no owner: `holder` and `revision` null.
pub fn assert_names_no_owner(err: &DriverError) {
    assert_eq!((&err.holder, err.revision), (&None, None), "{err:?}");
}

/// A forward failure naming the owner last tried.
pub fn assert_names_owner(err: &DriverError, holder: &str, revision: u64) {
    assert_eq!(
        (err.holder.as_deref(), err.revision),
        (Some(holder), Some(revision)),
        "{err:?}"
    );
}

/// The lease's revision, from an answer or a wire reply.
pub fn revision(lease: &Value) -> u64 {
    lease["revision"]
        .as_u64()
        .unwrap_or_else(|| panic!("no revision in {lease}"))
}
