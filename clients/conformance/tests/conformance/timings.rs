//! Each library's share of the run: how long its scenarios took in all,
//! and from its first scenario's start to its last one's end.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::library::Library;

#[derive(Default)]
pub struct Timings(Mutex<BTreeMap<Library, Vec<(Instant, Instant)>>>);

impl Timings {
    /// A scenario of `library` that began at `started` has just ended.
    pub fn add(&self, library: Library, started: Instant) {
        let span = (started, Instant::now());
        self.0
            .lock()
            .unwrap()
            .entry(library)
            .or_default()
            .push(span);
    }

    /// One line per library that ran.
    pub fn print(&self) {
        for (library, spans) in self.0.lock().unwrap().iter() {
            let total: f64 = spans.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum();
            let first = spans.iter().map(|s| s.0).min().unwrap();
            let last = spans.iter().map(|s| s.1).max().unwrap();
            println!(
                "conformance: {} ran {} scenarios, {total:.1} s of scenario time, {:.1} s from its first start to its last end",
                library.name(),
                spans.len(),
                (last - first).as_secs_f64(),
            );
        }
    }
}
