//! Reads and compare-and-set writes on the `leases` bucket; and the one
//! place where what JetStream answered (`jsapi.rs`) and what a list came
//! to (`snapshot.rs`) become the core's [`StoreError`].
//!
//! Every read is `STREAM.MSG.GET` with `last_by_subj`, which only the stream
//! leader answers; every write is a JetStream publish that expects the
//! key's last sequence. A leader cut off by a partition can go on answering
//! reads after another was elected, so on a replicated bucket every read is
//! confirmed by a barrier: a publish to [`READ_BARRIER_SUBJECT`], which only
//! the current leader can commit, expecting the key's last sequence to be
//! the one read (docs/operations.md, "What a partition does").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::jsapi::{ApiError, Failure, JetStream, NO_JETSTREAM, api_subject, code};
use super::publisher::{Publish, Publisher};
use super::snapshot;
use super::turns::Turns;
use crate::core::ports::{KeyEntry, Snapshot, StoreError, Write};
use async_nats::{HeaderMap, HeaderName, Subject};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use dagnats_leases_wire::names::{
    HEADER_EVENT, HEADER_EXPECTED_SEQ, HEADER_EXPECTED_SEQ_SUBJECT, HEADER_KV_OPERATION,
    HEADER_PREVIOUS_HOLDER, HEADER_ROLLUP, HEADER_TTL, LIST_BARRIER_SUBJECT, READ_BARRIER_SUBJECT,
    STREAM, key_subject,
};
use dagnats_leases_wire::record::{Entry, WriteEvent, decode_entry};
use dagnats_leases_wire::timefmt;
use serde::Deserialize;

/// How many times a read is taken again when the key changed before its
/// barrier landed.
const CONFIRM_ROUNDS: usize = 4;
/// How many times a barrier is sent again while another one on the key is
/// in flight (from another gateway), before the key is read again.
const BUSY_ROUNDS: u32 = 6;

/// 5, 10, 20, 40, 80 ms and up, plus up to 8 ms of jitter from the clock,
/// so gateways that collided do not collide again in step.
fn busy_backoff(attempt: u32) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos() % 8_000_000);
    Duration::from_millis(5 << attempt.min(4)) + Duration::from_nanos(jitter.into())
}

type ReadOutcome = Result<(u64, Option<Entry>), StoreError>;

/// A handle on the bucket.
pub(super) struct Bucket {
    jetstream: JetStream,
    /// Writes and read barriers.
    publisher: Publisher,
    /// `STREAM.MSG.GET` of the bucket's stream.
    msg_get: Subject,
    /// Highest revision seen by this gateway: if the bucket must ever be
    /// created again, its sequence starts above this so fences still grow.
    highest_seen: Arc<AtomicU64>,
    /// Whether reads are confirmed by a barrier: only a replicated bucket
    /// can have a deposed leader still answering.
    confirm_reads: bool,
    /// Confirmed reads by key, shared by the callers that wait together.
    reads: Turns<ReadOutcome>,
    /// Checks that a key is still at a revision, shared the same way.
    checks: Turns<(u64, Result<bool, StoreError>)>,
    /// Snapshots of every key, shared by the lists that wait together.
    lists: Turns<Result<Snapshot, StoreError>>,
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
struct StoredMessage {
    seq: u64,
    #[serde(default)]
    hdrs: Option<String>,
    #[serde(default)]
    data: Option<String>,
    time: String,
}

impl Bucket {
    pub(super) fn new(
        jetstream: JetStream,
        publisher: Publisher,
        highest_seen: Arc<AtomicU64>,
        confirm_reads: bool,
    ) -> Self {
        Bucket {
            jetstream,
            publisher,
            msg_get: api_subject(&format!("STREAM.MSG.GET.{STREAM}")),
            highest_seen,
            confirm_reads,
            reads: Turns::new("read"),
            checks: Turns::new("check"),
            lists: Turns::new("list"),
        }
    }

    /// The last message of `key`, read through the stream leader and, on a
    /// replicated bucket, confirmed current by a barrier; concurrent reads
    /// of one key share confirmations (`turns.rs`).
    pub(super) async fn last(&self, key: &str) -> Result<Option<Entry>, StoreError> {
        if !self.confirm_reads {
            return self.read(key).await.map(|(_, entry)| entry);
        }
        let outcome = self
            .reads
            .take(key, |_| true, || self.confirmed_read(key))
            .await;
        outcome.map(|(_, entry)| entry)
    }

    /// Whether `key`'s last sequence is still `seq` (0: no message): on a
    /// replicated bucket one barrier, without a read, shared by concurrent
    /// checks of the same revision; on a single replica, where the one
    /// server is the leader, one read.
    pub(super) async fn still_at(&self, key: &str, seq: u64) -> Result<bool, StoreError> {
        if !self.confirm_reads {
            return Ok(self.read(key).await?.0 == seq);
        }
        let check = || async move { (seq, self.confirm(key, seq).await) };
        let (_, outcome) = self
            .checks
            .take(key, |(checked, _)| *checked == seq, check)
            .await;
        outcome
    }

    /// A read followed by its barrier, read again if the key changed.
    async fn confirmed_read(&self, key: &str) -> Result<(u64, Option<Entry>), StoreError> {
        for _ in 0..CONFIRM_ROUNDS {
            let read = self.read(key).await?;
            if self.confirm(key, read.0).await? {
                return Ok(read);
            }
        }
        Err(StoreError::Unavailable(format!(
            "{key} kept changing while it was read"
        )))
    }

    /// Whether `key`'s last sequence is still `seq` (0: no message), proved
    /// by a write only the current stream leader can commit.
    async fn confirm(&self, key: &str, seq: u64) -> Result<bool, StoreError> {
        const EXPECTED_SEQ: HeaderName = HeaderName::from_static(HEADER_EXPECTED_SEQ);
        const EXPECTED_SEQ_SUBJECT: HeaderName =
            HeaderName::from_static(HEADER_EXPECTED_SEQ_SUBJECT);
        for attempt in 0..BUSY_ROUNDS {
            let checks = key_subject(key);
            let mut headers = HeaderMap::new();
            headers.insert(EXPECTED_SEQ, seq.to_string().as_str());
            headers.insert(EXPECTED_SEQ_SUBJECT, checks.as_str());
            let reply = self.barrier(READ_BARRIER_SUBJECT, checks, headers).await?;
            let ack: PubAck = serde_json::from_slice(&reply)
                .map_err(|err| StoreError::Unexpected(format!("barrier ack: {err}")))?;
            match ack.error {
                None => {
                    self.saw(ack.seq);
                    return Ok(true);
                }
                Some(err) if err.err_code == code::WRONG_LAST_SEQUENCE => return Ok(false),
                // Another barrier or write on the key is in flight; it
                // lands in a moment, so ask again shortly.
                Some(err) if err.err_code == code::WRONG_LAST_SEQUENCE_IN_FLIGHT => {
                    tokio::time::sleep(busy_backoff(attempt)).await;
                }
                Some(err) => return Err(api_error(err)),
            }
        }
        Ok(false)
    }

    /// The last message of `key` and its sequence (0 when there is none),
    /// as the node that answers `STREAM.MSG.GET` sees it.
    async fn read(&self, key: &str) -> Result<(u64, Option<Entry>), StoreError> {
        let body = serde_json::to_vec(&serde_json::json!({ "last_by_subj": key_subject(key) }))
            .expect("a JSON object serializes");
        let reply = self
            .jetstream
            .request(self.msg_get.clone(), HeaderMap::new(), body.into())
            .await
            .map_err(|err| or_missing(err, StoreError::Unavailable(NO_JETSTREAM.into())))?;
        let answer: MsgGet = serde_json::from_slice(&reply)
            .map_err(|err| StoreError::Unexpected(format!("message get reply: {err}")))?;
        if let Some(err) = answer.error {
            return match err.err_code {
                code::NO_MESSAGE_FOUND => Ok((0, None)),
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
                .map_err(|err| StoreError::Corrupt {
                    seq: msg.seq,
                    cause: format!("message {}: {err}", msg.seq),
                })
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
            .map(|entry| (msg.seq, Some(entry)))
            .map_err(|cause| StoreError::Corrupt {
                seq: msg.seq,
                cause,
            })
    }

    /// The last entry of every key, as of a moment after a barrier the
    /// current leader committed (`snapshot.rs`). One snapshot is taken at
    /// a time, and the lists that arrive meanwhile share the next one
    /// (`turns.rs`): each walks every key on the servers, so lists each
    /// on their own starve renewals.
    pub(super) async fn entries(&self) -> Result<Snapshot, StoreError> {
        let snapshot = || async { self.snapshot().await.map(Arc::new) };
        self.lists
            .take(LIST_BARRIER_SUBJECT, |_| true, snapshot)
            .await
    }

    /// A snapshot of its own (see [`Bucket::entries`]).
    async fn snapshot(&self) -> Result<Vec<KeyEntry>, StoreError> {
        let reply = self
            .barrier(
                LIST_BARRIER_SUBJECT,
                LIST_BARRIER_SUBJECT.into(),
                HeaderMap::new(),
            )
            .await?;
        let at = self.acknowledged(&reply)?;
        let listed = snapshot::entries(&self.jetstream, at)
            .await
            .map_err(list_failed)?;
        let entries = listed.into_iter().map(|(key, seq, entry)| {
            let entry = entry.map_err(|cause| StoreError::Corrupt { seq, cause });
            (key, entry)
        });
        Ok(entries.collect())
    }

    /// A publish to `subject` with `headers` (its checks on the subject
    /// `checks`), and its acknowledgement.
    async fn barrier(
        &self,
        subject: &'static str,
        checks: String,
        headers: HeaderMap,
    ) -> Result<Bytes, StoreError> {
        let barrier = Publish {
            subject: Subject::from_static(subject),
            checks,
            headers,
            body: Bytes::new(),
            send_by: None,
        };
        self.publisher
            .publish(barrier)
            .await
            // A node that stopped leading no longer listens: no leader here.
            .map_err(|err| or_missing(err, StoreError::Unavailable(NO_LEADER.into())))
    }

    /// Writes `write` to `key` if the key's last sequence is `expected`
    /// (0: the key has no message), and returns the new revision.
    pub(super) async fn write(
        &self,
        key: &str,
        expected: u64,
        write: Write,
    ) -> Result<u64, StoreError> {
        // Names made once: parsing them on every write costs the hot path.
        const PREVIOUS_HOLDER: HeaderName = HeaderName::from_static(HEADER_PREVIOUS_HOLDER);
        const EXPECTED_SEQ: HeaderName = HeaderName::from_static(HEADER_EXPECTED_SEQ);
        const TTL: HeaderName = HeaderName::from_static(HEADER_TTL);
        const EVENT: HeaderName = HeaderName::from_static(HEADER_EVENT);
        const KV_OPERATION: HeaderName = HeaderName::from_static(HEADER_KV_OPERATION);
        const ROLLUP: HeaderName = HeaderName::from_static(HEADER_ROLLUP);
        let mut headers = HeaderMap::new();
        headers.insert(EXPECTED_SEQ, expected.to_string());
        headers.insert(TTL, format!("{}s", write.ttl_secs));
        headers.insert(EVENT, write.event.as_str());
        if write.event == WriteEvent::Released {
            // A purge with a TTL expires without leaving an expiry marker
            // (a delete would leave one).
            headers.insert(KV_OPERATION, "PURGE");
            headers.insert(ROLLUP, "sub");
        }
        if let Some(holder) = write.previous_holder {
            headers.insert(PREVIOUS_HOLDER, holder);
        }
        let subject = key_subject(key);
        let publish = Publish {
            subject: Subject::from(subject.clone()),
            checks: subject,
            headers,
            body: write.body,
            send_by: write.send_by,
        };
        let reply = self
            .publisher
            .publish(publish)
            .await
            // Nothing listens on the key subject: the stream has no
            // leader (only the leader listens), or no stream captures it.
            .map_err(|err| or_missing(err, StoreError::NoListener))?;
        self.acknowledged(&reply)
    }

    /// The sequence a publish landed at, or why it did not land.
    fn acknowledged(&self, reply: &[u8]) -> Result<u64, StoreError> {
        let ack: PubAck = serde_json::from_slice(reply)
            .map_err(|err| StoreError::Unexpected(format!("publish ack: {err}")))?;
        if let Some(err) = ack.error {
            return Err(match err.err_code {
                code::WRONG_LAST_SEQUENCE | code::WRONG_LAST_SEQUENCE_IN_FLIGHT => {
                    StoreError::Conflict
                }
                _ => api_error(err),
            });
        }
        self.saw(ack.seq);
        Ok(ack.seq)
    }

    fn saw(&self, seq: u64) {
        self.highest_seen.fetch_max(seq, Ordering::Relaxed);
    }
}

const NO_LEADER: &str = "no stream leader reachable";

/// A request that got no usable answer, in the core's terms:
/// `no_responders` is what nobody listening means on the subject asked.
fn or_missing(failure: Failure, no_responders: StoreError) -> StoreError {
    match failure {
        Failure::NoResponders => no_responders,
        Failure::TooLate => StoreError::TooLate,
        Failure::Failed(reason) => StoreError::Unavailable(reason),
        Failure::Unexpected(reason) => StoreError::Unexpected(reason),
    }
}

/// Why a list could not be taken, in the core's terms.
fn list_failed(failure: Failure) -> StoreError {
    match or_missing(failure, StoreError::Unavailable(NO_JETSTREAM.into())) {
        StoreError::Unavailable(reason) => {
            StoreError::Unavailable(format!("listing the bucket: {reason}"))
        }
        other => other,
    }
}

fn api_error(err: ApiError) -> StoreError {
    if err.err_code == code::STREAM_NOT_FOUND {
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
