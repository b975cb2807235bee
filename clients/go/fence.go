// FenceGate: the downstream half of fencing, in memory.

package leases

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ErrStaleFence is what every *StaleFenceError matches with errors.Is.
var ErrStaleFence = errors.New("dagnats-leases: stale fence")

// StaleFenceError is a write refused because a write at a higher fence
// was already admitted.
type StaleFenceError struct {
	// Fence is the refused write's fence.
	Fence uint64
	// Highest is the highest fence admitted so far.
	Highest uint64
}

// Error names both fences.
func (e *StaleFenceError) Error() string {
	return fmt.Sprintf("dagnats-leases: fence %d is stale: a write at fence %d was already admitted", e.Fence, e.Highest)
}

// Unwrap makes errors.Is(err, ErrStaleFence) hold.
func (e *StaleFenceError) Unwrap() error {
	return ErrStaleFence
}

// FenceGate admits a write only if its fence is at least the highest
// admitted so far: a paused process that wakes up believing it still owns
// the lease carries an old fence, and this check stops its writes. One gate
// per protected resource; safe for concurrent use. A store that outlives
// the process keeps the fence beside the data instead (see the README's
// PostgreSQL recipe).
type FenceGate struct {
	highest atomic.Uint64
}

// NewFenceGate returns a gate that has admitted nothing yet.
func NewFenceGate() *FenceGate {
	return &FenceGate{}
}

// Admit admits a write at fence, or refuses it with a *StaleFenceError if
// a higher fence was admitted.
func (g *FenceGate) Admit(fence uint64) error {
	for {
		highest := g.highest.Load()
		if fence < highest {
			return &StaleFenceError{Fence: fence, Highest: highest}
		}
		if fence == highest || g.highest.CompareAndSwap(highest, fence) {
			return nil
		}
	}
}

// Highest is the highest fence admitted so far (0 before any).
func (g *FenceGate) Highest() uint64 {
	return g.highest.Load()
}
