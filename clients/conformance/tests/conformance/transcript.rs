//! A scenario's transcript: every line the runner wrote to a driver and
//! read from it, and what the runner did (signals, gateway pauses), each
//! at its time since the scenario began. Shown when the scenario fails.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

#[derive(Clone)]
pub struct Transcript(Arc<Inner>);

struct Inner {
    began: Instant,
    lines: Mutex<Vec<String>>,
}

impl Transcript {
    pub fn new() -> Self {
        Transcript(Arc::new(Inner {
            began: Instant::now(),
            lines: Mutex::new(Vec::new()),
        }))
    }

    /// One line from `who` (a driver's label, or `runner`).
    pub fn note(&self, who: &str, what: impl AsRef<str>) {
        let at = self.secs(Instant::now());
        let line = format!("{at:8.3}s {who:>6} {}", what.as_ref());
        self.0.lines.lock().unwrap().push(line);
    }

    /// `at` as the transcript shows times: seconds since the scenario
    /// began.
    pub fn secs(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.0.began).as_secs_f64()
    }

    pub fn text(&self) -> String {
        self.0.lines.lock().unwrap().join("\n")
    }
}
