//! Forward's retry rule over the in-memory fakes (`core/fakes.rs`): re-send
//! only after an outcome that proves the owner did not process the
//! request, re-reading the lease first; at most 3 attempts; a timeout never
//! retried. Each rule also has its test against a real nats-server in
//! `crates/gateway/tests/forward.rs`.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;
use time::OffsetDateTime;

use super::{MAX_ATTEMPTS, times};
use crate::core::fakes::{self, FAKE_OVERHEAD, FakeHop, FakeRecords, Sent, request};
use crate::core::ports::HopOutcome;
use crate::core::{ForwardError, LeaseCore};
use dagnats_leases_wire::kind::Kind;
use dagnats_leases_wire::reply::Forwarded;
use dagnats_leases_wire::request::{ForwardRequest, Payload};

const MAX_PAYLOAD: usize = 1_000;

/// A core whose key `k` is held by `a` at revision 1.
fn held() -> (LeaseCore, Arc<FakeRecords>, Arc<FakeHop>) {
    let (core, records, hop) = fakes::core(MAX_PAYLOAD);
    records.hold("k", "a", 10_000, OffsetDateTime::now_utc());
    (core, records, hop)
}

fn forward_request(payload: &[u8]) -> ForwardRequest {
    let mut req: ForwardRequest = request(json!({"key": "k", "payload": ""}));
    req.payload = Payload(Bytes::copy_from_slice(payload));
    req
}

async fn forward(core: &LeaseCore, payload: &[u8]) -> Result<Forwarded, ForwardError> {
    core.forward(forward_request(payload)).await
}

fn sent(holder: &str, fence: u64, payload: &[u8]) -> Sent {
    Sent {
        holder: holder.into(),
        principal: None,
        key: "k".into(),
        fence,
        payload: Bytes::copy_from_slice(payload),
    }
}

/// The error's kind and the owner it names as last tried.
fn failed(result: Result<Forwarded, ForwardError>) -> (Kind, Option<(String, u64)>) {
    let err = result.expect_err("the forward fails");
    let tried = err.tried.map(|t| (t.holder, t.revision));
    (err.error.kind(), tried)
}

fn tried(holder: &str, revision: u64) -> Option<(String, u64)> {
    Some((holder.to_string(), revision))
}

#[test]
fn an_attempt_count_reads_as_english() {
    assert_eq!(times(1), "once");
    assert_eq!(times(2), "2 times");
    assert_eq!(times(3), "3 times");
}

#[tokio::test]
async fn forward_delivers_the_payload_fenced_and_returns_the_owners_reply() {
    let (core, _, hop) = held();
    hop.answer([HopOutcome::Replied(Bytes::from_static(b"pong"))]);
    let reply = forward(&core, b"ping").await.unwrap();
    assert_eq!(reply.key, "k");
    assert_eq!(reply.holder, "a");
    assert_eq!(reply.revision, 1);
    assert_eq!(reply.payload, Payload(Bytes::from_static(b"pong")));
    assert_eq!(hop.sent(), vec![sent("a", 1, b"ping")]);
}

#[tokio::test]
async fn forward_to_a_free_key_is_not_held_and_sends_nothing() {
    let (core, records, hop) = fakes::core(MAX_PAYLOAD);
    assert_eq!(failed(forward(&core, b"x").await), (Kind::NotHeld, None));
    records.hold("k", "a", 10_000, OffsetDateTime::now_utc());
    records.expire("k");
    assert_eq!(failed(forward(&core, b"x").await), (Kind::NotHeld, None));
    assert!(hop.sent().is_empty());
}

#[tokio::test]
async fn no_responders_is_retried_at_most_3_attempts_then_owner_unavailable() {
    let (core, _, hop) = held();
    hop.answer(std::iter::repeat_n(HopOutcome::NoResponders, 4));
    let err = forward(&core, b"x").await.unwrap_err();
    assert_eq!(err.error.kind(), Kind::OwnerUnavailable);
    assert_eq!(
        err.error.to_string(),
        "no process listens on the owner's inbox (tried 3 times)"
    );
    assert_eq!(err.tried.map(|t| (t.holder, t.revision)), tried("a", 1));
    assert_eq!(hop.sent().len(), MAX_ATTEMPTS as usize);
}

#[tokio::test]
async fn every_attempt_rejected_as_stale_is_owner_rejected() {
    let (core, _, hop) = held();
    hop.answer([
        HopOutcome::Rejected,
        HopOutcome::Rejected,
        HopOutcome::Rejected,
    ]);
    let err = forward(&core, b"x").await.unwrap_err();
    assert_eq!(err.error.kind(), Kind::OwnerRejected);
    assert_eq!(
        err.error.to_string(),
        "the owner rejected the request as stale (tried 3 times)"
    );
    assert_eq!(hop.sent().len(), 3);
}

#[tokio::test]
async fn a_retry_rereads_the_lease_and_follows_a_new_owner() {
    let (core, records, hop) = held();
    let moved = records.clone();
    hop.then(move || {
        moved.expire("k");
        moved.hold("k", "b", 10_000, OffsetDateTime::now_utc());
        HopOutcome::Rejected
    });
    hop.answer([HopOutcome::Replied(Bytes::from_static(b"ok"))]);
    let reply = forward(&core, b"x").await.unwrap();
    assert_eq!((reply.holder.as_str(), reply.revision), ("b", 3));
    assert_eq!(hop.sent(), vec![sent("a", 1, b"x"), sent("b", 3, b"x")]);
}

#[tokio::test]
async fn a_key_freed_between_attempts_is_not_held_naming_the_owner_tried() {
    let (core, records, hop) = held();
    let freed = records.clone();
    hop.then(move || {
        freed.expire("k");
        HopOutcome::NoResponders
    });
    assert_eq!(
        failed(forward(&core, b"x").await),
        (Kind::NotHeld, tried("a", 1))
    );
    assert_eq!(hop.sent().len(), 1);
}

#[tokio::test]
async fn a_timeout_is_never_retried() {
    let (core, _, hop) = held();
    hop.answer([HopOutcome::TimedOut, HopOutcome::Replied(Bytes::new())]);
    assert_eq!(
        failed(forward(&core, b"x").await),
        (Kind::OwnerTimeout, tried("a", 1))
    );
    assert_eq!(hop.sent().len(), 1);
}

#[tokio::test]
async fn a_send_that_fails_is_unavailable_and_not_retried() {
    let (core, _, hop) = held();
    hop.answer([
        HopOutcome::Failed("disconnected".into()),
        HopOutcome::Replied(Bytes::new()),
    ]);
    assert_eq!(
        failed(forward(&core, b"x").await),
        (Kind::Unavailable, tried("a", 1))
    );
    assert_eq!(hop.sent().len(), 1);
}

#[tokio::test]
async fn a_payload_that_does_not_fit_max_payload_is_payload_too_large_and_not_sent() {
    let (core, _, hop) = held();
    let too_large = vec![7; MAX_PAYLOAD - FAKE_OVERHEAD + 1];
    assert_eq!(
        failed(forward(&core, &too_large).await),
        (Kind::PayloadTooLarge, tried("a", 1))
    );
    assert!(hop.sent().is_empty());
    // One byte less fits exactly.
    hop.answer([HopOutcome::Replied(Bytes::new())]);
    forward(&core, &too_large[1..]).await.unwrap();
    assert_eq!(hop.sent().len(), 1);
}

#[tokio::test]
async fn a_reply_that_does_not_fit_once_base64_encoded_is_reply_too_large() {
    let (core, _, hop) = held();
    // 800 bytes are 1068 in base64: over max_payload, though the raw reply fits.
    let reply = Bytes::from(vec![1; 800]);
    hop.answer([
        HopOutcome::Replied(reply.clone()),
        HopOutcome::Replied(reply.clone()),
    ]);
    assert_eq!(
        failed(forward(&core, b"x").await),
        (Kind::ReplyTooLarge, tried("a", 1))
    );
    assert_eq!(hop.sent().len(), 1);
    // A caller that takes raw bytes gets it.
    let raw = core.forward_raw(forward_request(b"x")).await.unwrap();
    assert_eq!(raw.payload, Payload(reply));
}
