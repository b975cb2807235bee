//! The runner's own subscriptions: what reaches the lease subjects and the
//! change events, seen from outside the library under test.

use std::sync::Arc;
use std::time::Duration;

use async_nats::Message;
use bytes::Bytes;
use dagnats_leases_client::changes;
use dagnats_leases_client::wire::change::{ChangeEvent, ChangeKind};
use futures::StreamExt;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::recorder::Recorder;

/// Every lease subject (`api.leases.*`).
pub const LEASE_SUBJECTS: &str = "api.leases.>";

/// A subscription whose messages are recorded as they arrive, optionally
/// answering some of them. Unsubscribed on drop.
pub struct Tap {
    pub seen: Arc<Recorder<Message>>,
    task: JoinHandle<()>,
}

impl Tap {
    /// Records what reaches `subject`; registered with the server when
    /// this returns.
    pub async fn start(client: &async_nats::Client, subject: &str) -> Tap {
        Tap::answering(client, subject, |_| None).await
    }

    /// [`start`](Self::start), replying `answer(msg)` to each request for
    /// which it is `Some`.
    pub async fn answering(
        client: &async_nats::Client,
        subject: &str,
        answer: impl Fn(&Message) -> Option<Bytes> + Send + 'static,
    ) -> Tap {
        let mut sub = client.subscribe(subject.to_string()).await.unwrap();
        dagnats_leases_testkit::nats::settle(client).await;
        let seen = Arc::<Recorder<Message>>::default();
        let (record, client) = (seen.clone(), client.clone());
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                record.push(msg.clone());
                if let (Some(reply), Some(body)) = (msg.reply.clone(), answer(&msg)) {
                    let _ = client.publish(reply, body).await;
                }
            }
        });
        Tap { seen, task }
    }

    /// The change events seen (a tap on `dagnats.lease.changed.<key>`).
    pub fn changes(&self) -> Vec<(Instant, ChangeEvent)> {
        let all = self.seen.all().into_iter();
        all.filter_map(|(at, msg)| Some((at, changes::from_message(&msg)?)))
            .collect()
    }

    /// The first change event of `kind` from position `from` on, within
    /// `within`.
    pub async fn change_from(
        &self,
        from: usize,
        kind: ChangeKind,
        within: Duration,
    ) -> (Instant, ChangeEvent) {
        let (at, msg) = self
            .seen
            .first_from(from, within, |msg| {
                changes::from_message(msg).is_some_and(|change| change.event == kind)
            })
            .await
            .unwrap_or_else(|| panic!("runner: no {kind:?} change event within {within:?}"));
        (at, changes::from_message(&msg).unwrap())
    }

    /// The requests seen on `subject` whose JSON body has `key` and,
    /// when given, `holder`: when each arrived, and its body.
    pub fn requests(
        &self,
        subject: &str,
        key: &str,
        holder: Option<&str>,
    ) -> Vec<(Instant, Value)> {
        self.seen
            .all()
            .into_iter()
            .filter(|(_, msg)| msg.subject.as_str() == subject)
            .filter_map(|(at, msg)| Some((at, serde_json::from_slice::<Value>(&msg.payload).ok()?)))
            .filter(|(_, body)| body["key"] == key && holder.is_none_or(|h| body["holder"] == h))
            .collect()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a key's change events are published.
pub fn change_subject(key: &str) -> String {
    ChangeEvent::subject(Some(key))
}
