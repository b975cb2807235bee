//! The history writer: every gateway runs one; the bucket's history
//! consumer hands the changes to one of them at a time (its pinned
//! client), which writes each tenure's records to the history stream
//! (docs/protocol.md, Tenure history).
//!
//! Every write is a compare-and-set on the key's subject, expecting the
//! record the writer last knew there. Two writers (the server moving its
//! pin while a change is in flight) or a change handed out again thus
//! never make two records: the loser reads the key's last record, and the
//! change is then one already reflected, which writes nothing. A change is
//! acknowledged only once its records are written.

use std::time::Duration;

use async_nats::{HeaderMap, Message};
use bytes::Bytes;
use foldhash::{HashMap, HashMapExt};
use serde_json::json;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::derive::{Change, KeyHistory, Seen, Told, Written};
use super::flapping::Flapping;
use super::reads::{failed, last_records};
use super::stored::{LastWrite, Stored};
use super::stream;
use crate::metrics;
use crate::settings::HistorySettings;
use crate::store::jsapi::{Failure, JetStream, Pulls, api_error, code};
use crate::store::pull::Delivery;
use dagnats_leases_wire::history::TenureEnd;
use dagnats_leases_wire::names::{
    BUCKET, HEADER_EXPECTED_SEQ, HEADER_MARKER_REASON, HISTORY_CONSUMER, HISTORY_GROUP,
    HISTORY_PREFIX, HISTORY_STREAM, STREAM, history_subject,
};
use dagnats_leases_wire::record::{Entry, decode_entry};

/// Changes asked for in one pull.
const BATCH: u64 = 256;
/// How long a pull waits for changes: well within [`PIN_TIMEOUT`], so the
/// pinned writer keeps its pin while the bucket is idle.
const PULL_EXPIRES: Duration = Duration::from_secs(2);
/// Bound on keys whose history is kept in memory; past it, it starts over
/// (each key's is read back from its last record when next needed).
const KEYS: usize = 100_000;
/// Retry delays while the history cannot be written.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How often flapping keys are looked at again, so one that calmed down
/// stops showing.
const FLAP_SWEEP: Duration = Duration::from_secs(10);

/// Writes the history until `stop`: provisions the stream and the
/// consumer (telling `provisioned` once they first exist, or why not
/// until then), then takes the changes the server hands this gateway.
pub(crate) async fn run(
    js: JetStream,
    settings: HistorySettings,
    provisioned: watch::Sender<Result<(), String>>,
    stop: CancellationToken,
) {
    let mut retry = RETRY_MIN;
    let mut last_note = String::new();
    let mut flapping = Flapping::default();
    loop {
        let outcome = match stream::provision(&js, settings.max_age).await {
            Ok(_) => {
                provisioned.send_if_modified(|now| replace(now, Ok(())));
                let mut session = Session::new(&js, &settings, &mut flapping);
                session.run(&stop).await
            }
            Err(reason) => {
                // Once it existed, the durable consumer keeps every change
                // for the writer, whatever fails later.
                provisioned
                    .send_if_modified(|now| now.is_err() && replace(now, Err(reason.clone())));
                Err(reason)
            }
        };
        match outcome {
            Ok(()) => return,
            Err(reason) => {
                let note = format!("tenure history paused: {reason}; retrying");
                if note != last_note {
                    tracing::warn!("{note}");
                    last_note = note;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(retry) => retry = (retry * 2).min(RETRY_MAX),
        }
    }
}

/// Sets `now` to `to`; whether that changed it.
fn replace<T: PartialEq>(now: &mut T, to: T) -> bool {
    let changed = *now != to;
    *now = to;
    changed
}

/// What the history knows of a key, and its subject's last record.
struct Tracked {
    history: KeyHistory,
    /// The history stream's sequence of the key's last record (0: none),
    /// which the next write expects.
    last_seq: u64,
}

/// One consumer subscription, from provisioning until it fails or stops.
struct Session<'a> {
    js: &'a JetStream,
    settings: &'a HistorySettings,
    flapping: &'a mut Flapping,
    keys: HashMap<String, Tracked>,
    /// The pin the server gave this writer, sent with every pull.
    pin: Option<String>,
    /// Whether the open tenures of keys with no message left were settled.
    settled: bool,
}

/// Why a change could not be recorded now.
enum Stuck {
    /// JetStream did not take the write: try the same change again.
    Retry(String),
    /// The history stream or the consumer is gone: provision again.
    Lost(String),
}

impl<'a> Session<'a> {
    fn new(js: &'a JetStream, settings: &'a HistorySettings, flapping: &'a mut Flapping) -> Self {
        Session {
            js,
            settings,
            flapping,
            keys: HashMap::new(),
            pin: None,
            settled: false,
        }
    }

    /// Pulls and records changes until `stop` (`Ok`) or a failure that
    /// needs provisioning again.
    async fn run(&mut self, stop: &CancellationToken) -> Result<(), String> {
        let mut pulls = self
            .js
            .pulls(STREAM, HISTORY_CONSUMER)
            .await
            .map_err(failed)?;
        let mut sweep = tokio::time::interval(FLAP_SWEEP);
        let mut left = self.pull(&pulls).await?;
        loop {
            let message = tokio::select! {
                () = stop.cancelled() => {
                    self.unpin().await;
                    return Ok(());
                }
                _ = sweep.tick() => {
                    self.flapping.sweep(OffsetDateTime::now_utc());
                    continue;
                }
                message = pulls.next() => message.map_err(failed)?,
            };
            match message.status.map(|status| status.as_u16()) {
                None | Some(200) => {}
                Some(100) => continue,
                // The pull expired with nothing more to hand out: caught up.
                Some(408) => {
                    self.settle().await;
                    left = self.pull(&pulls).await?;
                    continue;
                }
                // Another writer holds the pin now.
                Some(423) => {
                    self.unpinned();
                    left = self.pull(&pulls).await?;
                    continue;
                }
                Some(409) if is_pull_limit(&message) => {
                    left = self.pull(&pulls).await?;
                    continue;
                }
                Some(status) => {
                    let said = message.description.clone().unwrap_or_default();
                    return Err(format!("the history consumer answered {status} {said}"));
                }
            }
            self.pinned_by(&message);
            let delivery = self.take(&pulls, &message, stop).await?;
            if delivery.is_some_and(|d| d.pending == 0) {
                self.settle().await;
            }
            left -= 1;
            if left == 0 {
                left = self.pull(&pulls).await?;
            }
        }
    }

    /// Asks for the next changes; returns how many it asked for.
    async fn pull(&self, pulls: &Pulls) -> Result<u64, String> {
        let mut body = json!({
            "batch": BATCH,
            "expires": PULL_EXPIRES.as_nanos() as u64,
            "group": HISTORY_GROUP,
        });
        if let Some(pin) = &self.pin {
            body["id"] = json!(pin);
        }
        pulls.request(&body).await.map_err(failed)?;
        Ok(BATCH)
    }

    /// Learns the pin from a delivery that carries one. A new pin means
    /// another writer may have written meanwhile: what is known of every
    /// key is read back from the history.
    fn pinned_by(&mut self, message: &Message) {
        let pin = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get("Nats-Pin-Id"))
            .map(|pin| pin.as_str().to_string());
        if pin.is_some() && pin != self.pin {
            self.keys.clear();
            self.pin = pin;
        }
    }

    fn unpinned(&mut self) {
        self.pin = None;
        self.keys.clear();
    }

    /// Lets another gateway take over at once rather than after
    /// [`PIN_TIMEOUT`] (a gateway that stops cleanly).
    async fn unpin(&self) {
        if self.pin.is_none() {
            return;
        }
        let subject = format!("CONSUMER.UNPIN.{STREAM}.{HISTORY_CONSUMER}");
        if let Err(reason) = self
            .js
            .api(&subject, &json!({"group": HISTORY_GROUP}))
            .await
        {
            tracing::debug!(reason, "could not hand the history over on stopping");
        }
    }

    /// Records one delivered change and acknowledges it, retrying while
    /// JetStream does not take the writes; its delivery, if it was one.
    async fn take(
        &mut self,
        pulls: &Pulls,
        message: &Message,
        stop: &CancellationToken,
    ) -> Result<Option<Delivery>, String> {
        let Some(delivery) = message.reply.as_deref().and_then(Delivery::parse) else {
            return Err(format!(
                "a history change without a JetStream reply subject: {:?}",
                message.reply
            ));
        };
        let mut retry = RETRY_MIN;
        if let Some((key, change)) = change_of(message, &delivery) {
            loop {
                match self.record(&key, &change).await {
                    Ok(()) => break,
                    Err(Stuck::Lost(reason)) => return Err(reason),
                    Err(Stuck::Retry(reason)) => {
                        tracing::warn!(
                            key,
                            revision = change.revision,
                            reason,
                            "history write failed; retrying"
                        );
                        tokio::select! {
                            () = stop.cancelled() => return Ok(None),
                            () = tokio::time::sleep(retry) => retry = (retry * 2).min(RETRY_MAX),
                        }
                    }
                }
            }
        }
        if let Some(reply) = &message.reply {
            // Lost acks only hand the change out again, which writes nothing.
            let _ = pulls.ack(reply.clone()).await;
        }
        Ok(Some(delivery))
    }

    /// Writes the records `change` makes for `key`, reading the key's last
    /// record first if it is not known, and again after a lost
    /// compare-and-set.
    async fn record(&mut self, key: &str, change: &Change) -> Result<(), Stuck> {
        for _ in 0..4 {
            let mut tracked = match self.keys.remove(key) {
                Some(tracked) => tracked,
                None => self.load(key).await?,
            };
            let refresh = self.settings.max_age / 2;
            let written = tracked.history.apply(key, change.clone(), refresh);
            match self.write_all(key, &mut tracked, written).await? {
                true => {
                    self.remember(key, tracked);
                    return Ok(());
                }
                // Another writer wrote the key: go on from its record.
                false => continue,
            }
        }
        Err(Stuck::Retry(format!(
            "{key}'s history changed on every attempt"
        )))
    }

    /// Writes `written` in order; `false` if a compare-and-set was lost.
    async fn write_all(
        &mut self,
        key: &str,
        tracked: &mut Tracked,
        written: Vec<Written>,
    ) -> Result<bool, Stuck> {
        for write in written {
            match self.write(key, tracked.last_seq, &write.stored).await? {
                Some(seq) => {
                    tracked.last_seq = seq;
                    self.count(key, &write);
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    fn remember(&mut self, key: &str, tracked: Tracked) {
        if self.keys.len() >= KEYS {
            self.keys.clear();
        }
        self.keys.insert(key.to_string(), tracked);
    }

    /// Counts a record written: a tenure ended, a hand-over.
    fn count(&mut self, key: &str, written: &Written) {
        let tenure = &written.stored.tenure;
        if let (Some(end), Some(ended_at)) = (tenure.end, tenure.ended_at) {
            let held = (ended_at - tenure.acquired_at).max(time::Duration::ZERO);
            metrics::tenure_ended(end, held.try_into().unwrap_or_default());
        }
        if written.handover {
            metrics::handover(key);
            self.flapping.handover(key, OffsetDateTime::now_utc());
        }
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

    /// Ends the open tenures of keys the bucket has no message of any more
    /// (no gateway ran from their end until the end's own message was
    /// gone), once per session, when the writer has caught up.
    async fn settle(&mut self) {
        if self.settled {
            return;
        }
        match self.settle_all().await {
            Ok(settled) => {
                self.settled = true;
                if settled > 0 {
                    tracing::info!(settled, "ended tenures whose end the history had missed");
                }
            }
            Err(reason) => tracing::warn!(reason, "could not settle the history's open tenures"),
        }
    }

    async fn settle_all(&mut self) -> Result<usize, String> {
        let bucket = self
            .js
            .api(
                &format!("STREAM.INFO.{STREAM}"),
                &json!({"subjects_filter": format!("$KV.{BUCKET}.*")}),
            )
            .await?;
        if let Some(err) = api_error(&bucket) {
            return Err(err.description);
        }
        // Keys with more subjects than one page are not settled this time.
        let total = bucket["total"].as_u64().unwrap_or(0);
        let subjects = bucket["state"]["subjects"].as_object();
        if subjects.map_or(0, |s| s.len() as u64) < total {
            return Err(format!("the bucket has {total} keys, more than one page"));
        }
        let revision = bucket["state"]["last_seq"].as_u64().unwrap_or(0);
        let held = |key: &str| {
            subjects.is_some_and(|subjects| subjects.contains_key(&format!("$KV.{BUCKET}.{key}")))
        };
        let now = OffsetDateTime::now_utc();
        let mut settled = 0;
        for read in last_records(self.js, &format!("{HISTORY_PREFIX}.*")).await? {
            let key = read.stored.tenure.key.clone();
            if !read.stored.is_open() || held(&key) || read.stored.tenure.tenure > revision {
                continue;
            }
            let mut tracked = Tracked {
                history: KeyHistory::resume(Some((read.stored, read.at))),
                last_seq: read.seq,
            };
            let Some(written) = tracked.history.settle(revision, now) else {
                continue;
            };
            match self.write_all(&key, &mut tracked, vec![written]).await {
                Ok(true) => {
                    settled += 1;
                    self.keys.remove(&key);
                }
                // Another writer got to it first.
                Ok(false) => {
                    self.keys.remove(&key);
                }
                Err(Stuck::Lost(reason) | Stuck::Retry(reason)) => return Err(reason),
            }
        }
        Ok(settled)
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

/// A 409 that ends a pull without anything being wrong (a limit of the
/// pull was reached, or it was replaced).
fn is_pull_limit(message: &Message) -> bool {
    let said = message.description.as_deref().unwrap_or_default();
    said.contains("Exceeded") || said.contains("Leadership Change") || said.contains("Interest")
}

fn base64_decode(data: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| format!("a history record that is not base64: {err}"))
}

/// The key and the change a delivered message of the bucket is; `None`
/// for a message that is no change of a lease (logged when unreadable).
fn change_of(message: &Message, delivery: &Delivery) -> Option<(String, Change)> {
    let key = message
        .subject
        .as_str()
        .strip_prefix(&format!("$KV.{BUCKET}."))?
        .to_string();
    let headers = message.headers.as_ref();
    let header = |name: &str| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
    let (revision, at) = (delivery.stream_seq, delivery.stored_at);
    let entry = match decode_entry(revision, at, header, &message.payload) {
        Ok(entry) => entry,
        Err(reason) => {
            tracing::warn!(key, revision, reason, "a record the history cannot read");
            return None;
        }
    };
    let seen = match entry {
        Entry::Held {
            renewed: false,
            record,
            ..
        } => Seen::Started {
            last: LastWrite {
                ttl_ms: record.ttl_ms,
                written_at: record.written_at,
            },
            holder: record.holder,
            acquired_at: record.acquired_at,
            from: record.previous_holder,
            replaced: record.prev,
        },
        Entry::Held { record, .. } => Seen::Renewed {
            tenure: record.tenure,
            renewals: record.renewals,
            last: LastWrite {
                ttl_ms: record.ttl_ms,
                written_at: record.written_at,
            },
            holder: record.holder,
            acquired_at: record.acquired_at,
        },
        Entry::Free {
            released: Some(tombstone),
            ..
        } => Seen::Freed {
            end: tombstone.end(),
            told: Some(Told {
                holder: tombstone.holder,
                tenure: tombstone.tenure,
                acquired_at: tombstone.acquired_at,
                renewals: tombstone.renewals,
            }),
        },
        // The server's expiry marker, or a delete by a KV tool (an
        // operator's hand, like a revoke).
        Entry::Free { released: None, .. } => Seen::Freed {
            end: if header(HEADER_MARKER_REASON).is_some() {
                TenureEnd::Expired
            } else {
                TenureEnd::Revoked
            },
            told: None,
        },
    };
    Some((key, Change { revision, at, seen }))
}
