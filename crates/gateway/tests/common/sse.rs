//! Reading `GET /v1/events` as a browser's EventSource would.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use serde_json::Value;

use super::Http;

/// An open event stream.
pub type Events = Pin<Box<dyn Stream<Item = eventsource_stream::Event> + Send>>;

/// An open event stream; returns once the gateway has answered, which is
/// after it subscribed the client to the change feed.
pub async fn open(http: &Http, path: &str, last_event_id: Option<u64>) -> Events {
    let mut req = http.request(reqwest::Method::GET, path);
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    Box::pin(
        resp.bytes_stream()
            .eventsource()
            .map(|e| e.expect("a well-formed event")),
    )
}

/// The next event: name, id, data.
pub async fn next(events: &mut Events) -> (String, u64, Value) {
    let event = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open");
    let data = serde_json::from_str(&event.data).expect("data is JSON");
    (
        event.event,
        event.id.parse().expect("id is a revision"),
        data,
    )
}
