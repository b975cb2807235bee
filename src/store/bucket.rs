//! Reads and compare-and-set writes on the `leases` bucket.
//!
//! Every read is `STREAM.MSG.GET` with `last_by_subj`, which only the stream
//! leader answers; every write is a JetStream publish that expects the
//! key's last sequence. Server answers are translated into [`StoreError`]
//! here and nowhere else.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::record::{Entry, LeaseEvent, decode_entry};
use crate::core::timefmt;
use crate::protocol::{
    HEADER_EVENT, HEADER_EXPECTED_SEQ, HEADER_KV_OPERATION, HEADER_ROLLUP, HEADER_TTL,
    KEY_SUBJECTS, STREAM, key_subject,
};
use async_nats::connection::State;
use async_nats::{Client, HeaderMap, HeaderName, RequestErrorKind};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::Deserialize;

/// JetStream error codes this adapter gives a meaning to.
const ERR_WRONG_LAST_SEQUENCE: u64 = 10071;
/// The same refusal from a replicated stream while an earlier write to the
/// key is still in flight: the write did not land.
const ERR_WRONG_LAST_SEQUENCE_IN_FLIGHT: u64 = 10164;
const ERR_NO_MESSAGE_FOUND: u64 = 10037;
const ERR_STREAM_NOT_FOUND: u64 = 10059;

/// Why a store call failed, in the core's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The compare-and-set lost: the key's last sequence was not the one expected.
    Conflict,
    /// JetStream cannot serve now (disconnected, no leader, timed out).
    Unavailable(String),
    /// The bucket is gone; the provisioner must create it again.
    BucketMissing,
    /// A record that does not parse.
    Corrupt(String),
    /// An answer this adapter does not understand.
    Unexpected(String),
}

/// One write: the record body and the headers that go with it.
pub struct Write {
    pub event: LeaseEvent,
    /// Whole seconds: every write carries a TTL, so no record outlives it.
    pub ttl_secs: u64,
    pub body: Vec<u8>,
}

/// A handle on the bucket; cheap to clone.
#[derive(Clone)]
pub struct Bucket {
    client: Client,
    timeout: Duration,
    /// Highest revision seen by this gateway: if the bucket must ever be
    /// created again, its sequence starts above this so fences still grow.
    highest_seen: Arc<AtomicU64>,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(default)]
    code: u64,
    #[serde(default)]
    err_code: u64,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
struct PubAck {
    #[serde(default)]
    seq: u64,
    error: Option<ApiError>,
}

#[derive(Deserialize)]
struct MsgGet {
    message: Option<StoredMessage>,
    error: Option<ApiError>,
}

#[derive(Deserialize)]
struct StreamInfo {
    error: Option<ApiError>,
    state: Option<StreamState>,
    /// Subjects matching the filter, across all pages.
    #[serde(default)]
    total: u64,
}

#[derive(Deserialize)]
struct StreamState {
    #[serde(default)]
    subjects: std::collections::HashMap<String, u64>,
}

#[derive(Deserialize)]
struct StoredMessage {
    seq: u64,
    #[serde(default)]
    hdrs: Option<String>,
    #[serde(default)]
    data: Option<String>,
    time: String,
}

impl Bucket {
    pub(crate) fn new(client: Client, timeout: Duration, highest_seen: Arc<AtomicU64>) -> Self {
        Bucket {
            client,
            timeout,
            highest_seen,
        }
    }

    /// The last message of `key`, read through the stream leader.
    pub async fn last(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        let subject = format!("$JS.API.STREAM.MSG.GET.{STREAM}");
        let body = serde_json::to_vec(&serde_json::json!({ "last_by_subj": key_subject(key) }))
            .expect("a JSON object serializes");
        let reply = self
            .request(subject, HeaderMap::new(), body.into())
            .await
            .map_err(|err| err.or_missing(StoreError::Unavailable(NO_JETSTREAM.into())))?;
        let answer: MsgGet = serde_json::from_slice(&reply)
            .map_err(|err| StoreError::Unexpected(format!("message get reply: {err}")))?;
        if let Some(err) = answer.error {
            return match err.err_code {
                ERR_NO_MESSAGE_FOUND => Ok(None),
                _ => Err(api_error(err)),
            };
        }
        let msg = answer
            .message
            .ok_or_else(|| StoreError::Unexpected("message get reply has no message".into()))?;
        self.saw(msg.seq);
        let decode = |field: Option<String>| {
            STANDARD
                .decode(field.unwrap_or_default())
                .map_err(|err| StoreError::Corrupt(format!("message {}: {err}", msg.seq)))
        };
        let hdrs = decode(msg.hdrs)?;
        let data = decode(msg.data)?;
        let stored_at = timefmt::parse(&msg.time)
            .map_err(|err| StoreError::Unexpected(format!("message time {:?}: {err}", msg.time)))?;
        let headers = parse_headers(&hdrs);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        };
        decode_entry(msg.seq, stored_at, header, &data)
            .map(Some)
            .map_err(StoreError::Corrupt)
    }

    /// Every key that has a message in the bucket (held, released or
    /// expired), from the stream leader's `STREAM.INFO`, page by page.
    pub async fn keys(&self) -> Result<Vec<String>, StoreError> {
        let subject = format!("$JS.API.STREAM.INFO.{STREAM}");
        let prefix = key_subject("");
        let mut keys = Vec::new();
        loop {
            let body = serde_json::to_vec(&serde_json::json!({
                "subjects_filter": KEY_SUBJECTS,
                "offset": keys.len(),
            }))
            .expect("a JSON object serializes");
            let reply = self
                .request(subject.clone(), HeaderMap::new(), body.into())
                .await
                .map_err(|err| err.or_missing(StoreError::Unavailable(NO_JETSTREAM.into())))?;
            let info: StreamInfo = serde_json::from_slice(&reply)
                .map_err(|err| StoreError::Unexpected(format!("stream info reply: {err}")))?;
            if let Some(err) = info.error {
                return Err(api_error(err));
            }
            let page = info.state.map(|s| s.subjects).unwrap_or_default();
            let got = page.len();
            keys.extend(
                page.into_keys()
                    .filter_map(|subject| subject.strip_prefix(&prefix).map(str::to_string)),
            );
            if got == 0 || keys.len() as u64 >= info.total {
                return Ok(keys);
            }
        }
    }

    /// Writes `write` to `key` if the key's last sequence is `expected`
    /// (0: the key has no message), and returns the new revision.
    pub async fn write(&self, key: &str, expected: u64, write: Write) -> Result<u64, StoreError> {
        // Names made once: parsing a name on every write was a few
        // percent of a renew (callgrind).
        const EXPECTED_SEQ: HeaderName = HeaderName::from_static(HEADER_EXPECTED_SEQ);
        const TTL: HeaderName = HeaderName::from_static(HEADER_TTL);
        const EVENT: HeaderName = HeaderName::from_static(HEADER_EVENT);
        const KV_OPERATION: HeaderName = HeaderName::from_static(HEADER_KV_OPERATION);
        const ROLLUP: HeaderName = HeaderName::from_static(HEADER_ROLLUP);
        let mut headers = HeaderMap::new();
        headers.insert(EXPECTED_SEQ, expected.to_string());
        headers.insert(TTL, format!("{}s", write.ttl_secs));
        headers.insert(EVENT, write.event.as_str());
        if write.event == LeaseEvent::Released {
            // A purge with a TTL expires without leaving an expiry marker
            // (a delete would leave one).
            headers.insert(KV_OPERATION, "PURGE");
            headers.insert(ROLLUP, "sub");
        }
        let reply = self
            .request(key_subject(key), headers, write.body.into())
            .await
            // Nothing listens on the key subject: no stream captures it.
            .map_err(|err| err.or_missing(StoreError::BucketMissing))?;
        let ack: PubAck = serde_json::from_slice(&reply)
            .map_err(|err| StoreError::Unexpected(format!("publish ack: {err}")))?;
        if let Some(err) = ack.error {
            return Err(match err.err_code {
                ERR_WRONG_LAST_SEQUENCE | ERR_WRONG_LAST_SEQUENCE_IN_FLIGHT => StoreError::Conflict,
                _ => api_error(err),
            });
        }
        self.saw(ack.seq);
        Ok(ack.seq)
    }

    fn saw(&self, seq: u64) {
        self.highest_seen.fetch_max(seq, Ordering::Relaxed);
    }

    async fn request(
        &self,
        subject: String,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Bytes, RequestFailure> {
        if self.client.connection_state() != State::Connected {
            return Err(RequestFailure::Failed("not connected to NATS".into()));
        }
        let call = self.client.request_with_headers(subject, headers, body);
        match tokio::time::timeout(self.timeout, call).await {
            Err(_) => Err(RequestFailure::Failed(format!(
                "JetStream did not answer within {} ms",
                self.timeout.as_millis()
            ))),
            Ok(Err(err)) => Err(match err.kind() {
                RequestErrorKind::NoResponders => RequestFailure::NoResponders,
                RequestErrorKind::TimedOut => {
                    RequestFailure::Failed("JetStream request timed out".into())
                }
                _ => RequestFailure::Failed(format!("NATS request: {err}")),
            }),
            Ok(Ok(msg)) => Ok(msg.payload),
        }
    }
}

const NO_JETSTREAM: &str = "JetStream is not enabled or not reachable";

/// A request that got no usable answer. What "no responders" means depends
/// on the subject, so the caller decides.
enum RequestFailure {
    NoResponders,
    Failed(String),
}

impl RequestFailure {
    fn or_missing(self, no_responders: StoreError) -> StoreError {
        match self {
            RequestFailure::NoResponders => no_responders,
            RequestFailure::Failed(reason) => StoreError::Unavailable(reason),
        }
    }
}

fn api_error(err: ApiError) -> StoreError {
    if err.err_code == ERR_STREAM_NOT_FOUND {
        StoreError::BucketMissing
    } else if err.code == 503 {
        StoreError::Unavailable(format!("JetStream: {}", err.description))
    } else {
        StoreError::Unexpected(format!(
            "JetStream error {} ({}): {}",
            err.err_code, err.code, err.description
        ))
    }
}

/// Parses a NATS header block (`NATS/1.0\r\nName: value\r\n...`).
fn parse_headers(block: &[u8]) -> Vec<(&str, &str)> {
    let text = std::str::from_utf8(block).unwrap_or_default();
    text.split("\r\n")
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim(), value.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_headers;

    #[test]
    fn parses_a_header_block() {
        let block = b"NATS/1.0\r\nDagnats-Lease-Event: renewed\r\nNats-TTL: 2s\r\n\r\n";
        assert_eq!(
            parse_headers(block),
            vec![("Dagnats-Lease-Event", "renewed"), ("Nats-TTL", "2s")]
        );
    }
}
