//! Requests that many may answer, as `nats micro` sends them: one publish
//! with an inbox as reply subject, every reply collected until a deadline.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

/// How long replies are collected: far above a loopback round trip, so a
/// gateway that would answer has answered.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Every reply to one request on `subject` within [`WINDOW`] (the server's
/// "no responders" notice is not a reply).
pub async fn collect(
    client: &async_nats::Client,
    subject: &str,
    body: &[u8],
) -> Vec<async_nats::Message> {
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_vec().into())
        .await
        .unwrap();
    client.flush().await.unwrap();
    let deadline = tokio::time::Instant::now() + WINDOW;
    let mut got = Vec::new();
    while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, replies.next()).await {
        if msg.status != Some(async_nats::StatusCode::NO_RESPONDERS) {
            got.push(msg);
        }
    }
    got
}

/// Every reply to `subject` within [`WINDOW`], as JSON.
pub async fn collect_json(client: &async_nats::Client, subject: &str) -> Vec<Value> {
    collect(client, subject, b"")
        .await
        .iter()
        .map(|msg| serde_json::from_slice(&msg.payload).expect("a discovery reply is JSON"))
        .collect()
}

/// The one reply to `subject` (a request to one instance).
pub async fn only_json(client: &async_nats::Client, subject: &str) -> Value {
    let mut replies = collect_json(client, subject).await;
    assert_eq!(replies.len(), 1, "one reply to {subject}: {replies:?}");
    replies.remove(0)
}
