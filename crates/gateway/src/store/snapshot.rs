//! Every key's last entry at once, for list and SSE resume: one consumer
//! that delivers the last message of each subject, confirmed current once
//! for the whole answer. The barrier (`bucket.rs`) is acknowledged at `B`
//! before the consumer is made, and the consumer serves the list only if
//! the messages it started from hold the lists' barrier at `B` or later;
//! else another consumer is tried. Why that proves the list current:
//! docs/operations.md, "What a node failure does", and docs/design.md,
//! "Lists".

use std::time::Duration;

use async_nats::Message;
use foldhash::{HashMap, HashMapExt};
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use tokio::time::Instant;

use super::jsapi::{ApiError, Failure, JetStream, code};
use super::pull::{Delivery, Pulled, Stall, ToTheEnd};
use crate::metrics;
use dagnats_leases_wire::names::{LIST_BARRIER_SUBJECT, STREAM, key_subject};
use dagnats_leases_wire::record::{ENTRY_HEADERS, Entry, decode_entry};

/// One key of a snapshot: its last message's sequence, and the entry that
/// message holds or why it does not parse.
pub(super) type Listed = (String, u64, Result<Entry, String>);

/// How long the server keeps a consumer nobody reads, should its delete
/// be lost.
const INACTIVE: Duration = Duration::from_secs(30);

/// How long a list keeps making consumers while each one started on a
/// node behind the barrier, was refused while the JetStream cluster had no
/// meta leader, or had nobody answering its pull: the server puts each
/// consumer on a random replica, and one outside the write's quorum, or
/// restoring a snapshot after a partition, can trail the leader.
const CATCH_UP: Duration = Duration::from_secs(2);
/// Consumers tried however long they took: one made on a slow node may
/// use up [`CATCH_UP`] alone, and each new one lands elsewhere with
/// probability 2/3 at R3.
const MIN_TRIES: u32 = 4;
/// The pause after the first consumer that could not serve the list, doubled
/// after each next one up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// The last entry of every key, from the moment the stream reached at
/// least `barrier` (the acknowledged barrier's sequence).
pub(super) async fn entries(jetstream: &JetStream, barrier: u64) -> Result<Vec<Listed>, Failure> {
    let started = Instant::now();
    let mut tries = Tries::default();
    loop {
        let why = match attempt(jetstream, barrier).await {
            Err(err) => {
                metrics::list_consumer("failed");
                return Err(err);
            }
            Ok(Attempt::Listed(entries)) => {
                metrics::list_consumer("listed");
                return Ok(entries);
            }
            Ok(Attempt::Again(why)) => why,
        };
        metrics::list_consumer(why.label());
        let Some(pause) = tries.failed(started.elapsed()) else {
            return Err(Failure::Failed(format!(
                "no consumer could serve it within {} tries and {} ms; the last {why}",
                tries.made,
                started.elapsed().as_millis()
            )));
        };
        tracing::debug!(barrier, tries = tries.made, "a list's consumer {why}");
        tokio::time::sleep(pause).await;
    }
}

/// What one consumer came to.
enum Attempt {
    Listed(Vec<Listed>),
    Again(Unserved),
}

/// Why one consumer could not serve a list where another may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unserved {
    /// Its node had not reached the barrier when it started.
    Behind,
    /// JetStream refused to make it while electing a meta leader.
    NoMetaLeader,
    /// Its pulls could not reach the end of the stream.
    Pull(Stall),
}

impl Unserved {
    /// Its label on `dagnats_list_consumers_total`.
    fn label(self) -> &'static str {
        match self {
            Unserved::Behind => "behind",
            Unserved::NoMetaLeader => "no_meta_leader",
            Unserved::Pull(stall) => stall.label(),
        }
    }
}

impl std::fmt::Display for Unserved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unserved::Behind => f.write_str("started on a node behind the stream leader"),
            Unserved::NoMetaLeader => {
                f.write_str("was refused: JetStream system temporarily unavailable")
            }
            Unserved::Pull(stall) => stall.fmt(f),
        }
    }
}

/// Whether a list makes another consumer after one could not serve the list.
#[derive(Default)]
struct Tries {
    made: u32,
}

impl Tries {
    /// After a consumer could not serve the list, `elapsed` into it: the pause
    /// before the next one, or `None` to give up.
    fn failed(&mut self, elapsed: Duration) -> Option<Duration> {
        self.made += 1;
        let pause = (FIRST_PAUSE * 2u32.saturating_pow(self.made - 1)).min(MAX_PAUSE);
        (self.made < MIN_TRIES || elapsed + pause <= CATCH_UP).then_some(pause)
    }
}

/// The answer to `CONSUMER.CREATE`: the consumer's name and how many
/// messages it starts from, or why there is none.
#[derive(Deserialize)]
struct Created {
    #[serde(default)]
    name: String,
    #[serde(default)]
    num_pending: u64,
    error: Option<ApiError>,
}

/// The list's consumer: every message of the stream, which keeps one per
/// subject, so each key's last, the lists' barrier's (it tells how far the
/// stream got) and the reads' barrier's (skipped), in the server's memory
/// on one replica, never acknowledged. Unfiltered, the server walks the
/// stream without matching subjects.
fn consumer_config() -> Value {
    json!({
        "deliver_policy": "all",
        "ack_policy": "none",
        "mem_storage": true,
        "num_replicas": 1,
        "inactive_threshold": INACTIVE.as_nanos() as u64,
    })
}

/// [`entries`] from one consumer, unless its node had not reached
/// `barrier` when the consumer started, or it could not be made for now.
async fn attempt(jetstream: &JetStream, barrier: u64) -> Result<Attempt, Failure> {
    let request = json!({"stream_name": STREAM, "config": consumer_config(), "action": "create"});
    let reply = jetstream
        .api(&format!("CONSUMER.CREATE.{STREAM}"), &request)
        .await
        .map_err(|reason| Failure::Failed(format!("creating a consumer: {reason}")))?;
    let created: Created = serde_json::from_value(reply)
        .map_err(|err| Failure::Unexpected(format!("consumer create reply: {err}")))?;
    match created.error {
        None => {}
        Some(err) if err.err_code == code::CLUSTER_NOT_AVAILABLE => {
            return Ok(Attempt::Again(Unserved::NoMetaLeader));
        }
        Some(err) => {
            return Err(Failure::Failed(format!(
                "creating a consumer: {}",
                err.description
            )));
        }
    }
    if created.name.is_empty() {
        return Err(Failure::Unexpected(
            "consumer create reply without a name".into(),
        ));
    }
    let name = created.name;
    let mut start = StartSet::new(created.num_pending, barrier);
    let prefix = key_subject("");
    // Each key's latest message: its sequence, when it was stored, itself.
    let mut last: HashMap<String, (u64, OffsetDateTime, Box<Message>)> = HashMap::new();
    let mut delivered = 0;
    // `Some(why)` when this consumer could not serve the list but another may.
    let outcome = match ToTheEnd::start(jetstream, &name).await {
        Err(err) => Err(err),
        Ok(mut pull) => loop {
            let (next, delivery) = match pull.next().await {
                Err(err) => break Err(err),
                Ok(Pulled::Again(why)) => break Ok(Some(Unserved::Pull(why))),
                Ok(Pulled::End) => break Ok(None),
                Ok(Pulled::Message(message, delivery)) => (message, delivery),
            };
            let Delivery {
                stream_seq: seq,
                consumer_seq: number,
                stored_at,
                ..
            } = delivery;
            // Without acks nothing is sent again: a message missing from the
            // run (the consumer's own sequence skips) would leave a key out.
            delivered += 1;
            if number != delivered {
                break Err(Failure::Failed(format!(
                    "message {delivered} of the consumer did not arrive"
                )));
            }
            start.saw(number, next.subject.as_str(), seq);
            // A key is one token under the KV's prefix: the barriers are
            // elsewhere, and earlier gateways' had two (until purged).
            if let Some(key) = next.subject.as_str().strip_prefix(prefix.as_str())
                && !key.contains('.')
            {
                last.insert(key.to_string(), (seq, stored_at, next));
            }
            // A start set without the barrier is discarded: no need to wait
            // for the node to catch up first.
            if start.behind(number) {
                break Ok(None);
            }
        },
    };
    // Gone at once rather than after its inactivity threshold; a failed
    // delete leaves that to the server.
    let jetstream = jetstream.clone();
    tokio::spawn(async move {
        let _ = jetstream
            .api(&format!("CONSUMER.DELETE.{STREAM}.{name}"), &json!({}))
            .await;
    });
    if let Some(why) = outcome? {
        return Ok(Attempt::Again(why));
    }
    if !start.current {
        return Ok(Attempt::Again(Unserved::Behind));
    }
    Ok(Attempt::Listed(
        last.into_iter()
            .map(|(key, (seq, stored_at, message))| {
                let entry = decode(seq, stored_at, &message);
                (key, seq, entry)
            })
            .collect(),
    ))
}

/// Whether the consumer's start set (the first `len` messages: each
/// subject's last as its node held them) reached the barrier.
struct StartSet {
    len: u64,
    barrier: u64,
    current: bool,
}

impl StartSet {
    fn new(len: u64, barrier: u64) -> Self {
        StartSet {
            len,
            barrier,
            current: false,
        }
    }

    /// Whether the start set has all arrived by the consumer's `number`th
    /// message without the barrier.
    fn behind(&self, number: u64) -> bool {
        !self.current && number >= self.len
    }

    /// Notes the consumer's `number`th message, on `subject` at `seq`.
    fn saw(&mut self, number: u64, subject: &str, seq: u64) {
        if number <= self.len && subject == LIST_BARRIER_SUBJECT && seq >= self.barrier {
            self.current = true;
        }
    }
}

/// The entry a delivered message holds, or why it does not parse.
fn decode(seq: u64, stored_at: OffsetDateTime, message: &Message) -> Result<Entry, String> {
    // One walk of the header map finds all three, in any casing.
    let mut found = [None; ENTRY_HEADERS.len()];
    for (name, values) in message.headers.iter().flat_map(|headers| headers.iter()) {
        let name: &str = name.as_ref();
        if let Some(i) = ENTRY_HEADERS
            .iter()
            .position(|wanted| name.eq_ignore_ascii_case(wanted))
        {
            found[i] = values.first().map(|value| value.as_str());
        }
    }
    let header = |name: &str| {
        let i = ENTRY_HEADERS.iter().position(|wanted| *wanted == name)?;
        found[i]
    };
    decode_entry(seq, stored_at, header, &message.payload)
}

#[cfg(test)]
mod tests {
    use super::{StartSet, Tries};
    use dagnats_leases_wire::names::{LIST_BARRIER_SUBJECT, key_subject};
    use std::time::Duration;

    #[test]
    fn a_list_tries_again_at_least_four_consumers_then_until_the_catch_up_time() {
        let mut tries = Tries::default();
        let slow = Duration::from_secs(5);
        assert_eq!(tries.failed(slow), Some(Duration::from_millis(10)));
        assert_eq!(tries.failed(slow), Some(Duration::from_millis(20)));
        assert_eq!(tries.failed(slow), Some(Duration::from_millis(40)));
        assert_eq!(
            tries.failed(slow),
            None,
            "four consumers past the catch-up time"
        );

        // Consumers that each take 100 ms to start behind.
        let (mut tries, mut elapsed, mut pauses) = (Tries::default(), 0, vec![]);
        loop {
            elapsed += 100;
            let Some(pause) = tries.failed(Duration::from_millis(elapsed)) else {
                break;
            };
            pauses.push(pause.as_millis() as u64);
            elapsed += pause.as_millis() as u64;
        }
        assert_eq!(pauses, [10, 20, 40, 80, 160, 200, 200, 200]);
        assert_eq!(
            elapsed, 1_810,
            "stopped when the next pause would end past 2 s"
        );
    }

    #[test]
    fn a_start_set_holding_the_barrier_is_current() {
        let mut start = StartSet::new(3, 10);
        start.saw(1, &key_subject("a"), 4);
        start.saw(2, &key_subject("b"), 7);
        assert!(!start.behind(2), "the start set has not all arrived");
        start.saw(3, LIST_BARRIER_SUBJECT, 10);
        assert!(start.current);
        assert!(!start.behind(3));
    }

    #[test]
    fn a_node_that_reached_the_barrier_only_after_starting_is_not_current() {
        // Its start set ends at an older barrier; the list's own arrives
        // later, after writes to the keys that may never be delivered.
        let mut start = StartSet::new(3, 10);
        start.saw(1, &key_subject("a"), 4);
        start.saw(2, LIST_BARRIER_SUBJECT, 6);
        start.saw(3, &key_subject("b"), 7);
        assert!(start.behind(3), "known once the start set is in");
        start.saw(4, LIST_BARRIER_SUBJECT, 12);
        assert!(!start.current);
    }

    #[test]
    fn a_start_set_without_a_barrier_is_not_current() {
        let mut start = StartSet::new(1, 10);
        start.saw(1, &key_subject("a"), 11);
        assert!(!start.current, "a key past the barrier proves nothing");
    }
}
