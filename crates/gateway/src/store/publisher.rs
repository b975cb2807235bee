//! Compare-and-set publishes to the bucket, coalesced into atomic batches
//! under load.
//!
//! On a replicated bucket each publish is a raft proposal the stream leader
//! replicates and fsyncs, and that per-proposal work bounds throughput. So
//! while `in_flight` publishes await their acknowledgement, the next ones
//! wait and leave together as one atomic batch (nats-server 2.12+, ADR-50);
//! once a full batch waits it leaves at once beside the others, or the
//! queue would grow by the difference every round trip (docs/design.md,
//! "Writes in atomic batches").
//!
//! A batch keeps every message's own check: each still expects its key's
//! last sequence, and the server commits all of them or none. A key is in
//! one send at a time (the server would refuse a second check of it in
//! flight, and a batch sharing one), and a refused batch is sent again a
//! message at a time, each getting its own answer. The batch's messages
//! take consecutive stream sequences in the order sent, the commit
//! message's being the acknowledged one, so each learns its own revision
//! from that ack.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_nats::{HeaderMap, HeaderName, Subject};
use bytes::Bytes;
use dagnats_leases_wire::names::{
    HEADER_BATCH_COMMIT, HEADER_BATCH_ID, HEADER_BATCH_SEQUENCE, STREAM,
};
use foldhash::HashSet;
use serde::Deserialize;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use super::jsapi::{ApiError, Failure, JetStream, TIMEOUT};
use crate::settings::Coalescing;

/// Sends in flight at most, counting those a full batch adds beside the
/// `in_flight` ones: few enough that two gateways stay far below the
/// server's 50 batches in flight per stream.
const MAX_SENDS: usize = 4;

/// One publish: where it goes, the key subject whose last sequence it
/// expects (a write's own subject, a read barrier's key), and the moment
/// after which it is no longer sent if it is still waiting.
pub(super) struct Publish {
    pub(super) subject: Subject,
    pub(super) checks: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) send_by: Option<OffsetDateTime>,
}

/// Sends publishes and returns each one's acknowledgement body.
pub(super) enum Publisher {
    /// Every publish on its own (a single-replica bucket, whose batches
    /// the server stages in files of their own, or a server before 2.12).
    Single(JetStream),
    Coalesced(Arc<Coalescer>),
}

impl Publisher {
    /// Coalescing as `coalescing` says, if `batches`; otherwise one
    /// request per publish.
    pub(super) fn new(jetstream: JetStream, batches: bool, coalescing: Coalescing) -> Self {
        if batches {
            Publisher::Coalesced(Arc::new(Coalescer {
                jetstream,
                coalescing,
                queue: Mutex::default(),
            }))
        } else {
            Publisher::Single(jetstream)
        }
    }

    pub(super) async fn publish(&self, publish: Publish) -> Result<Bytes, Failure> {
        match self {
            Publisher::Single(jetstream) => send_one(jetstream, publish).await,
            Publisher::Coalesced(coalescer) => coalescer.publish(publish).await,
        }
    }
}

async fn send_one(jetstream: &JetStream, p: Publish) -> Result<Bytes, Failure> {
    jetstream.request(p.subject, p.headers, p.body).await
}

pub(super) struct Coalescer {
    jetstream: JetStream,
    coalescing: Coalescing,
    queue: Mutex<Queue>,
}

/// Publishes waiting, and the sends in progress.
///
/// A key is in at most one send at a time: two would expect the same last
/// sequence, so the later would be refused, and a refused batch costs a
/// publish per message.
#[derive(Default)]
struct Queue {
    /// Sends in progress.
    sending: usize,
    /// The keys the sends in progress check.
    checking: HashSet<String>,
    waiting: VecDeque<Waiting>,
}

struct Waiting {
    publish: Publish,
    answer: oneshot::Sender<Result<Bytes, Failure>>,
}

/// Whether a publish goes now or waits for the next batch.
enum Turn {
    Now(Publish, Slot),
    Queued(oneshot::Receiver<Result<Bytes, Failure>>, Option<Group>),
}

/// What one send takes from the queue: publishes each checking another
/// key, none checked by another send in progress.
type Group = Vec<Waiting>;

/// A send in progress and the keys it checks; when it ends (or its caller
/// gives up on it), whatever waits is sent next.
struct Slot {
    coalescer: Arc<Coalescer>,
    keys: Vec<String>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let keys = std::mem::take(&mut self.keys);
        let next = {
            let mut queue = self.coalescer.queue.lock().expect("queue lock");
            queue.done(keys);
            queue.next_or_free(self.coalescer.coalescing.max_batch)
        };
        // Without a runtime (it is shutting down) the waiting callers are
        // gone with it, and dropping their answers tells any that remain.
        if let (Some(group), Ok(runtime)) = (next, tokio::runtime::Handle::try_current()) {
            runtime.spawn(self.coalescer.clone().send(group));
        }
    }
}

impl Queue {
    /// A send of `keys` ended.
    fn done(&mut self, keys: Vec<String>) {
        for key in keys {
            self.checking.remove(&key);
        }
    }

    /// The next group to send, taking the finished send's place; or, with
    /// nothing to send, one send in progress fewer.
    fn next_or_free(&mut self, max_batch: usize) -> Option<Group> {
        let group = self.take_group(max_batch);
        if group.is_none() {
            self.sending -= 1;
        }
        group
    }

    /// A full batch to send beside those in progress, if that many wait
    /// and fewer than [`MAX_SENDS`] are in progress.
    fn full_batch(&mut self, max_batch: usize) -> Option<Group> {
        if self.waiting.len() < max_batch || self.sending >= MAX_SENDS {
            return None;
        }
        let group = self.take_group(max_batch)?;
        self.sending += 1;
        Some(group)
    }

    /// Up to `max_batch` waiting publishes, in order, each checking a key
    /// no other send in progress or in the group checks; their keys are
    /// then in progress.
    fn take_group(&mut self, max_batch: usize) -> Option<Group> {
        // Callers that gave up are not sent for.
        self.waiting.retain(|w| !w.answer.is_closed());
        let now = OffsetDateTime::now_utc();
        let mut group = Vec::new();
        let mut rest = VecDeque::new();
        for waiting in self.waiting.drain(..) {
            if waiting.publish.send_by.is_some_and(|by| now >= by) {
                crate::metrics::store_too_late();
                let _ = waiting.answer.send(Err(Failure::TooLate));
            } else if group.len() < max_batch
                && self.checking.insert(waiting.publish.checks.clone())
            {
                group.push(waiting);
            } else {
                rest.push_back(waiting);
            }
        }
        self.waiting = rest;
        (!group.is_empty()).then_some(group)
    }
}

/// The acknowledgement of a batch's commit message.
#[derive(Deserialize)]
struct BatchAck {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    count: usize,
    error: Option<ApiError>,
}

impl Coalescer {
    async fn publish(self: &Arc<Self>, publish: Publish) -> Result<Bytes, Failure> {
        let Coalescing {
            in_flight,
            max_batch,
        } = self.coalescing;
        let turn = {
            let mut queue = self.queue.lock().expect("queue lock");
            if queue.sending < in_flight && !queue.checking.contains(&publish.checks) {
                queue.sending += 1;
                queue.checking.insert(publish.checks.clone());
                let keys = vec![publish.checks.clone()];
                Turn::Now(
                    publish,
                    Slot {
                        coalescer: self.clone(),
                        keys,
                    },
                )
            } else {
                let (answer, answered) = oneshot::channel();
                queue.waiting.push_back(Waiting { publish, answer });
                Turn::Queued(answered, queue.full_batch(max_batch))
            }
        };
        match turn {
            // A free slot: sent at once, as without coalescing.
            Turn::Now(publish, _slot) => send_one(&self.jetstream, publish).await,
            // Bounded like a lone publish, waiting included, so a call
            // queued behind a stuck one still answers before its client's
            // timeout; given up, it is no longer sent if still waiting.
            Turn::Queued(answered, full) => {
                // One send in flight takes a batch per round trip; when
                // more arrive than a batch holds, another leaves now
                // rather than a round trip later, or the queue would grow
                // by the difference every round trip.
                if let Some(group) = full {
                    crate::metrics::store_batch_beside();
                    tokio::spawn(self.clone().send(group));
                }
                match tokio::time::timeout(TIMEOUT, answered).await {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(_)) => Err(Failure::Failed(
                        "the publish was dropped before it was sent".into(),
                    )),
                    Err(_) => Err(Failure::timed_out("a publish")),
                }
            }
        }
    }

    /// Sends `group` in one send slot, freed (or handed on) when done.
    async fn send(self: Arc<Self>, mut group: Group) {
        let keys = group
            .iter_mut()
            .map(|w| std::mem::take(&mut w.publish.checks))
            .collect();
        let slot = Slot {
            coalescer: self,
            keys,
        };
        if group.len() == 1 {
            let Waiting { publish, answer } = group.into_iter().next().expect("one");
            let _ = answer.send(send_one(&slot.coalescer.jetstream, publish).await);
        } else {
            slot.coalescer.send_batch(group).await;
        }
    }

    async fn send_batch(&self, group: Group) {
        const ID: HeaderName = HeaderName::from_static(HEADER_BATCH_ID);
        const SEQUENCE: HeaderName = HeaderName::from_static(HEADER_BATCH_SEQUENCE);
        const COMMIT: HeaderName = HeaderName::from_static(HEADER_BATCH_COMMIT);
        let id = nuid::next();
        let size = group.len();
        let (mut messages, mut answers, mut alone) = (Vec::new(), Vec::new(), Vec::new());
        for (i, Waiting { publish, answer }) in group.into_iter().enumerate() {
            let mut headers = publish.headers.clone();
            headers.insert(ID, id.as_str());
            headers.insert(SEQUENCE, (i + 1).to_string().as_str());
            if i + 1 == size {
                headers.insert(COMMIT, "1");
            }
            messages.push((publish.subject.clone(), headers, publish.body.clone()));
            answers.push(answer);
            alone.push(publish);
        }
        let last = messages.pop().expect("a batch has messages");
        let ack = match self.jetstream.publish_then_request(messages, last).await {
            Ok(body) => serde_json::from_slice::<BatchAck>(&body)
                .map_err(|err| Failure::Failed(format!("batch acknowledgement: {err}"))),
            Err(failure) => Err(failure),
        };
        match ack {
            Ok(BatchAck {
                seq,
                count,
                error: None,
            }) if count == size && seq >= size as u64 => {
                crate::metrics::store_batch("committed", size);
                let first = seq + 1 - size as u64;
                for (i, answer) in answers.into_iter().enumerate() {
                    let ack = format!(r#"{{"stream":"{STREAM}","seq":{}}}"#, first + i as u64);
                    let _ = answer.send(Ok(Bytes::from(ack)));
                }
            }
            // Refused as a whole, nothing of it stored: each on its own.
            Ok(BatchAck {
                error: Some(err), ..
            }) => {
                tracing::debug!(
                    size,
                    err_code = err.err_code,
                    "batch refused: {}",
                    err.description
                );
                crate::metrics::store_batch("refused", size);
                let sends = alone.into_iter().map(|p| send_one(&self.jetstream, p));
                let outcomes = futures::future::join_all(sends).await;
                for (answer, outcome) in answers.into_iter().zip(outcomes) {
                    let _ = answer.send(outcome);
                }
            }
            // No answer, or one that does not say which messages landed:
            // each caller hears what a lone publish would have.
            other => {
                crate::metrics::store_batch("unanswered", size);
                let failure = other.err().unwrap_or_else(|| {
                    Failure::Failed(format!(
                        "the acknowledgement of a batch of {size} does not account for it"
                    ))
                });
                for answer in answers {
                    let _ = answer.send(Err(failure.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(checks: &str) -> (Waiting, oneshot::Receiver<Result<Bytes, Failure>>) {
        let (answer, answered) = oneshot::channel();
        let publish = Publish {
            subject: Subject::from(checks),
            checks: checks.into(),
            headers: HeaderMap::new(),
            body: Bytes::new(),
            send_by: None,
        };
        (Waiting { publish, answer }, answered)
    }

    /// The largest batch in these tests.
    const MAX: usize = 128;

    /// A queue with its one slot taken and a publish waiting per key, and
    /// the receivers that keep those callers waiting.
    fn queued<K: AsRef<str>>(
        keys: impl IntoIterator<Item = K>,
    ) -> (Queue, Vec<oneshot::Receiver<Result<Bytes, Failure>>>) {
        let mut queue = Queue {
            sending: 1,
            ..Queue::default()
        };
        let mut kept = Vec::new();
        for key in keys {
            let (w, rx) = waiting(key.as_ref());
            queue.waiting.push_back(w);
            kept.push(rx);
        }
        (queue, kept)
    }

    fn coalescing(max_batch: usize) -> Coalescing {
        Coalescing {
            in_flight: 1,
            max_batch,
        }
    }

    fn checks(group: &[Waiting]) -> Vec<&str> {
        group.iter().map(|w| w.publish.checks.as_str()).collect()
    }

    /// The next group, its send then ended.
    fn sent(queue: &mut Queue) -> Option<Vec<String>> {
        let group = queue.next_or_free(MAX)?;
        let keys: Vec<String> = checks(&group).into_iter().map(String::from).collect();
        queue.done(keys.clone());
        Some(keys)
    }

    #[test]
    fn a_group_checks_each_key_once_and_keeps_the_order_of_the_rest() {
        let (mut queue, _kept) = queued(["a", "b", "a", "c", "b", "a"]);
        assert_eq!(sent(&mut queue).expect("a group"), ["a", "b", "c"]);
        assert_eq!(sent(&mut queue).expect("a group"), ["a", "b"]);
        assert_eq!(sent(&mut queue).expect("a group"), ["a"]);
        assert!(queue.next_or_free(MAX).is_none());
        assert_eq!(queue.sending, 0, "the slot is free once nobody waits");
    }

    #[test]
    fn a_key_waits_while_another_send_checks_it() {
        let (mut queue, _kept) = queued(["a", "b"]);
        queue.checking.insert("a".into());
        let group = queue.next_or_free(MAX).expect("a group");
        assert_eq!(checks(&group), ["b"]);
        // Only a's own send ending lets it go; b's ending frees its slot.
        queue.done(vec!["b".into()]);
        assert!(queue.next_or_free(MAX).is_none(), "a is still checked");
        queue.done(vec!["a".into()]);
        queue.sending += 1;
        assert_eq!(checks(&queue.next_or_free(MAX).expect("a group")), ["a"]);
    }

    #[test]
    fn a_publish_still_waiting_past_its_send_by_is_never_sent_and_told_so() {
        let (mut queue, mut kept) = queued(["a", "b"]);
        let past = OffsetDateTime::now_utc() - std::time::Duration::from_millis(1);
        queue.waiting[0].publish.send_by = Some(past);
        let future = OffsetDateTime::now_utc() + std::time::Duration::from_secs(60);
        queue.waiting[1].publish.send_by = Some(future);
        assert_eq!(checks(&queue.next_or_free(MAX).expect("a group")), ["b"]);
        assert!(matches!(kept[0].try_recv(), Ok(Err(Failure::TooLate))));
        assert!(kept[1].try_recv().is_err(), "b is sent, not answered yet");
    }

    #[test]
    fn callers_that_gave_up_are_not_sent_for() {
        let (mut queue, mut kept) = queued(["a", "b"]);
        drop(kept.remove(0));
        assert_eq!(checks(&queue.next_or_free(MAX).expect("a group")), ["b"]);
    }

    #[test]
    fn a_group_is_at_most_a_batch() {
        let (mut queue, _kept) = queued((0..MAX + 3).map(|i| format!("k{i}")));
        assert_eq!(queue.next_or_free(MAX).expect("a group").len(), MAX);
        assert_eq!(queue.next_or_free(MAX).expect("a group").len(), 3);
    }

    #[test]
    fn a_full_batch_leaves_beside_the_sends_in_progress_up_to_the_most_sends() {
        let (mut queue, _kept) = queued((0..MAX - 1).map(|i| format!("k{i}")));
        assert!(queue.full_batch(MAX).is_none(), "not yet a batch");
        let (w, _rx) = waiting("last");
        queue.waiting.push_back(w);
        assert_eq!(queue.full_batch(MAX).expect("a full batch").len(), MAX);
        assert_eq!(queue.sending, 2);
        let (mut queue, _kept) = queued((0..MAX).map(|i| format!("k{i}")));
        queue.sending = MAX_SENDS;
        assert!(queue.full_batch(MAX).is_none(), "at the most sends");
        assert_eq!(queue.waiting.len(), MAX, "nothing taken");
    }

    /// Against real nats-server processes: a three-node cluster with an R3
    /// stream that takes atomic batches, and a publisher that batches
    /// whatever waits.
    mod on_nats_servers {
        use super::*;
        use dagnats_leases_testkit::Cluster;
        use serde_json::{Value, json};
        use std::time::{Duration, Instant};

        const STREAM: &str = "PUBLISHER_TEST";

        /// Batches of at most `max_batch`.
        async fn replicated(max_batch: usize) -> (Cluster, JetStream, Publisher) {
            let cluster = Cluster::start().await;
            let jetstream = JetStream::new(cluster.client().await);
            let config = json!({
                "name": STREAM, "subjects": ["pt.>"], "storage": "file",
                "num_replicas": 3, "max_msgs_per_subject": 1,
                "allow_msg_ttl": true, "allow_atomic": true,
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let created = jetstream
                    .api(&format!("STREAM.CREATE.{STREAM}"), &config)
                    .await;
                if created.is_ok_and(|reply| reply.get("error").is_none()) {
                    break;
                }
                assert!(Instant::now() < deadline, "no R3 stream");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let publisher = Publisher::new(jetstream.clone(), true, coalescing(max_batch));
            (cluster, jetstream, publisher)
        }

        fn cas(key: &str, expected: u64) -> Publish {
            let mut headers = HeaderMap::new();
            headers.insert(
                "Nats-Expected-Last-Subject-Sequence",
                expected.to_string().as_str(),
            );
            headers.insert("Nats-TTL", "60s");
            let subject = format!("pt.{key}");
            Publish {
                subject: Subject::from(subject.clone()),
                checks: subject,
                headers,
                body: Bytes::from_static(b"{}"),
                send_by: None,
            }
        }

        fn answer(reply: Result<Bytes, Failure>) -> Value {
            serde_json::from_slice(&reply.expect("an answer")).expect("JSON")
        }

        /// The subject of the message at `seq`.
        async fn subject_at(jetstream: &JetStream, seq: u64) -> String {
            let op = format!("STREAM.MSG.GET.{STREAM}");
            let reply = jetstream
                .api(&op, &json!({"seq": seq}))
                .await
                .expect("read");
            reply["message"]["subject"]
                .as_str()
                .expect("a message")
                .into()
        }

        fn batches(outcome: &str) -> u64 {
            counter(&format!(
                "dagnats_store_batches_total{{outcome=\"{outcome}\"}}"
            ))
        }

        fn counter(series: &str) -> u64 {
            let prefix = format!("{series} ");
            crate::metrics::handle()
                .render()
                .lines()
                .find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
                .unwrap_or(0)
        }

        /// The first publish takes the one slot; the rest, polled in the
        /// same turn, wait for it and leave as one batch.
        async fn behind_one(publisher: &Publisher, rest: Vec<Publish>) -> Vec<Value> {
            let first = std::iter::once(cas("first", 0));
            let sends = first.chain(rest).map(|p| publisher.publish(p));
            let mut replies: Vec<Value> = futures::future::join_all(sends)
                .await
                .into_iter()
                .map(answer)
                .collect();
            replies.remove(0);
            replies
        }

        #[tokio::test]
        async fn a_committed_batch_tells_each_publish_the_sequence_it_landed_at() {
            let (_cluster, jetstream, publisher) = replicated(MAX).await;
            let committed = batches("committed");
            let keys = ["a", "b", "c", "d"];
            let replies = behind_one(&publisher, keys.iter().map(|k| cas(k, 0)).collect()).await;
            assert!(batches("committed") > committed, "they went as a batch");
            for (key, reply) in keys.iter().zip(&replies) {
                let seq = reply["seq"].as_u64().unwrap_or_else(|| panic!("{reply}"));
                assert_eq!(subject_at(&jetstream, seq).await, format!("pt.{key}"));
            }
        }

        #[tokio::test]
        async fn full_batches_leave_beside_the_one_in_flight_each_publish_landing_at_its_own_sequence()
         {
            let (_cluster, jetstream, publisher) = replicated(4).await;
            let (beside, committed) = (counter(BESIDE), batches("committed"));
            let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
            let replies = behind_one(&publisher, keys.iter().map(|k| cas(k, 0)).collect()).await;
            assert!(counter(BESIDE) > beside, "no batch left beside another");
            assert!(batches("committed") > committed, "they went in batches");
            let mut seqs = std::collections::BTreeSet::new();
            for (key, reply) in keys.iter().zip(&replies) {
                let seq = reply["seq"].as_u64().unwrap_or_else(|| panic!("{reply}"));
                assert!(seqs.insert(seq), "{seq} answered twice");
                assert_eq!(subject_at(&jetstream, seq).await, format!("pt.{key}"));
            }
        }

        const BESIDE: &str = "dagnats_store_batches_beside_total";

        #[tokio::test]
        async fn a_refused_batch_is_sent_again_one_by_one_and_each_publish_gets_its_own_answer() {
            let (_cluster, jetstream, publisher) = replicated(MAX).await;
            let mut seqs = Vec::new();
            for key in ["a", "b", "c"] {
                let reply = answer(publisher.publish(cas(key, 0)).await);
                seqs.push(reply["seq"].as_u64().expect("landed"));
            }
            let refused = batches("refused");
            // b's expected sequence is stale: the batch is refused whole.
            let stale = [seqs[0], seqs[1] - 1, seqs[2]];
            let sends = ["a", "b", "c"]
                .iter()
                .zip(stale)
                .map(|(k, e)| cas(k, e))
                .collect();
            let replies = behind_one(&publisher, sends).await;
            assert!(batches("refused") > refused, "the batch was refused");
            assert_eq!(replies[1]["error"]["err_code"], 10071, "{}", replies[1]);
            for (i, key) in [(0, "a"), (2, "c")] {
                let seq = replies[i]["seq"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{}", replies[i]));
                assert!(seq > seqs[2]);
                assert_eq!(subject_at(&jetstream, seq).await, format!("pt.{key}"));
            }
            let op = format!("STREAM.MSG.GET.{STREAM}");
            let b = jetstream
                .api(&op, &json!({"last_by_subj": "pt.b"}))
                .await
                .expect("read");
            assert_eq!(b["message"]["seq"], seqs[1], "b is unchanged: {b}");
        }

        #[tokio::test]
        async fn a_publish_queued_behind_a_stuck_one_answers_within_the_store_timeout() {
            let server = dagnats_leases_testkit::NatsServer::start().await;
            let client = async_nats::connect(&server.url).await.expect("connect");
            // Takes publishes and never answers, like a leader that stopped.
            let _stuck = client.subscribe("stuck.>").await.expect("subscribe");
            client.flush().await.expect("flush");
            let publisher = Publisher::new(JetStream::new(client), true, coalescing(MAX));
            let queued = |key: &str| Publish {
                subject: Subject::from(format!("stuck.{key}")),
                checks: key.into(),
                headers: HeaderMap::new(),
                body: Bytes::new(),
                send_by: None,
            };
            let started = Instant::now();
            let (first, behind) = futures::join!(
                publisher.publish(queued("a")),
                publisher.publish(queued("b"))
            );
            let waited = started.elapsed();
            assert!(matches!(first, Err(Failure::Failed(_))), "{first:?}");
            assert!(matches!(behind, Err(Failure::Failed(_))), "{behind:?}");
            // Not the 8 s of waiting out the first and then its own send:
            // a client's usual 5 s timeout still hears why.
            assert!(waited < Duration::from_secs(5), "answered after {waited:?}");
        }

        #[tokio::test]
        async fn a_publish_still_queued_at_its_send_by_is_never_sent() {
            use futures::{FutureExt, StreamExt};
            let server = dagnats_leases_testkit::NatsServer::start().await;
            let client = async_nats::connect(&server.url).await.expect("connect");
            // Takes publishes and never answers, like a leader that stopped.
            let mut stuck = client.subscribe("stuck.>").await.expect("subscribe");
            client.flush().await.expect("flush");
            let publisher = Publisher::new(JetStream::new(client.clone()), true, coalescing(MAX));
            let queued = |key: &str, send_by| Publish {
                subject: Subject::from(format!("stuck.{key}")),
                checks: key.into(),
                headers: HeaderMap::new(),
                body: Bytes::new(),
                send_by,
            };
            let send_by = OffsetDateTime::now_utc() + Duration::from_millis(200);
            // The first takes the one slot; its caller gives up at 500 ms,
            // past the second's send-by, which frees the slot for it.
            let first = tokio::time::timeout(
                Duration::from_millis(500),
                publisher.publish(queued("a", None)),
            );
            let (gave_up, behind) =
                futures::join!(first, publisher.publish(queued("b", Some(send_by))));
            assert!(gave_up.is_err(), "the first was never answered");
            assert!(matches!(behind, Err(Failure::TooLate)), "{behind:?}");
            dagnats_leases_testkit::nats::settle(&client).await;
            let sent: Vec<String> = std::iter::from_fn(|| {
                stuck
                    .next()
                    .now_or_never()
                    .flatten()
                    .map(|m| m.subject.to_string())
            })
            .collect();
            assert_eq!(sent, ["stuck.a"], "b was never sent");
        }
    }
}
