//! The one caller of JetStream: `$JS.API.*` requests and the publishes whose
//! acknowledgement JetStream sends, with one timeout and one list of the
//! error codes the store gives a meaning to.
//!
//! What "no responders" means depends on the subject (no JetStream, no
//! stream leader, no stream capturing a key), so it is reported as such and
//! the caller decides.

use std::time::Duration;

use async_nats::connection::State;
use async_nats::{Client, HeaderMap, Request, RequestErrorKind, Subject, ToSubject};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

/// How long one JetStream request may take before the call answers
/// `unavailable`; below a client's usual 5 s request timeout, so callers
/// hear why rather than time out.
pub(super) const TIMEOUT: Duration = Duration::from_secs(4);

/// JetStream error codes (`err_code`) the store gives a meaning to.
pub(super) mod code {
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
}

/// What JetStream said it failed at, from a reply's `error` field.
#[derive(Debug, Deserialize)]
pub(super) struct ApiError {
    #[serde(default)]
    pub(super) code: u64,
    #[serde(default)]
    pub(super) err_code: u64,
    #[serde(default)]
    pub(super) description: String,
}

/// A request that got no usable answer.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// Nothing listens on the subject.
    NoResponders,
    /// Not connected, timed out, or the request failed; why.
    Failed(String),
    /// A publish that waited to be sent past its send-by: never sent.
    TooLate,
}

impl Failure {
    /// No answer to `what` within [`TIMEOUT`].
    pub(super) fn timed_out(what: &str) -> Self {
        Failure::Failed(format!(
            "JetStream did not answer {what} within {} ms",
            TIMEOUT.as_millis()
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
pub(super) struct JetStream {
    client: Client,
}

impl JetStream {
    pub(super) fn new(client: Client) -> Self {
        JetStream { client }
    }

    /// The connection underneath, for the consumer a listing reads.
    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    /// One request to `subject` and its reply body, within [`TIMEOUT`].
    pub(super) async fn request(
        &self,
        subject: impl ToSubject,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Bytes, Failure> {
        if self.client.connection_state() != State::Connected {
            return Err(Failure::Failed("not connected to NATS".into()));
        }
        let subject = subject.to_subject();
        // Bounded here, enqueueing included, and so not by the client's
        // own request timeout too: that second timer per request cost a
        // renew 1,430 instructions (callgrind, 90,069 to 88,641).
        let request = Request::new().headers(headers).payload(body).timeout(None);
        let call = self.client.send_request(subject.clone(), request);
        match tokio::time::timeout(TIMEOUT, call).await {
            Err(_) => Err(Failure::timed_out(asked(&subject))),
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
    /// an `error`); `Err` says why there was no reply.
    pub(super) async fn api(&self, op: &str, body: &Value) -> Result<Value, String> {
        let payload = serde_json::to_vec(body).expect("JSON serializes");
        let reply = self
            .request(api_subject(op), HeaderMap::new(), payload.into())
            .await
            .map_err(|failure| match failure {
                Failure::NoResponders => NO_JETSTREAM.to_string(),
                Failure::Failed(reason) => reason,
                Failure::TooLate => "not sent in time".to_string(),
            })?;
        serde_json::from_slice(&reply).map_err(|err| format!("JetStream reply: {err}"))
    }
}

/// The subject of the JetStream API call `op` (e.g. `STREAM.INFO.KV_leases`);
/// made once per call kind by a caller that repeats it, as cloning a
/// [`Subject`] copies nothing.
pub(super) fn api_subject(op: &str) -> Subject {
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
