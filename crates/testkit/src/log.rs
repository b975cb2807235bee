//! What a child process writes to stderr, kept line by line so a test can
//! wait for an event ("Server is ready") or show the log when it fails.

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lines a child process wrote to stderr, shared with its reader thread.
#[derive(Clone, Default)]
pub struct Log(Arc<Lines>);

#[derive(Default)]
struct Lines {
    lines: Mutex<Vec<String>>,
    /// The stream reached its end: every line the process wrote is here.
    ended: AtomicBool,
}

impl Log {
    /// Reads `stream` line by line on a thread of its own.
    pub fn follow(&self, stream: impl std::io::Read + Send + 'static) {
        let shared = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                shared.lines.lock().unwrap().push(line);
            }
            shared.ended.store(true, Ordering::Release);
        });
    }

    /// Every line so far.
    pub fn text(&self) -> String {
        self.0.lines.lock().unwrap().join("\n")
    }

    /// Whether the reader reached the end of the stream: after a process
    /// exits, only then are its last lines here.
    pub fn ended(&self) -> bool {
        self.0.ended.load(Ordering::Acquire)
    }

    /// The first line containing `needle`, waiting up to `timeout`.
    pub async fn wait_for(&self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self
                .0
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return Some(line.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
