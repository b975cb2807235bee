//! The history writer: every gateway runs one; the bucket's history
//! consumer hands the changes to one of them at a time (its pinned
//! client), which writes each tenure's records to the history stream
//! (docs/protocol.md, Tenure history).
//!
//! Keys are written side by side, each key's changes in the bucket's
//! order: changes of a key that arrive while its records are being written
//! wait, and are then written together (a tenure that started and ended
//! among them, once). A change is acknowledged only once its records are
//! written (`key_writes` makes each write exactly once).

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::{Message, Subject};
use foldhash::{HashMap, HashMapExt};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::json;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::changes::change_of;
use super::derive::{Change, KeyHistory, Seen, Written};
use super::flapping::Flapping;
use super::key_writes::{KeyWrites, Stuck, Tracked};
use super::reads::{failed, last_records};
use super::stream;
use crate::metrics;
use crate::settings::HistorySettings;
use crate::store::jsapi::{JetStream, Pulls, api_error};
use crate::store::pull::Delivery;
use dagnats_leases_wire::names::{BUCKET, HISTORY_CONSUMER, HISTORY_GROUP, HISTORY_PREFIX, STREAM};

/// Changes asked for in one pull.
const BATCH: u64 = 256;
/// How long a pull waits for changes: well within the consumer's pin
/// timeout, so the pinned writer keeps its pin while the bucket is idle.
const PULL_EXPIRES: Duration = Duration::from_secs(2);
/// Bound on idle keys whose history is kept in memory; past it, it starts
/// over (each key's is read back from its last record when next needed).
const KEYS: usize = 100_000;
/// Retry delays while the history cannot be written.
const RETRY_MIN: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(2);
/// How long a key's writes wait after a change that starts a tenure: a
/// tenure that ends within it is written once, ended, rather than twice.
const OPEN_DELAY: Duration = Duration::from_millis(100);
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
    let writes = KeyWrites {
        js: js.clone(),
        refresh: settings.max_age / 2,
    };
    loop {
        let outcome = match stream::provision(&js, settings.max_age).await {
            Ok(_) => {
                provisioned.send_if_modified(|now| replace(now, Ok(())));
                Session::new(&writes, &mut flapping).run(&stop).await
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

/// A delivered change, and how to acknowledge its message.
struct Taken {
    change: Change,
    ack: Subject,
}

/// The writes of one key's changes, done: what the history now knows of
/// the key and the records written, or why not.
struct Done {
    key: String,
    outcome: Result<(Tracked, Vec<Written>), Stuck>,
    taken: Vec<Taken>,
}

/// One consumer subscription, from provisioning until it fails or stops.
struct Session<'a> {
    writes: &'a KeyWrites,
    flapping: &'a mut Flapping,
    /// What is known of keys with no writes in flight.
    idle: HashMap<String, Tracked>,
    /// Keys with writes in flight or due, and the changes waiting for them.
    busy: HashMap<String, VecDeque<Taken>>,
    /// Keys whose writes wait until a moment ([`OPEN_DELAY`] after the
    /// change that started a tenure), in the order they are due.
    deferred: VecDeque<(tokio::time::Instant, String)>,
    in_flight: FuturesUnordered<BoxFuture<'static, Done>>,
    /// The pin the server gave this writer, sent with every pull.
    pin: Option<String>,
    /// Whether the consumer said it had nothing more when last asked.
    caught_up: bool,
    /// Whether the open tenures of keys with no message left were settled.
    settled: bool,
}

impl<'a> Session<'a> {
    fn new(writes: &'a KeyWrites, flapping: &'a mut Flapping) -> Self {
        Session {
            writes,
            flapping,
            idle: HashMap::new(),
            busy: HashMap::new(),
            deferred: VecDeque::new(),
            in_flight: FuturesUnordered::new(),
            pin: None,
            caught_up: false,
            settled: false,
        }
    }

    /// Pulls and records changes until `stop` (`Ok`) or a failure that
    /// needs provisioning again.
    async fn run(&mut self, stop: &CancellationToken) -> Result<(), String> {
        let mut pulls = self
            .writes
            .js
            .pulls(STREAM, HISTORY_CONSUMER)
            .await
            .map_err(failed)?;
        let mut sweep = tokio::time::interval(FLAP_SWEEP);
        let mut left = pull(&pulls, self.pin.as_deref()).await?;
        loop {
            if self.caught_up && self.in_flight.is_empty() && self.deferred.is_empty() {
                self.settle().await;
            }
            let message = tokio::select! {
                () = stop.cancelled() => {
                    if self.pin.is_some() {
                        unpin(&self.writes.js).await;
                    }
                    return Ok(());
                }
                _ = sweep.tick() => {
                    self.flapping.sweep(OffsetDateTime::now_utc());
                    continue;
                }
                Some(done) = self.in_flight.next() => {
                    self.finish(&pulls, done).await?;
                    continue;
                }
                () = sleep_until_first(&self.deferred), if !self.deferred.is_empty() => {
                    if let Some((_, key)) = self.deferred.pop_front() {
                        let waiting = self.busy.get_mut(&key).map(std::mem::take);
                        self.start(key, waiting.unwrap_or_default().into(), Duration::ZERO);
                    }
                    continue;
                }
                message = pulls.next() => message.map_err(failed)?,
            };
            match message.status.map(|status| status.as_u16()) {
                None | Some(200) => {}
                Some(100) => continue,
                // The pull expired with nothing more to hand out: caught up.
                Some(408) => {
                    self.caught_up = true;
                    left = pull(&pulls, self.pin.as_deref()).await?;
                    continue;
                }
                // Another writer holds the pin now.
                Some(423) => {
                    self.pin = None;
                    self.idle.clear();
                    left = pull(&pulls, self.pin.as_deref()).await?;
                    continue;
                }
                Some(409) if is_pull_limit(&message) => {
                    left = pull(&pulls, self.pin.as_deref()).await?;
                    continue;
                }
                Some(status) => {
                    let said = message.description.clone().unwrap_or_default();
                    return Err(format!("the history consumer answered {status} {said}"));
                }
            }
            self.pinned_by(&message);
            self.take(&pulls, &message).await?;
            left -= 1;
            if left == 0 {
                left = pull(&pulls, self.pin.as_deref()).await?;
            }
        }
    }

    /// Learns the pin from a delivery that carries one. A new pin means
    /// another writer may have written meanwhile: what is known of the
    /// idle keys is read back from the history.
    fn pinned_by(&mut self, message: &Message) {
        let pin = message
            .headers
            .as_ref()
            .and_then(|headers| headers.get("Nats-Pin-Id"))
            .map(|pin| pin.as_str().to_string());
        if pin.is_some() && pin != self.pin {
            self.idle.clear();
            self.pin = pin;
        }
    }

    /// Takes one delivered change: its key's writes start now, or once
    /// those in flight are done.
    async fn take(&mut self, pulls: &Pulls, message: &Message) -> Result<(), String> {
        let (Some(ack), Some(delivery)) = (
            message.reply.clone(),
            message.reply.as_deref().and_then(Delivery::parse),
        ) else {
            return Err(format!(
                "a history change without a JetStream reply subject: {:?}",
                message.reply
            ));
        };
        self.caught_up = delivery.pending == 0;
        let Some((key, change)) = change_of(message, &delivery) else {
            // Nothing the history records: done with.
            let _ = pulls.ack(ack).await;
            return Ok(());
        };
        // Most changes (renews of a tenure the writer knows) write
        // nothing: done with at once, without a task of their own.
        if !self.busy.contains_key(&key)
            && let Some(tracked) = self.idle.get_mut(&key)
        {
            let mut trial = tracked.history.clone();
            if trial
                .apply(&key, change.clone(), self.writes.refresh)
                .is_empty()
            {
                tracked.history = trial;
                let _ = pulls.ack(ack).await;
                return Ok(());
            }
        }
        let starts = starts_a_tenure(&change);
        let taken = Taken { change, ack };
        match self.busy.get_mut(&key) {
            Some(waiting) => waiting.push_back(taken),
            None if starts => {
                self.busy.insert(key.clone(), VecDeque::from([taken]));
                let due = tokio::time::Instant::now() + OPEN_DELAY;
                self.deferred.push_back((due, key));
            }
            None => self.start(key, vec![taken], Duration::ZERO),
        }
        Ok(())
    }

    /// Starts writing `taken`, `key`'s changes, after `delay`.
    fn start(&mut self, key: String, taken: Vec<Taken>, delay: Duration) {
        let tracked = self.idle.remove(&key);
        self.busy.entry(key.clone()).or_default();
        let writes = self.writes.clone();
        self.in_flight.push(Box::pin(async move {
            tokio::time::sleep(delay).await;
            let changes: Vec<Change> = taken.iter().map(|t| t.change.clone()).collect();
            let outcome = writes.record(&key, tracked, &changes).await;
            Done {
                key,
                outcome,
                taken,
            }
        }));
    }

    /// Acknowledges a key's changes once written, counts what was
    /// written, and starts the key's next changes; the same ones again
    /// later if they could not be written.
    async fn finish(&mut self, pulls: &Pulls, done: Done) -> Result<(), String> {
        let Done {
            key,
            outcome,
            taken,
        } = done;
        match outcome {
            Ok((tracked, written)) => {
                for record in &written {
                    self.count(&key, record);
                }
                for taken in taken {
                    // Lost acks only hand the change out again, which
                    // writes nothing.
                    let _ = pulls.ack(taken.ack).await;
                }
                let waiting = self.busy.remove(&key).unwrap_or_default();
                if waiting.is_empty() {
                    if self.idle.len() >= KEYS {
                        self.idle.clear();
                    }
                    self.idle.insert(key, tracked);
                } else {
                    self.idle.insert(key.clone(), tracked);
                    self.start(key, waiting.into(), Duration::ZERO);
                }
                Ok(())
            }
            Err(Stuck::Lost(reason)) => Err(reason),
            Err(Stuck::Retry(reason)) => {
                tracing::warn!(key, reason, "history write failed; retrying");
                let waiting = self.busy.remove(&key).unwrap_or_default();
                let again = taken.into_iter().chain(waiting).collect();
                self.start(key, again, RETRY_MIN);
                Ok(())
            }
        }
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

    /// Ends the open tenures of keys the bucket has no message of any more
    /// (no gateway ran from their end until the end's own message was
    /// gone), once per session, when the writer has caught up.
    async fn settle(&mut self) {
        if self.settled {
            return;
        }
        self.settled = true;
        match self.settle_all().await {
            Ok(settled) => {
                if settled > 0 {
                    tracing::info!(settled, "ended tenures whose end the history had missed");
                }
            }
            Err(reason) => tracing::warn!(reason, "could not settle the history's open tenures"),
        }
    }

    async fn settle_all(&mut self) -> Result<usize, String> {
        let writes = self.writes;
        let js = &writes.js;
        let asked = json!({"subjects_filter": format!("$KV.{BUCKET}.*")});
        let bucket = js.api(&format!("STREAM.INFO.{STREAM}"), &asked).await?;
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
        for read in last_records(js, &format!("{HISTORY_PREFIX}.*")).await? {
            let key = read.stored.tenure.key.clone();
            let started_after = read.stored.tenure.tenure > revision;
            if !read.stored.is_open() || held(&key) || started_after {
                continue;
            }
            let mut tracked = Tracked {
                history: KeyHistory::resume(Some((read.stored, read.at))),
                last_seq: read.seq,
            };
            let Some(written) = tracked.history.settle(revision, now) else {
                continue;
            };
            // Read back when next needed, whoever wrote it.
            self.idle.remove(&key);
            match self
                .writes
                .write_all(&key, &mut tracked, vec![written])
                .await
            {
                Ok(Some(written)) => {
                    settled += 1;
                    written.iter().for_each(|record| self.count(&key, record));
                }
                // Another writer got to it first.
                Ok(None) => {}
                Err(Stuck::Lost(reason) | Stuck::Retry(reason)) => return Err(reason),
            }
        }
        Ok(settled)
    }
}

/// Whether `change` starts a tenure.
fn starts_a_tenure(change: &Change) -> bool {
    matches!(change.seen, Seen::Started { .. })
}

/// Completes when the first of `deferred` is due.
async fn sleep_until_first(deferred: &VecDeque<(tokio::time::Instant, String)>) {
    if let Some((due, _)) = deferred.front() {
        tokio::time::sleep_until(*due).await;
    }
}

/// Asks for the next changes, as the writer pinned as `pin` if it is;
/// returns how many it asked for.
async fn pull(pulls: &Pulls, pin: Option<&str>) -> Result<u64, String> {
    let mut body = json!({
        "batch": BATCH,
        "expires": PULL_EXPIRES.as_nanos() as u64,
        "group": HISTORY_GROUP,
    });
    if let Some(pin) = pin {
        body["id"] = json!(pin);
    }
    pulls.request(&body).await.map_err(failed)?;
    Ok(BATCH)
}

/// Lets another gateway take over at once rather than after the pin
/// timeout (a gateway that stops cleanly).
async fn unpin(js: &JetStream) {
    let subject = format!("CONSUMER.UNPIN.{STREAM}.{HISTORY_CONSUMER}");
    let body = json!({"group": HISTORY_GROUP});
    if let Err(reason) = js.api(&subject, &body).await {
        tracing::debug!(reason, "could not hand the history over on stopping");
    }
}

/// A 409 that ends a pull without anything being wrong (a limit of the
/// pull was reached, or it was replaced).
fn is_pull_limit(message: &Message) -> bool {
    let said = message.description.as_deref().unwrap_or_default();
    said.contains("Exceeded") || said.contains("Leadership Change") || said.contains("Interest")
}
