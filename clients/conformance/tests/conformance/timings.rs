//! Each library's share of the run (how long its scenarios took in all,
//! and from its first scenario's start to its last one's end), and the
//! figures timed scenarios measured, side by side for every library.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::time::Instant;

use crate::library::Library;

/// What timed scenarios measured: (scenario, what) to each library's
/// figure, in milliseconds.
type Figures = BTreeMap<(String, String), Vec<(Library, f64)>>;

#[derive(Default)]
pub struct Timings {
    spans: Mutex<BTreeMap<Library, Vec<(Instant, Instant)>>>,
    figures: Mutex<Figures>,
}

impl Timings {
    /// A scenario of `library` that began at `started` has just ended.
    pub fn add(&self, library: Library, started: Instant) {
        let span = (started, Instant::now());
        self.spans
            .lock()
            .unwrap()
            .entry(library)
            .or_default()
            .push(span);
    }

    /// `scenario` of `library` measured `what` as `ms` milliseconds.
    pub fn figure(&self, scenario: &str, what: &str, library: Library, ms: f64) {
        let mut figures = self.figures.lock().unwrap();
        let entry = figures.entry((scenario.into(), what.into())).or_default();
        entry.push((library, ms));
    }

    /// One line per library that ran, then one per figure.
    pub fn print(&self) {
        for (library, spans) in self.spans.lock().unwrap().iter() {
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
        for ((scenario, what), measures) in self.figures.lock().unwrap().iter_mut() {
            measures.sort_by_key(|(library, _)| *library);
            let shown: Vec<String> = measures
                .iter()
                .map(|(library, ms)| format!("{} {ms:.0} ms", library.name()))
                .collect();
            println!("conformance: {scenario}: {what}: {}", shown.join(", "));
        }
    }
}
