//! Flapping keys: a key whose holder changed more than
//! [`FLAP_HANDOVERS`] times within [`FLAP_WINDOW`] shows on `/metrics`
//! until it calms down (docs/protocol.md, Tenure history).

use std::collections::VecDeque;
use std::time::Duration;

use foldhash::{HashMap, HashSet};
use time::OffsetDateTime;

use crate::metrics;

/// Hand-overs within [`FLAP_WINDOW`] beyond which a key is flapping.
pub(crate) const FLAP_HANDOVERS: usize = 5;
/// The window hand-overs are counted in.
pub(crate) const FLAP_WINDOW: Duration = Duration::from_secs(600);

/// Each key's recent hand-overs, and which keys flap now.
#[derive(Debug, Default)]
pub(crate) struct Flapping {
    recent: HashMap<String, VecDeque<OffsetDateTime>>,
    flapping: HashSet<String>,
}

impl Flapping {
    /// Counts a hand-over of `key` at `at`.
    pub(crate) fn handover(&mut self, key: &str, at: OffsetDateTime) {
        self.recent
            .entry(key.to_string())
            .or_default()
            .push_back(at);
        self.update(key, at);
    }

    /// Forgets hand-overs older than the window as of `now`, so a key that
    /// calmed down stops flapping.
    pub(crate) fn sweep(&mut self, now: OffsetDateTime) {
        let keys: Vec<String> = self.recent.keys().cloned().collect();
        for key in keys {
            self.update(&key, now);
        }
    }

    /// Whether `key` flaps now.
    #[cfg(test)]
    pub(crate) fn is_flapping(&self, key: &str) -> bool {
        self.flapping.contains(key)
    }

    fn update(&mut self, key: &str, now: OffsetDateTime) {
        let count = match self.recent.get_mut(key) {
            Some(times) => {
                while times.front().is_some_and(|at| now - *at > FLAP_WINDOW) {
                    times.pop_front();
                }
                times.len()
            }
            None => 0,
        };
        if count == 0 {
            self.recent.remove(key);
        }
        let flaps = count > FLAP_HANDOVERS;
        let changed = if flaps {
            self.flapping.insert(key.to_string())
        } else {
            self.flapping.remove(key)
        };
        if changed {
            metrics::key_flapping(key, flaps, self.flapping.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-10-18 12:00 UTC);

    #[test]
    fn a_key_flaps_past_the_threshold_within_the_window_and_stops_once_it_calms_down() {
        let mut flapping = Flapping::default();
        for i in 0..FLAP_HANDOVERS as u64 {
            flapping.handover("k", T0 + Duration::from_secs(i));
        }
        assert!(
            !flapping.is_flapping("k"),
            "{FLAP_HANDOVERS} is not more than {FLAP_HANDOVERS}"
        );
        flapping.handover("k", T0 + Duration::from_secs(10));
        assert!(flapping.is_flapping("k"));
        flapping.sweep(T0 + FLAP_WINDOW + Duration::from_secs(1));
        assert!(
            !flapping.is_flapping("k"),
            "the first hand-over left the window"
        );
        flapping.sweep(T0 + FLAP_WINDOW * 2);
        assert!(flapping.recent.is_empty(), "nothing kept of a calm key");
    }

    #[test]
    fn hand_overs_spread_wider_than_the_window_never_flap() {
        let mut flapping = Flapping::default();
        for i in 0..20u32 {
            flapping.handover("k", T0 + FLAP_WINDOW / 4 * i);
            assert!(!flapping.is_flapping("k"), "at hand-over {i}");
        }
    }
}
