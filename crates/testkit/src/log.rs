//! What a child process writes to stderr, kept line by line so a test can
//! wait for an event ("Server is ready") or show the log when it fails.

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines a child process wrote to stderr, shared with its reader thread.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Reads `stream` line by line on a thread of its own.
    pub fn follow(&self, stream: impl std::io::Read + Send + 'static) {
        let lines = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
    }

    /// Every line so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().join("\n")
    }

    /// The first line containing `needle`, waiting up to `timeout`.
    pub async fn wait_for(&self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.0.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return Some(line.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
