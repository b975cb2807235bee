// FenceGate: admits equal and higher fences, refuses lower ones, under
// concurrency too.

package leases_test

import (
	"errors"
	"sync"
	"testing"

	leases "github.com/dagnats/dagnats-leases/clients/go"
)

func TestFenceGateAdmitsEqualAndHigherFencesAndRefusesLowerOnes(t *testing.T) {
	gate := leases.NewFenceGate()
	for _, fence := range []uint64{7, 7, 9} {
		if err := gate.Admit(fence); err != nil {
			t.Fatalf("admit %d: %v", fence, err)
		}
	}
	err := gate.Admit(8)
	var stale *leases.StaleFenceError
	if !errors.As(err, &stale) || *stale != (leases.StaleFenceError{Fence: 8, Highest: 9}) {
		t.Fatalf("want a stale fence 8 below 9, got %v", err)
	}
	if !errors.Is(err, leases.ErrStaleFence) || gate.Highest() != 9 {
		t.Fatalf("errors.Is ErrStaleFence: %v; highest %d", errors.Is(err, leases.ErrStaleFence), gate.Highest())
	}
}

func TestFenceGateNeverLowersItsHighestFenceUnderConcurrentWriters(t *testing.T) {
	gate := leases.NewFenceGate()
	var writers sync.WaitGroup
	for w := uint64(1); w <= 8; w++ {
		writers.Add(1)
		go func(w uint64) {
			defer writers.Done()
			for f := uint64(0); f < 1000; f++ {
				fence := f*8 + w
				err := gate.Admit(fence)
				if err == nil && gate.Highest() < fence {
					t.Errorf("admitted %d but the highest is %d", fence, gate.Highest())
				}
			}
		}(w)
	}
	writers.Wait()
	if gate.Highest() != 999*8+8 {
		t.Fatalf("highest %d", gate.Highest())
	}
}
