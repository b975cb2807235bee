//! What a scenario watches (a driver's event lines, messages on NATS
//! subjects), kept in arrival order with the instant each arrived, and
//! waited for with a deadline.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Items in arrival order, each with the instant it arrived.
pub struct Recorder<T> {
    items: Mutex<Vec<(Instant, T)>>,
    count: watch::Sender<usize>,
}

impl<T: Clone> Default for Recorder<T> {
    fn default() -> Self {
        Recorder {
            items: Mutex::new(Vec::new()),
            count: watch::Sender::new(0),
        }
    }
}

impl<T: Clone> Recorder<T> {
    pub fn push(&self, item: T) {
        let mut items = self.items.lock().unwrap();
        items.push((Instant::now(), item));
        self.count.send_replace(items.len());
    }

    /// Everything so far.
    pub fn all(&self) -> Vec<(Instant, T)> {
        self.items.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    /// The first item from position `from` on that satisfies `wanted`,
    /// waiting up to `within` for it to arrive.
    pub async fn first_from(
        &self,
        from: usize,
        within: Duration,
        wanted: impl Fn(&T) -> bool,
    ) -> Option<(Instant, T)> {
        let mut count = self.count.subscribe();
        let deadline = Instant::now() + within;
        let mut next = from;
        loop {
            {
                let items = self.items.lock().unwrap();
                if let Some(found) = items.iter().skip(next).find(|(_, item)| wanted(item)) {
                    return Some(found.clone());
                }
                next = next.max(items.len());
            }
            // Subscribed before the first scan: any push since wakes this.
            if tokio::time::timeout_at(deadline, count.changed())
                .await
                .is_err()
            {
                return None;
            }
        }
    }
}
