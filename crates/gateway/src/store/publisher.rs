//! Compare-and-set publishes to the bucket, coalesced into atomic batches
//! under load.
//!
//! On a replicated bucket each publish is a raft proposal the stream leader
//! replicates and fsyncs, and that per-proposal work, not the gateway,
//! bounds throughput (measured: 11,190 single publishes/s on 3 nodes with
//! `sync_interval: always`, 22,806/s in batches of 32). So while
//! `in_flight` publishes await their acknowledgement, the next ones wait
//! and leave together as one atomic batch (nats-server 2.12+, ADR-50).
//!
//! A batch keeps every message's own check: each still expects its key's
//! last sequence, and the server commits all of them or none. Messages
//! checking the same key never share a batch (the server would refuse it),
//! and when a batch is refused (one key changed, a leader changed between
//! its messages, too many batches in flight) each message is sent again on
//! its own and gets its own answer. The batch's messages take consecutive
//! stream sequences in the order sent, the commit message's being the
//! acknowledged one, so each learns its own revision from that ack.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use async_nats::{HeaderMap, HeaderName, Subject};
use bytes::Bytes;
use dagnats_leases_wire::names::{
    HEADER_BATCH_COMMIT, HEADER_BATCH_ID, HEADER_BATCH_SEQUENCE, STREAM,
};
use serde::Deserialize;
use tokio::sync::oneshot;

use super::jsapi::{ApiError, Failure, JetStream, TIMEOUT};

/// The most messages one batch carries (the server's limit is 1,000).
const MAX_BATCH: usize = 128;

/// One publish: where it goes, and the key subject whose last sequence it
/// expects (a write's own subject, a read barrier's key).
pub(super) struct Publish {
    pub(super) subject: Subject,
    pub(super) checks: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

/// Sends publishes and returns each one's acknowledgement body.
pub(super) enum Publisher {
    /// Every publish on its own (a single-replica bucket, whose batches
    /// the server stages in files of their own, or a server before 2.12).
    Single(JetStream),
    Coalesced(Arc<Coalescer>),
}

impl Publisher {
    /// Coalescing once `in_flight` publishes await their answers, if
    /// `batches`; otherwise one request per publish.
    pub(super) fn new(jetstream: JetStream, batches: bool, in_flight: usize) -> Self {
        if batches {
            Publisher::Coalesced(Arc::new(Coalescer {
                jetstream,
                in_flight,
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
    /// Sends (single publishes or batches) awaiting their answer before
    /// the next publishes wait to be batched.
    in_flight: usize,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    /// Sends in progress; `waiting` is empty unless `in_flight` are.
    sending: usize,
    waiting: VecDeque<Waiting>,
}

struct Waiting {
    publish: Publish,
    answer: oneshot::Sender<Result<Bytes, Failure>>,
}

/// Whether a publish goes now or waits for the next batch.
enum Turn {
    Now(Publish),
    Queued(oneshot::Receiver<Result<Bytes, Failure>>),
}

/// A send in progress; when it ends (or its caller gives up on it),
/// whatever waits is sent next.
struct Slot(Arc<Coalescer>);

impl Drop for Slot {
    fn drop(&mut self) {
        let next = self.0.queue.lock().expect("queue lock").next_or_free();
        // Without a runtime (it is shutting down) the waiting callers are
        // gone with it, and dropping their answers tells any that remain.
        if let (Some(group), Ok(runtime)) = (next, tokio::runtime::Handle::try_current()) {
            runtime.spawn(self.0.clone().send(group));
        }
    }
}

impl Queue {
    /// The next group to send, each of its messages checking another key;
    /// or, with nobody waiting, one send in progress fewer.
    fn next_or_free(&mut self) -> Option<Vec<Waiting>> {
        // Callers that gave up are not sent for.
        self.waiting.retain(|w| !w.answer.is_closed());
        if self.waiting.is_empty() {
            self.sending -= 1;
            return None;
        }
        let mut keys = HashSet::new();
        let mut group = Vec::new();
        let mut rest = VecDeque::new();
        for waiting in self.waiting.drain(..) {
            if group.len() < MAX_BATCH && keys.insert(waiting.publish.checks.clone()) {
                group.push(waiting);
            } else {
                rest.push_back(waiting);
            }
        }
        self.waiting = rest;
        Some(group)
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
        let turn = {
            let mut queue = self.queue.lock().expect("queue lock");
            if queue.sending < self.in_flight {
                queue.sending += 1;
                Turn::Now(publish)
            } else {
                let (answer, answered) = oneshot::channel();
                queue.waiting.push_back(Waiting { publish, answer });
                Turn::Queued(answered)
            }
        };
        match turn {
            // A free slot: sent at once, as without coalescing.
            Turn::Now(publish) => {
                let _slot = Slot(self.clone());
                send_one(&self.jetstream, publish).await
            }
            // Bounded like a lone publish, waiting included, so a call
            // queued behind a stuck one still answers before its client's
            // timeout; given up, it is no longer sent if still waiting.
            Turn::Queued(answered) => match tokio::time::timeout(TIMEOUT, answered).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(Failure::Failed(
                    "the publish was dropped before it was sent".into(),
                )),
                Err(_) => Err(Failure::timed_out("a publish")),
            },
        }
    }

    /// Sends `group` in one send slot, freed (or handed on) when done.
    async fn send(self: Arc<Self>, group: Vec<Waiting>) {
        let slot = Slot(self);
        if group.len() == 1 {
            let Waiting { publish, answer } = group.into_iter().next().expect("one");
            let _ = answer.send(send_one(&slot.0.jetstream, publish).await);
        } else {
            slot.0.send_batch(group).await;
        }
    }

    async fn send_batch(&self, group: Vec<Waiting>) {
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
        };
        (Waiting { publish, answer }, answered)
    }

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

    fn checks(group: &[Waiting]) -> Vec<&str> {
        group.iter().map(|w| w.publish.checks.as_str()).collect()
    }

    #[test]
    fn a_group_checks_each_key_once_and_keeps_the_order_of_the_rest() {
        let (mut queue, _kept) = queued(["a", "b", "a", "c", "b", "a"]);
        let first = queue.next_or_free().expect("a group");
        assert_eq!(checks(&first), ["a", "b", "c"]);
        let second = queue.next_or_free().expect("a group");
        assert_eq!(checks(&second), ["a", "b"]);
        let third = queue.next_or_free().expect("a group");
        assert_eq!(checks(&third), ["a"]);
        assert!(queue.next_or_free().is_none());
        assert_eq!(queue.sending, 0, "the slot is free once nobody waits");
    }

    #[test]
    fn callers_that_gave_up_are_not_sent_for() {
        let (mut queue, mut kept) = queued(["a", "b"]);
        drop(kept.remove(0));
        assert_eq!(checks(&queue.next_or_free().expect("a group")), ["b"]);
    }

    #[test]
    fn a_group_is_at_most_a_batch() {
        let (mut queue, _kept) = queued((0..MAX_BATCH + 3).map(|i| format!("k{i}")));
        assert_eq!(queue.next_or_free().expect("a group").len(), MAX_BATCH);
        assert_eq!(queue.next_or_free().expect("a group").len(), 3);
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

        async fn replicated() -> (Cluster, JetStream, Publisher) {
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
            let publisher = Publisher::new(jetstream.clone(), true, 1);
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
            let series = format!("dagnats_store_batches_total{{outcome=\"{outcome}\"}} ");
            crate::metrics::handle()
                .render()
                .lines()
                .find_map(|line| line.strip_prefix(&series)?.parse().ok())
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
            let (_cluster, jetstream, publisher) = replicated().await;
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
        async fn a_refused_batch_is_sent_again_one_by_one_and_each_publish_gets_its_own_answer() {
            let (_cluster, jetstream, publisher) = replicated().await;
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
            let publisher = Publisher::new(JetStream::new(client), true, 1);
            let queued = |key: &str| Publish {
                subject: Subject::from(format!("stuck.{key}")),
                checks: key.into(),
                headers: HeaderMap::new(),
                body: Bytes::new(),
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
    }
}
