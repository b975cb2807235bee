//! The one caller of JetStream, for the bucket and the tenure history
//! alike: every `$JS.API.*` request, direct get and consumer pull, and
//! every publish whose acknowledgement JetStream sends, each bounded by
//! one of the timeouts below. It reports what came back in JetStream's own
//! terms ([`Failure`], [`ApiError`], [`code`]); what that means to the
//! core is decided in `bucket.rs` (its `StoreError`), and to the history
//! in `history/`.
//!
//! What "no responders" means depends on the subject (no JetStream, no
//! stream leader, no stream capturing a key), so it is reported as such and
//! the caller decides.

use std::time::Duration;

use async_nats::connection::State;
use async_nats::{Client, HeaderMap, Message, Request, RequestErrorKind, Subject, ToSubject};
use bytes::Bytes;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

/// How long one JetStream request may take before the call answers
/// `unavailable`; below a client's usual 5 s request timeout, so callers
/// hear why rather than time out.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(4);

/// How long a look at the stream for the cluster view (`/v1/cluster`,
/// `/readyz`, `/metrics`) may take: a probe hears of a stream without a
/// leader sooner than a call would.
const VIEW_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a consumer's inbox waits for the next message. The server
/// answers every pull by its expiry, at most [`TIMEOUT`]; this bounds only
/// a pull whose answers were lost with the connection.
const PULL_TIMEOUT: Duration = Duration::from_secs(TIMEOUT.as_secs() * 2);

/// JetStream error codes (`err_code`) the store gives a meaning to.
pub(crate) mod code {
    /// A publish's expected last sequence was not the subject's.
    pub(crate) const WRONG_LAST_SEQUENCE: u64 = 10071;
    /// The same refusal from a replicated stream while an earlier write to
    /// the key is still in flight: the write did not land.
    pub(crate) const WRONG_LAST_SEQUENCE_IN_FLIGHT: u64 = 10164;
    /// `STREAM.MSG.GET` found no message on the subject.
    pub(crate) const NO_MESSAGE_FOUND: u64 = 10037;
    /// `STREAM.CREATE` of a stream that exists.
    pub(crate) const STREAM_NAME_IN_USE: u64 = 10058;
    /// The stream does not exist.
    pub(crate) const STREAM_NOT_FOUND: u64 = 10059;
    /// The JetStream cluster has no meta leader now: nothing was made.
    pub(crate) const CLUSTER_NOT_AVAILABLE: u64 = 10008;
    /// The consumer does not exist.
    pub(crate) const CONSUMER_NOT_FOUND: u64 = 10014;
}

/// What JetStream said it failed at, from a reply's `error` field.
#[derive(Debug, Deserialize)]
pub(crate) struct ApiError {
    #[serde(default)]
    pub(crate) code: u64,
    #[serde(default)]
    pub(crate) err_code: u64,
    #[serde(default)]
    pub(crate) description: String,
}

/// The `error` a JetStream API reply carries, if any.
pub(crate) fn api_error(reply: &Value) -> Option<ApiError> {
    let error = reply.get("error")?;
    Some(ApiError::deserialize(error).unwrap_or(ApiError {
        code: 0,
        err_code: 0,
        description: error.to_string(),
    }))
}

/// A request that got no usable answer.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// Nothing listens on the subject.
    NoResponders,
    /// Not connected, timed out, or the request failed; why.
    Failed(String),
    /// A publish that waited to be sent past its send-by: never sent.
    TooLate,
    /// An answer in a form JetStream does not give; what it was.
    Unexpected(String),
}

impl Failure {
    /// No answer to `what` within [`TIMEOUT`].
    pub(super) fn timed_out(what: &str) -> Self {
        Failure::timed_out_after(what, TIMEOUT)
    }

    fn timed_out_after(what: &str, within: Duration) -> Self {
        Failure::Failed(format!(
            "JetStream did not answer {what} within {} ms",
            within.as_millis()
        ))
    }
}

/// What a request to `subject` asks, for a sentence: the API call (such
/// as `STREAM.MSG.GET`), or a publish.
fn asked(subject: &str) -> &str {
    match subject.strip_prefix("$JS.API.") {
        Some(op) => op.rsplit_once('.').map_or(op, |(call, _stream)| call),
        None => "a publish",
    }
}

/// The JetStream requester; cheap to clone.
#[derive(Clone)]
pub(crate) struct JetStream {
    client: Client,
}

impl JetStream {
    pub(crate) fn new(client: Client) -> Self {
        JetStream { client }
    }

    /// One request to `subject` and its reply body, within [`TIMEOUT`].
    pub(crate) async fn request(
        &self,
        subject: impl ToSubject,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Bytes, Failure> {
        self.request_within(subject.to_subject(), headers, body, TIMEOUT)
            .await
    }

    async fn request_within(
        &self,
        subject: Subject,
        headers: HeaderMap,
        body: Bytes,
        within: Duration,
    ) -> Result<Bytes, Failure> {
        if self.client.connection_state() != State::Connected {
            return Err(Failure::Failed("not connected to NATS".into()));
        }
        // Bounded here, enqueueing included, and so not by the client's
        // own request timeout too: a second timer per request costs the
        // hot path.
        let request = Request::new().headers(headers).payload(body).timeout(None);
        let call = self.client.send_request(subject.clone(), request);
        match tokio::time::timeout(within, call).await {
            Err(_) => Err(Failure::timed_out_after(asked(&subject), within)),
            Ok(Err(err)) => Err(match err.kind() {
                RequestErrorKind::NoResponders => Failure::NoResponders,
                _ => Failure::Failed(format!("NATS request: {err}")),
            }),
            Ok(Ok(msg)) => Ok(msg.payload),
        }
    }

    /// Publishes `messages` in order without asking for replies, then
    /// `last` as a request, and returns its reply body, within [`TIMEOUT`]:
    /// an atomic batch whose commit message is `last`. One connection
    /// keeps their order, so the server sees the batch as sent.
    pub(super) async fn publish_then_request(
        &self,
        messages: Vec<(Subject, HeaderMap, Bytes)>,
        last: (Subject, HeaderMap, Bytes),
    ) -> Result<Bytes, Failure> {
        for (subject, headers, body) in messages {
            self.client
                .publish_with_headers(subject, headers, body)
                .await
                .map_err(|err| Failure::Failed(format!("NATS publish: {err}")))?;
        }
        let (subject, headers, body) = last;
        self.request(subject, headers, body).await
    }

    /// `$JS.API.<op>` with a JSON body, and its JSON reply (which may carry
    /// an `error`), within [`TIMEOUT`]; `Err` says why there was no reply.
    pub(crate) async fn api(&self, op: &str, body: &Value) -> Result<Value, String> {
        self.api_within(op, body, TIMEOUT).await
    }

    /// [`JetStream::api`] for the cluster view, within [`VIEW_TIMEOUT`].
    pub(super) async fn view(&self, op: &str) -> Result<Value, String> {
        self.api_within(op, &Value::Object(Default::default()), VIEW_TIMEOUT)
            .await
    }

    async fn api_within(&self, op: &str, body: &Value, within: Duration) -> Result<Value, String> {
        let payload = serde_json::to_vec(body).expect("JSON serializes");
        let reply = self
            .request_within(api_subject(op), HeaderMap::new(), payload.into(), within)
            .await
            .map_err(|failure| match failure {
                Failure::NoResponders => NO_JETSTREAM.to_string(),
                Failure::Failed(reason) | Failure::Unexpected(reason) => reason,
                Failure::TooLate => "not sent in time".to_string(),
            })?;
        serde_json::from_slice(&reply).map_err(|err| format!("JetStream reply: {err}"))
    }

    /// A batched or multi-subject direct get (ADR-31, nats-server 2.11+)
    /// from `stream`: the messages it answers with, in order, up to its
    /// end of batch, within [`TIMEOUT`]; none when nothing matches.
    pub(crate) async fn direct_batch(&self, stream: &str, body: &Value) -> Result<Batch, Failure> {
        if self.client.connection_state() != State::Connected {
            return Err(Failure::Failed("not connected to NATS".into()));
        }
        let inbox = self.client.new_inbox();
        let mut replies = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|err| Failure::Failed(format!("NATS subscribe: {err}")))?;
        let subject = api_subject(&format!("DIRECT.GET.{stream}"));
        let payload = Bytes::from(serde_json::to_vec(body).expect("JSON serializes"));
        self.client
            .publish_with_reply(subject, inbox, payload)
            .await
            .map_err(|err| Failure::Failed(format!("NATS publish: {err}")))?;
        let mut batch = Batch::default();
        let read = async {
            while let Some(message) = replies.next().await {
                match message.status.map(|status| status.as_u16()) {
                    None | Some(200) => batch.messages.push(message),
                    Some(204) => {
                        batch.more = header_number(&message, "Nats-Num-Pending");
                        return Ok(());
                    }
                    Some(404) => return Ok(()),
                    Some(503) => return Err(Failure::NoResponders),
                    Some(status) => {
                        let said = message.description.unwrap_or_default();
                        return Err(Failure::Unexpected(format!(
                            "DIRECT.GET.{stream} answered {status} {said}"
                        )));
                    }
                }
            }
            Err(Failure::Failed(
                "the direct get's subscription ended".into(),
            ))
        };
        match tokio::time::timeout(TIMEOUT, read).await {
            Err(_) => Err(Failure::timed_out("DIRECT.GET")),
            Ok(done) => done.map(|()| batch),
        }
    }

    /// An inbox of its own for pulls from `consumer` of `stream`.
    pub(crate) async fn pulls(&self, stream: &str, consumer: &str) -> Result<Pulls, Failure> {
        let inbox = Subject::from(self.client.new_inbox());
        let messages = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|err| Failure::Failed(format!("NATS subscribe: {err}")))?;
        Ok(Pulls {
            client: self.client.clone(),
            next: api_subject(&format!("CONSUMER.MSG.NEXT.{stream}.{consumer}")),
            inbox,
            messages,
        })
    }
}

/// Pull requests to one consumer, and the messages and statuses they
/// bring, on an inbox of their own.
pub(crate) struct Pulls {
    client: Client,
    next: Subject,
    inbox: Subject,
    messages: async_nats::Subscriber,
}

impl Pulls {
    /// Asks for messages: `request` is a `CONSUMER.MSG.NEXT` body.
    pub(crate) async fn request(&self, request: &Value) -> Result<(), Failure> {
        self.client
            .publish_with_reply(
                self.next.clone(),
                self.inbox.clone(),
                request.to_string().into(),
            )
            .await
            .map_err(|err| Failure::Failed(format!("NATS publish: {err}")))
    }

    /// Acknowledges a message a pull brought, by its reply subject; a lost
    /// acknowledgement only has the server hand the message out again.
    pub(crate) async fn ack(&self, reply: Subject) -> Result<(), Failure> {
        self.client
            .publish(reply, Bytes::from_static(b"+ACK"))
            .await
            .map_err(|err| Failure::Failed(format!("NATS publish: {err}")))
    }

    /// The next message or status on the inbox, within [`PULL_TIMEOUT`].
    pub(crate) async fn next(&mut self) -> Result<Message, Failure> {
        match tokio::time::timeout(PULL_TIMEOUT, self.messages.next()).await {
            Err(_) => Err(Failure::Failed(format!(
                "JetStream did not end a pull within {} ms",
                PULL_TIMEOUT.as_millis()
            ))),
            Ok(None) => Err(Failure::Failed("the pull's subscription ended".into())),
            Ok(Some(message)) => Ok(message),
        }
    }
}

/// What a direct get answered: its messages, and how many more match
/// past the last of them.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) messages: Vec<Message>,
    pub(crate) more: u64,
}

/// A header of `message` read as a whole number (0 when absent).
pub(crate) fn header_number(message: &Message, name: &str) -> u64 {
    message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(name))
        .and_then(|value| value.as_str().parse().ok())
        .unwrap_or(0)
}

/// The subject of the JetStream API call `op` (e.g. `STREAM.INFO.KV_leases`);
/// made once per call kind by a caller that repeats it, as cloning a
/// [`Subject`] copies nothing.
pub(crate) fn api_subject(op: &str) -> Subject {
    Subject::from(format!("$JS.API.{op}"))
}

/// What no responders on `$JS.API` means.
pub(super) const NO_JETSTREAM: &str = "JetStream is not enabled or not reachable";

#[cfg(test)]
mod tests {
    use super::asked;

    #[test]
    fn a_timeout_names_what_was_asked() {
        assert_eq!(asked("$JS.API.STREAM.MSG.GET.KV_leases"), "STREAM.MSG.GET");
        assert_eq!(asked("$JS.API.INFO"), "INFO");
        assert_eq!(asked("$KV.leases.k"), "a publish");
    }
}
