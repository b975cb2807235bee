"""`FenceGate`: the downstream half of fencing, in memory.

A paused process that wakes up believing it still owns the lease carries an
old fence; only the store it writes to can refuse that write. `FenceGate`
is that check for a resource kept in this process: it admits a write only
if its fence is at least the highest admitted so far. For a database, put
the same check in the write itself (see the README's "fence your writes").
"""

from __future__ import annotations

import threading


class StaleFence(Exception):
    """A write refused because a write at a higher fence was already admitted."""

    fence: int
    highest: int

    def __init__(self, fence: int, highest: int) -> None:
        super().__init__(f"fence {fence} is stale: a write at fence {highest} was already admitted")
        self.fence = fence
        self.highest = highest


class FenceGate:
    """Admits a write only if its fence is at least the highest seen; one
    gate per protected resource. Safe to share between threads."""

    def __init__(self) -> None:
        self._highest = 0
        self._lock = threading.Lock()

    def admit(self, fence: int) -> None:
        """Admits a write at ``fence``, or raises `StaleFence` if a higher
        fence was admitted before."""
        if isinstance(fence, bool) or not isinstance(fence, int) or fence < 0:
            raise ValueError(f"a fence is a revision, a whole number from 0, got {fence!r}")
        with self._lock:
            if fence < self._highest:
                raise StaleFence(fence, self._highest)
            self._highest = fence

    @property
    def highest(self) -> int:
        """The highest fence admitted so far (0 before any)."""
        return self._highest
