//! One key's history records: what the history knows of the key, read back
//! from its last record, and the compare-and-set writes of the records its
//! changes make (docs/protocol.md, Tenure history).
//!
//! Every write expects the key's last record as the writer knows it. Two
//! writers (the server moving its pin while a change is in flight) or a
//! change handed out again thus never make two records: the loser reads
//! the key's last record, and the change is then one already reflected,
//! which writes nothing.

use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::json;
use time::OffsetDateTime;

use super::derive::{Change, KeyHistory, Written, coalesce};
use super::stored::Stored;
use crate::store::jsapi::{Failure, JetStream, api_error, code};
use dagnats_leases_wire::names::{HEADER_EXPECTED_SEQ, HISTORY_STREAM, history_subject};

/// What the history knows of a key, and its subject's last record.
pub(super) struct Tracked {
    pub(super) history: KeyHistory,
    /// The history stream's sequence of the key's last record (0: none),
    /// which the next write expects.
    pub(super) last_seq: u64,
}

/// Why a key's changes could not be recorded now.
pub(super) enum Stuck {
    /// JetStream did not take a write: try the same changes again.
    Retry(String),
    /// The history stream is gone: provision again.
    Lost(String),
}

/// How many times a key's changes are applied to what another writer
/// wrote meanwhile before the writer waits and tries again.
const ROUNDS: usize = 4;

/// The writes of one key; cheap to clone.
#[derive(Clone)]
pub(super) struct KeyWrites {
    pub(super) js: JetStream,
    /// How old an open tenure's record may grow before it is written again.
    pub(super) refresh: Duration,
}

impl KeyWrites {
    /// Writes the records `changes` (in the bucket's order) make for `key`,
    /// one record a tenure (its last), going on from `tracked` or the
    /// key's last record; what the history then knows of the key, and the
    /// records written.
    pub(super) async fn record(
        &self,
        key: &str,
        mut tracked: Option<Tracked>,
        changes: &[Change],
    ) -> Result<(Tracked, Vec<Written>), Stuck> {
        for _ in 0..ROUNDS {
            let mut now = match tracked.take() {
                Some(known) => known,
                None => self.load(key).await?,
            };
            let mut written = Vec::new();
            for change in changes {
                written.extend(now.history.apply(key, change.clone(), self.refresh));
            }
            match self.write_all(key, &mut now, coalesce(written)).await? {
                Some(written) => return Ok((now, written)),
                // Another writer wrote the key: go on from its record.
                None => continue,
            }
        }
        Err(Stuck::Retry(format!(
            "{key}'s history changed on every attempt"
        )))
    }

    /// Writes `written` in order; the records written, or `None` once a
    /// compare-and-set was lost.
    pub(super) async fn write_all(
        &self,
        key: &str,
        tracked: &mut Tracked,
        written: Vec<Written>,
    ) -> Result<Option<Vec<Written>>, Stuck> {
        for write in &written {
            match self.write(key, tracked.last_seq, &write.stored).await? {
                Some(seq) => tracked.last_seq = seq,
                None => return Ok(None),
            }
        }
        Ok(Some(written))
    }

    /// One record, expecting `expected` as the key's last; its sequence,
    /// or `None` when another record got there first.
    async fn write(&self, key: &str, expected: u64, stored: &Stored) -> Result<Option<u64>, Stuck> {
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_EXPECTED_SEQ, expected.to_string().as_str());
        let body = Bytes::from(serde_json::to_vec(stored).expect("a record serializes"));
        let reply = match self.js.request(history_subject(key), headers, body).await {
            Ok(reply) => reply,
            Err(Failure::NoResponders) => {
                return Err(Stuck::Lost(format!(
                    "no {HISTORY_STREAM} stream took the record"
                )));
            }
            Err(Failure::Failed(reason) | Failure::Unexpected(reason)) => {
                return Err(Stuck::Retry(reason));
            }
            Err(Failure::TooLate) => return Err(Stuck::Retry("not sent in time".into())),
        };
        let ack: serde_json::Value = serde_json::from_slice(&reply)
            .map_err(|err| Stuck::Retry(format!("history write acknowledgement: {err}")))?;
        match api_error(&ack) {
            None => ack["seq"].as_u64().map(Some).ok_or_else(|| {
                Stuck::Retry(format!(
                    "history write acknowledged without a sequence: {ack}"
                ))
            }),
            Some(err) if is_wrong_last(err.err_code) => Ok(None),
            Some(err) => Err(Stuck::Retry(err.description)),
        }
    }

    /// What the history knows of `key`: from its last record.
    async fn load(&self, key: &str) -> Result<Tracked, Stuck> {
        let asked = json!({"last_by_subj": history_subject(key)});
        let reply = self
            .js
            .api(&format!("STREAM.MSG.GET.{HISTORY_STREAM}"), &asked)
            .await
            .map_err(Stuck::Retry)?;
        match api_error(&reply) {
            Some(err) if err.err_code == code::NO_MESSAGE_FOUND => {
                return Ok(Tracked {
                    history: KeyHistory::default(),
                    last_seq: 0,
                });
            }
            Some(err) if err.err_code == code::STREAM_NOT_FOUND => {
                return Err(Stuck::Lost(err.description));
            }
            Some(err) => return Err(Stuck::Retry(err.description)),
            None => {}
        }
        let message = &reply["message"];
        let seq = message["seq"].as_u64().unwrap_or(0);
        let body = message["data"]
            .as_str()
            .map(base64_decode)
            .transpose()
            .map_err(Stuck::Retry)?
            .unwrap_or_default();
        let at = message["time"]
            .as_str()
            .and_then(|at| dagnats_leases_wire::timefmt::parse(at).ok())
            .unwrap_or_else(OffsetDateTime::now_utc);
        match Stored::parse(seq, &body) {
            Ok(stored) => Ok(Tracked {
                history: KeyHistory::resume(Some((stored, at))),
                last_seq: seq,
            }),
            // A record nobody can read is written over, not guessed at.
            Err(reason) => {
                tracing::warn!(
                    key,
                    reason,
                    "unreadable history record: going on from nothing"
                );
                Ok(Tracked {
                    history: KeyHistory::default(),
                    last_seq: seq,
                })
            }
        }
    }
}

/// Whether a compare-and-set lost: the subject's last record was not the
/// one expected.
fn is_wrong_last(err_code: u64) -> bool {
    matches!(
        err_code,
        code::WRONG_LAST_SEQUENCE | code::WRONG_LAST_SEQUENCE_IN_FLIGHT
    )
}

fn base64_decode(data: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| format!("a history record that is not base64: {err}"))
}
