//! Confirmations of one key that concurrent callers share; and, under the
//! list barrier's subject, snapshots of every key.
//!
//! Barriers on one key cannot be in flight together (the server refuses
//! the second, 10164), so within a gateway one confirmation of a key runs
//! at a time: a turn. A caller that arrives while a turn runs cannot use
//! it, since that barrier may have left before a write the caller already
//! saw acknowledged. It can use the next turn: that one starts after the
//! caller arrived and its barrier lands before the caller answers. So every
//! caller that queued behind one turn shares the next one's outcome, and a
//! key read by many at once costs a barrier per round trip, not per caller,
//! and lists at once cost one snapshot at a time, not one each.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use foldhash::HashMap;

/// Turns of every key being confirmed now.
pub(super) struct Turns<O> {
    keys: Mutex<HashMap<String, Arc<KeyTurns<O>>>>,
    /// What is confirmed, for the metric of shared outcomes.
    what: &'static str,
}

/// Turns of one key.
struct KeyTurns<O> {
    /// Turns started so far.
    started: AtomicU64,
    /// The last turn's number and outcome; held while a turn runs.
    last: tokio::sync::Mutex<Option<(u64, O)>>,
}

impl<O: Clone> Turns<O> {
    /// Turns of confirmations of `what` (a metric label).
    pub(super) fn new(what: &'static str) -> Self {
        Turns {
            keys: Mutex::default(),
            what,
        }
    }

    /// The outcome of a turn on `key` that started after this call did:
    /// one already finished by the time this call's turn comes, if
    /// `answers` accepts its outcome, else `confirm`, run now.
    pub(super) async fn take<F>(
        &self,
        key: &str,
        answers: impl Fn(&O) -> bool,
        confirm: impl FnOnce() -> F,
    ) -> O
    where
        F: Future<Output = O>,
    {
        let turns = self
            .keys
            .lock()
            .expect("turns lock")
            .entry(key.to_string())
            .or_insert_with(|| {
                Arc::new(KeyTurns {
                    started: AtomicU64::new(0),
                    last: tokio::sync::Mutex::new(None),
                })
            })
            .clone();
        let arrived = turns.started.load(Ordering::SeqCst);
        let outcome = {
            let mut last = turns.last.lock().await;
            match &*last {
                Some((turn, outcome)) if *turn > arrived && answers(outcome) => {
                    crate::metrics::store_confirmation_shared(self.what);
                    outcome.clone()
                }
                _ => {
                    let turn = turns.started.fetch_add(1, Ordering::SeqCst) + 1;
                    let outcome = confirm().await;
                    *last = Some((turn, outcome.clone()));
                    outcome
                }
            }
        };
        let mut keys = self.keys.lock().expect("turns lock");
        // Held by the map and this call only: nobody else confirms `key` now.
        if Arc::strong_count(&turns) == 2 {
            keys.remove(key);
        }
        outcome
    }

    /// Keys with a turn running or callers waiting for one.
    #[cfg(test)]
    fn busy(&self) -> usize {
        self.keys.lock().expect("turns lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::Turns;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    /// Counts confirmations and numbers them, so callers can tell which
    /// one answered them.
    #[derive(Default)]
    struct Confirmations(AtomicUsize);

    impl Confirmations {
        async fn run(&self, gate: Option<oneshot::Receiver<()>>) -> usize {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(gate) = gate {
                gate.await.unwrap();
            }
            n
        }
    }

    async fn yield_many() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn callers_that_arrive_during_a_turn_share_the_next_and_never_the_running_one() {
        let turns = Arc::new(Turns::<usize>::new("test"));
        let confirmations = Arc::new(Confirmations::default());
        let (open, gate) = oneshot::channel();
        let first = {
            let (turns, confirmations) = (turns.clone(), confirmations.clone());
            tokio::spawn(async move {
                turns
                    .take("k", |_| true, || confirmations.run(Some(gate)))
                    .await
            })
        };
        yield_many().await;
        let waiting: Vec<_> = (0..5)
            .map(|_| {
                let (turns, confirmations) = (turns.clone(), confirmations.clone());
                tokio::spawn(
                    async move { turns.take("k", |_| true, || confirmations.run(None)).await },
                )
            })
            .collect();
        yield_many().await;
        open.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        for caller in waiting {
            assert_eq!(
                caller.await.unwrap(),
                2,
                "each shares the turn after theirs"
            );
        }
        assert_eq!(confirmations.0.load(Ordering::SeqCst), 2);
        assert_eq!(turns.busy(), 0, "an idle key is not kept");
    }

    #[tokio::test]
    async fn a_caller_whose_question_the_last_turn_did_not_answer_runs_its_own() {
        let turns = Arc::new(Turns::<(u64, usize)>::new("test"));
        let confirmations = Arc::new(Confirmations::default());
        let (open, gate) = oneshot::channel();
        let asks = |seq: u64, gate: Option<oneshot::Receiver<()>>| {
            let (turns, confirmations) = (turns.clone(), confirmations.clone());
            tokio::spawn(async move {
                turns
                    .take(
                        "k",
                        |(asked, _)| *asked == seq,
                        || async move { (seq, confirmations.run(gate).await) },
                    )
                    .await
                    .1
            })
        };
        let first = asks(7, Some(gate));
        yield_many().await;
        let (same, other) = (asks(8, None), asks(9, None));
        yield_many().await;
        open.send(()).unwrap();
        assert_eq!(first.await.unwrap(), 1);
        let (same, other) = (same.await.unwrap(), other.await.unwrap());
        assert_eq!(
            [same, other]
                .iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>(),
            [2, 3].into(),
            "a check of revision 8 never answers one of 9"
        );
        assert_eq!(confirmations.0.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_caller_alone_runs_its_own_turn_every_time() {
        let turns = Turns::<usize>::new("test");
        let confirmations = Confirmations::default();
        for n in 1..=3 {
            let got = turns.take("k", |_| true, || confirmations.run(None)).await;
            assert_eq!(got, n, "a finished turn never answers a later caller");
        }
    }
}
