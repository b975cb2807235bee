//! A scenario's transcript: every line the runner wrote to a driver and
//! read from it, and what the runner did (signals, gateway pauses), each
//! at its time since the scenario began. Shown when the scenario fails.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

/// The most of one line a failure report shows: a forward's payload can
/// make a request line a megabyte.
const SHOWN_BYTES: usize = 1000;

/// `text`, cut after [`SHOWN_BYTES`] with how much was left out.
pub fn clipped(text: &str) -> String {
    if text.len() <= SHOWN_BYTES {
        return text.to_string();
    }
    let end = (0..=SHOWN_BYTES)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}... ({} bytes in all)", &text[..end], text.len())
}

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
        let line = format!("{at:8.3}s {who:>6} {}", clipped(what.as_ref()));
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
