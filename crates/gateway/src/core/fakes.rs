//! In-memory fakes of the core's seams, for fast unit tests of its decision
//! logic. Every rule they test also has its test against a real nats-server
//! (`crates/gateway/tests/`); these only make the logic checkable without
//! one.
//!
//! [`FakeRecords`] is a bucket with one message per key: a write lands only
//! if the key's last sequence is the one expected, and every landed write
//! takes the next sequence of the whole bucket, as a stream's does. Written
//! messages are decoded by the same `decode_entry` as real ones. TTLs are
//! data only: nothing expires unless a test says so ([`FakeRecords::expire`]).
//!
//! [`FakeHop`] answers each forward attempt from a script and records what
//! was sent.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use time::OffsetDateTime;

use super::lease_core::LeaseCore;
use super::ports::{Availability, HopOutcome, OwnerHop, Records, Snapshot, StoreError, Write};
use dagnats_leases_wire::names::{HEADER_EVENT, HEADER_KV_OPERATION};
use dagnats_leases_wire::record::{Entry, LeaseRecord, RECORD_VERSION, WriteEvent, decode_entry};

/// A core over fresh fakes, and the fakes, to script and inspect.
pub(super) fn core(max_payload: usize) -> (LeaseCore, Arc<FakeRecords>, Arc<FakeHop>) {
    let records = Arc::new(FakeRecords::default());
    let hop = Arc::new(FakeHop::new(max_payload));
    let core = LeaseCore::new(records.clone(), hop.clone());
    (core, records, hop)
}

/// A request of type `T` from JSON, validated as a front would.
pub(super) fn request<T: serde::de::DeserializeOwned>(json: Value) -> T {
    serde_json::from_value(json).expect("a valid request")
}

/// What the next writes do, besides the compare-and-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum WriteScript {
    /// Land when the expected sequence is the key's last one.
    #[default]
    Normal,
    /// Refuse every write as a conflict, whatever the key holds (another
    /// write on the key is always in flight).
    AlwaysConflict,
    /// Land the next write, then lose its reply: the caller hears
    /// `unavailable`. Back to `Normal` afterwards.
    LoseNextReply,
    /// Writes with a send-by wait in the gateway's queue past it and are
    /// never sent (overload); others land as usual.
    NotSentInTime,
    /// Nothing takes any write: the stream is electing a leader.
    NoListener,
}

#[derive(Default)]
struct State {
    seq: u64,
    entries: HashMap<String, Entry>,
    /// Keys whose last message does not parse, at that message's sequence.
    corrupt: HashMap<String, u64>,
    /// The TTL (whole seconds) the key's last landed write carried.
    ttls: HashMap<String, u64>,
    reads: usize,
    /// Checks that a key is still at a revision ([`Records::still_at`]).
    barriers: usize,
    writes: usize,
    script: WriteScript,
    /// A landed write is acknowledged only once the wall clock passes this.
    ack_not_before: Option<OffsetDateTime>,
    /// The highest revision the core reported from change events.
    saw: u64,
    /// How long each read and write takes to answer.
    round_trip: Duration,
    /// Checks of the bucket the core asked for.
    repairs: usize,
}

/// The bucket, in memory.
#[derive(Default)]
pub(super) struct FakeRecords {
    state: Mutex<State>,
}

impl FakeRecords {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake records lock")
    }

    /// What the next writes do.
    pub(super) fn script(&self, script: WriteScript) {
        self.state().script = script;
    }

    /// Every read, check and write from now on answers `round_trip` after it
    /// was asked.
    pub(super) fn round_trip(&self, round_trip: Duration) {
        self.state().round_trip = round_trip;
    }

    /// Holds back the acknowledgement of landed writes until `at`.
    pub(super) fn ack_not_before(&self, at: OffsetDateTime) {
        self.state().ack_not_before = Some(at);
    }

    /// The TTL in whole seconds the key's last write through the core
    /// carried.
    pub(super) fn ttl_secs(&self, key: &str) -> Option<u64> {
        self.state().ttls.get(key).copied()
    }

    /// The highest revision the core passed on from change events.
    pub(super) fn saw_revision(&self) -> u64 {
        self.state().saw
    }

    /// Reads so far.
    pub(super) fn reads(&self) -> usize {
        self.state().reads
    }

    /// Checks that a key is still at a revision, so far.
    pub(super) fn barriers(&self) -> usize {
        self.state().barriers
    }

    /// Checks of the bucket asked for so far.
    pub(super) fn repairs(&self) -> usize {
        self.state().repairs
    }

    /// Write attempts so far (landed or not).
    pub(super) fn writes(&self) -> usize {
        self.state().writes
    }

    /// The key's last entry.
    pub(super) fn entry(&self, key: &str) -> Option<Entry> {
        self.state().entries.get(key).cloned()
    }

    /// Writes an acquire by another gateway: `holder` holds `key` for
    /// `ttl_ms` from `written_at`. Returns its revision.
    pub(super) fn hold(
        &self,
        key: &str,
        holder: &str,
        ttl_ms: u64,
        written_at: OffsetDateTime,
    ) -> u64 {
        let mut state = self.state();
        state.seq += 1;
        let seq = state.seq;
        let record = LeaseRecord {
            v: RECORD_VERSION,
            holder: holder.to_string(),
            ttl_ms,
            acquired_at: written_at,
            written_at,
            prev: 0,
            previous_holder: None,
            principal: None,
            tenure: None,
            renewals: 0,
        };
        let entry = Entry::Held {
            seq,
            renewed: false,
            record,
            stored_at: written_at,
        };
        state.corrupt.remove(key);
        state.entries.insert(key.to_string(), entry);
        seq
    }

    /// A message on `key` that is no record at all (written by some other
    /// tool). Returns its revision.
    pub(super) fn corrupt(&self, key: &str) -> u64 {
        let mut state = self.state();
        state.seq += 1;
        let seq = state.seq;
        state.entries.remove(key);
        state.corrupt.insert(key.to_string(), seq);
        seq
    }

    /// The server's expiry marker for `key`. Returns its revision.
    pub(super) fn expire(&self, key: &str) -> u64 {
        let mut state = self.state();
        state.seq += 1;
        let seq = state.seq;
        let entry = Entry::Free {
            seq,
            released: None,
        };
        state.corrupt.remove(key);
        state.entries.insert(key.to_string(), entry);
        seq
    }

    /// The key's last message expires too (a marker or tombstone past its
    /// own TTL): the key has no message left.
    pub(super) fn vanish(&self, key: &str) {
        self.state().entries.remove(key);
    }

    /// Applies one write under the compare-and-set; `Ok` carries whether
    /// its reply is lost and when it may be acknowledged.
    fn apply(
        &self,
        key: &str,
        expected: u64,
        write: &Write,
    ) -> Result<(u64, bool, Option<OffsetDateTime>), StoreError> {
        let mut state = self.state();
        state.writes += 1;
        if state.script == WriteScript::AlwaysConflict {
            return Err(StoreError::Conflict);
        }
        if state.script == WriteScript::NotSentInTime && write.send_by.is_some() {
            return Err(StoreError::TooLate);
        }
        if state.script == WriteScript::NoListener {
            return Err(StoreError::NoListener);
        }
        let last = match state.corrupt.get(key) {
            Some(&seq) => seq,
            None => state.entries.get(key).map_or(0, entry_seq),
        };
        if last != expected {
            return Err(StoreError::Conflict);
        }
        state.seq += 1;
        let seq = state.seq;
        let operation = (write.event == WriteEvent::Released).then_some("PURGE");
        let header = |name: &str| match name {
            HEADER_EVENT => Some(write.event.as_str()),
            HEADER_KV_OPERATION => operation,
            _ => None,
        };
        let entry = decode_entry(seq, OffsetDateTime::now_utc(), header, &write.body)
            .map_err(|cause| StoreError::Corrupt { seq, cause })?;
        state.corrupt.remove(key);
        state.entries.insert(key.to_string(), entry);
        state.ttls.insert(key.to_string(), write.ttl_secs);
        let lost = state.script == WriteScript::LoseNextReply;
        if lost {
            state.script = WriteScript::Normal;
        }
        Ok((seq, lost, state.ack_not_before))
    }
}

/// Waits out a scripted round trip; none by default, so the other tests
/// never touch the timer.
async fn answer_after(round_trip: Duration) {
    if !round_trip.is_zero() {
        tokio::time::sleep(round_trip).await;
    }
}

fn entry_seq(entry: &Entry) -> u64 {
    match entry {
        Entry::Held { seq, .. } | Entry::Free { seq, .. } => *seq,
    }
}

impl Records for FakeRecords {
    fn availability(&self) -> Availability {
        Availability::Ready
    }

    fn last<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        let round_trip = self.state().round_trip;
        let entry = {
            let mut state = self.state();
            state.reads += 1;
            match state.corrupt.get(key) {
                Some(&seq) => Err(StoreError::Corrupt {
                    seq,
                    cause: format!("corrupt record at revision {seq}"),
                }),
                None => Ok(state.entries.get(key).cloned()),
            }
        };
        async move {
            answer_after(round_trip).await;
            entry
        }
        .boxed()
    }

    fn still_at<'a>(
        &'a self,
        key: &'a str,
        revision: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let round_trip = self.state().round_trip;
        let current = {
            let mut state = self.state();
            state.barriers += 1;
            state.entries.get(key).map_or(0, entry_seq)
        };
        async move {
            answer_after(round_trip).await;
            Ok(current == revision)
        }
        .boxed()
    }

    fn write<'a>(
        &'a self,
        key: &'a str,
        expected: u64,
        write: Write,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let round_trip = self.state().round_trip;
        let applied = self.apply(key, expected, &write);
        async move {
            answer_after(round_trip).await;
            let (seq, lost, ack_not_before) = applied?;
            if let Some(at) = ack_not_before {
                // Waits on the wall clock, which the core's expiry check reads.
                while OffsetDateTime::now_utc() < at {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            if lost {
                return Err(StoreError::Unavailable(
                    "JetStream did not answer within 4000 ms".into(),
                ));
            }
            Ok(seq)
        }
        .boxed()
    }

    fn entries(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        let state = self.state();
        let held = state
            .entries
            .iter()
            .map(|(key, entry)| (key.clone(), Ok(entry.clone())));
        let corrupt = state.corrupt.iter().map(|(key, &seq)| {
            let cause = format!("corrupt record at revision {seq}");
            (key.clone(), Err(StoreError::Corrupt { seq, cause }))
        });
        let entries = Arc::new(held.chain(corrupt).collect());
        async move { Ok(entries) }.boxed()
    }

    fn request_repair(&self) {
        self.state().repairs += 1;
    }

    fn saw(&self, revision: u64) {
        let mut state = self.state();
        state.saw = state.saw.max(revision);
    }
}

/// One forward attempt as the fake hop received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Sent {
    pub(super) holder: String,
    /// The principal the holder's tenure belongs to (under a policy).
    pub(super) principal: Option<String>,
    pub(super) key: String,
    pub(super) fence: u64,
    pub(super) payload: Bytes,
}

type Step = Box<dyn FnOnce() -> HopOutcome + Send>;

/// The owner hop, answering from a script.
pub(super) struct FakeHop {
    max_payload: usize,
    script: Mutex<VecDeque<Step>>,
    sent: Mutex<Vec<Sent>>,
}

/// What the fake hop adds to every request, whatever the fence.
pub(super) const FAKE_OVERHEAD: usize = 32;

impl FakeHop {
    fn new(max_payload: usize) -> Self {
        FakeHop {
            max_payload,
            script: Mutex::default(),
            sent: Mutex::default(),
        }
    }

    /// The next attempts answer `outcomes`, in order.
    pub(super) fn answer(&self, outcomes: impl IntoIterator<Item = HopOutcome>) {
        for outcome in outcomes {
            self.then(move || outcome);
        }
    }

    /// The next attempt runs `step` (which may change the records) and
    /// answers what it returns.
    pub(super) fn then(&self, step: impl FnOnce() -> HopOutcome + Send + 'static) {
        self.script
            .lock()
            .expect("script")
            .push_back(Box::new(step));
    }

    /// Every attempt so far.
    pub(super) fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("sent").clone()
    }
}

impl OwnerHop for FakeHop {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn overhead(&self, _fence: u64) -> usize {
        FAKE_OVERHEAD
    }

    fn send<'a>(
        &'a self,
        (holder, principal): (&'a str, Option<&'a str>),
        key: &'a str,
        fence: u64,
        payload: Bytes,
        _timeout: Duration,
    ) -> BoxFuture<'a, HopOutcome> {
        self.sent.lock().expect("sent").push(Sent {
            holder: holder.to_string(),
            principal: principal.map(str::to_string),
            key: key.to_string(),
            fence,
            payload,
        });
        let step = self.script.lock().expect("script").pop_front();
        let outcome = step.map_or_else(|| HopOutcome::Failed("script ran out".into()), |s| s());
        async move { outcome }.boxed()
    }
}
