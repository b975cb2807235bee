//! [`FenceGate`]: the downstream half of fencing.
//!
//! "Have the downstream store reject any revision lower than the highest it
//! has seen": a paused process that wakes up believing it still owns the
//! lease carries an old fence, and only this check stops its writes.

use std::sync::atomic::{AtomicU64, Ordering};

/// A write refused because a newer owner has already written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("fence {fence} is stale: a write at fence {highest} was already accepted")]
pub struct StaleFence {
    pub fence: u64,
    pub highest: u64,
}

/// Accepts a write only if its fence is at least the highest seen. One gate
/// per protected resource; thread-safe, lock-free.
///
/// ```
/// use dagnats_leases_client::FenceGate;
///
/// let gate = FenceGate::default();
/// assert!(gate.admit(42).is_ok()); // the owner at revision 42 writes
/// assert!(gate.admit(45).is_ok()); // it renewed: revision 45
/// assert!(gate.admit(50).is_ok()); // a new owner took over at 50
/// let stale = gate.admit(45).unwrap_err(); // the old owner wakes up
/// assert_eq!((stale.fence, stale.highest), (45, 50));
/// ```
#[derive(Debug, Default)]
pub struct FenceGate {
    highest: AtomicU64,
}

impl FenceGate {
    /// Admits a write at `fence`, or refuses it if a higher fence was seen.
    pub fn admit(&self, fence: u64) -> Result<(), StaleFence> {
        let previous = self.highest.fetch_max(fence, Ordering::AcqRel);
        if fence < previous {
            return Err(StaleFence {
                fence,
                highest: previous,
            });
        }
        Ok(())
    }

    /// The highest fence admitted so far.
    pub fn highest(&self) -> u64 {
        self.highest.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_fences_are_admitted_and_lower_ones_refused() {
        let gate = FenceGate::default();
        assert_eq!(gate.admit(7), Ok(()));
        assert_eq!(gate.admit(7), Ok(()));
        assert_eq!(
            gate.admit(6),
            Err(StaleFence {
                fence: 6,
                highest: 7
            })
        );
        assert_eq!(gate.highest(), 7);
    }

    #[test]
    fn concurrent_writers_never_lower_the_highest_fence() {
        let gate = std::sync::Arc::new(FenceGate::default());
        let threads: Vec<_> = (1..=8u64)
            .map(|t| {
                let gate = gate.clone();
                std::thread::spawn(move || {
                    for f in 0..1_000 {
                        let _ = gate.admit(f * 8 + t);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(gate.highest(), 999 * 8 + 8);
    }
}
