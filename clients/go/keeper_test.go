// Keeper against the real gateway: the holder rules of docs/protocol.md,
// Holder rules and client libraries.

package leases_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/dagnats/dagnats-leases/clients/go/internal/testenv"
	"github.com/nats-io/nats.go"
)

func startKeeper(t *testing.T, c *leases.Client, key, holder string, wait bool) *leases.Keeper {
	t.Helper()
	k := leases.StartKeeper(c, leases.KeeperOptions{Key: key, Holder: holder, TTL: ttl, Wait: wait})
	t.Cleanup(func() { _ = k.Stop(context.Background()) })
	return k
}

func waitOwner(t *testing.T, k *leases.Keeper, within time.Duration) uint64 {
	t.Helper()
	fence, err := k.WaitOwner(ctxFor(t, within))
	if err != nil {
		t.Fatalf("not the owner within %v: %v", within, err)
	}
	return fence
}

// changeEvent reads the event name a change message carries.
func changeEvent(msg *nats.Msg) string {
	switch {
	case msg.Header.Get("Nats-Marker-Reason") != "":
		return "expired"
	case msg.Header.Get("KV-Operation") != "":
		return "released"
	}
	return msg.Header.Get(leases.HeaderEvent)
}

func TestAKeeperAcquiresAndReportsItsFenceAndTenure(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	k := startKeeper(t, c, key, "keeper-a", true)
	fence := waitOwner(t, k, 5*time.Second)
	tenure, ok := k.Tenure()
	if !ok || tenure != fence {
		t.Fatalf("tenure %d %v, fence %d: a fresh tenure starts at its fence", tenure, ok, fence)
	}
	owner, err := c.Owner(ctxFor(t, 5*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	if owner.Holder != "keeper-a" || owner.Revision < fence {
		t.Fatalf("the gateway says %+v, the keeper fence %d", owner, fence)
	}
	if o := k.Ownership(); !o.Owner || o.Tenure != tenure || time.Until(o.Until) > ttl || time.Until(o.Until) <= 0 {
		t.Fatalf("ownership %+v", o)
	}
}

func TestAKeeperRenewsEveryThirdOfItsTTL(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	events := spy(t, connect(t), "dagnats.lease.changed."+key)
	k := startKeeper(t, c, key, "keeper-a", true)
	var renewals []time.Time
	for len(renewals) < 4 {
		msg := next(t, events, 3*time.Second)
		if changeEvent(msg) == "renewed" {
			renewals = append(renewals, time.Now())
		}
	}
	for i := 1; i < len(renewals); i++ {
		if gap := renewals[i].Sub(renewals[i-1]); gap < 800*time.Millisecond || gap > 1300*time.Millisecond {
			t.Fatalf("renewals %v apart, want about ttl/3 = 1 s", gap)
		}
	}
	fence, _ := k.Fence()
	tenure, _ := k.Tenure()
	if fence <= tenure {
		t.Fatalf("renewals raise the fence above the tenure: fence %d, tenure %d", fence, tenure)
	}
}

// holderAndSuccessor starts keeper-a, waits until it owns a new key, then
// starts keeper-b waiting for the same key.
func holderAndSuccessor(t *testing.T) (key string, a, b *leases.Keeper) {
	t.Helper()
	c, key := newClient(t), uniqueKey(t)
	a = startKeeper(t, c, key, "keeper-a", true)
	waitOwner(t, a, 5*time.Second)
	return key, a, startKeeper(t, c, key, "keeper-b", true)
}

func TestAWaitingKeeperTakesOverWithinASecondOfARelease(t *testing.T) {
	t.Parallel()
	_, a, b := holderAndSuccessor(t)
	if _, err := b.WaitOwner(ctxFor(t, 300*time.Millisecond)); leases.KindOf(err) != leases.KindTimeout {
		t.Fatalf("b must wait while a holds the key: %v", err)
	}
	if err := a.Stop(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	waitOwner(t, b, time.Second)
	t.Logf("taken over %v after the release", time.Since(released))
}

// A holder that vanishes without releasing: the server expires its key
// and a waiting keeper takes it within TTL + 1 s.
func TestAWaitingKeeperTakesOverWithinTheTTLOfAVanishedHolder(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	acquired(t, c, key, "vanished")
	since := time.Now()
	b := startKeeper(t, c, key, "keeper-b", true)
	waitOwner(t, b, ttl+time.Second)
	t.Logf("taken over %v after the acquire of a %v lease", time.Since(since), ttl)
}

func TestHandOffMakesTheWaitingSuccessorOwnerAtTheTransferredFenceWithNoFreeMoment(t *testing.T) {
	t.Parallel()
	key, a, b := holderAndSuccessor(t)
	events := spy(t, connect(t), "dagnats.lease.changed."+key)
	grant, err := a.HandOff(ctxFor(t, 5*time.Second), "keeper-b")
	if err != nil {
		t.Fatal(err)
	}
	if !grant.Granted || grant.Holder != "keeper-b" {
		t.Fatalf("hand-off answered %+v", grant)
	}
	if _, ok := a.Fence(); ok {
		t.Fatal("the keeper that handed off still says it owns the key")
	}
	waitOwner(t, b, time.Second)
	if tenure, _ := b.Tenure(); tenure != grant.Revision {
		t.Fatalf("successor's tenure %d, the transfer's revision %d", tenure, grant.Revision)
	}
	// The transfer, then the successor's renewal at its fence: never free.
	for _, want := range []string{"acquired", "renewed"} {
		if got := changeEvent(next(t, events, 2*time.Second)); got != want {
			t.Fatalf("after the hand-off want %s, got %s", want, got)
		}
	}
	if _, err := a.WaitOwner(ctxFor(t, time.Second)); !errors.Is(err, leases.ErrKeeperStopped) || !leases.IsLost(err) {
		t.Fatalf("a keeper that handed off has stopped, kind lost: %v", err)
	}
}

func TestHandOffByAKeeperThatDoesNotHoldIsLost(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	acquired(t, c, key, "other")
	k := startKeeper(t, c, key, "keeper-a", true)
	_, err := k.HandOff(ctxFor(t, 5*time.Second), "keeper-b")
	wantKind(t, err, leases.KindLost)
}

func TestAHandOffToItselfOrToAnInvalidHolderIsInvalidAndTheKeeperKeepsTheLease(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	moves := spy(t, connect(t), "api.leases.*")
	k := startKeeper(t, c, key, "keeper-a", true)
	fence := waitOwner(t, k, 5*time.Second)
	tenure, _ := k.Tenure()
	for _, to := range []string{"keeper-a", "", "a.b", "a b"} {
		_, err := k.HandOff(ctxFor(t, 5*time.Second), to)
		wantKind(t, err, leases.KindInvalid)
	}
	if got, ok := k.Tenure(); !ok || got != tenure {
		t.Fatalf("after the refused hand-offs the keeper says tenure %d %v, want %d", got, ok, tenure)
	}
	owner, err := c.Owner(ctxFor(t, 5*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	if owner.Holder != "keeper-a" || owner.Revision < fence {
		t.Fatalf("the gateway says %+v after the refused hand-offs", owner)
	}
	// Everything sent before that owner request: no transfer, no release.
	for msg := next(t, moves, 5*time.Second); msg.Subject != leases.SubjectOwner; msg = next(t, moves, 5*time.Second) {
		if msg.Subject == leases.SubjectTransfer || msg.Subject == leases.SubjectRelease {
			t.Fatalf("a refused hand-off sent %s %s", msg.Subject, msg.Data)
		}
	}
}

func TestStopReleasesTheLeaseAndClosesChanges(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	k := startKeeper(t, c, key, "keeper-a", true)
	changes := k.Changes()
	if o := <-changes; !o.Owner {
		t.Fatalf("first change %+v", o)
	}
	if err := k.Stop(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Fence(); ok {
		t.Fatal("a stopped keeper says it owns the key")
	}
	owner, err := c.Owner(ctxFor(t, 5*time.Second), key)
	if err != nil || owner.Held {
		t.Fatalf("after stop the key is free, got %+v %v", owner, err)
	}
	last := leases.Ownership{Owner: true}
	for o := range changes {
		last = o
	}
	if last != (leases.Ownership{}) {
		t.Fatalf("the last change before close is not owner, got %+v", last)
	}
	if err := k.Stop(ctxFor(t, time.Second)); err != nil {
		t.Fatalf("a second stop: %v", err)
	}
}

// Renew answering lost ends ownership at once, long before the deadline.
func TestALostRenewalEndsOwnershipAtOnce(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	k := startKeeper(t, c, key, "keeper-a", false)
	waitOwner(t, k, 5*time.Second)
	// Someone else frees the key behind the keeper's back.
	owner, err := c.Owner(ctxFor(t, 5*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Release(ctxFor(t, 5*time.Second), key, "keeper-a", owner.Revision); err != nil {
		t.Fatal(err)
	}
	until := k.Ownership().Until
	eventually(t, 1500*time.Millisecond, "the next renewal ends ownership", func() bool {
		_, ok := k.Fence()
		return !ok
	})
	if !time.Now().Before(until) {
		t.Fatalf("ownership ended at the deadline, not on lost")
	}
	_, err = k.WaitOwner(ctxFor(t, time.Second))
	wantKind(t, err, leases.KindLost)
}

// The gateway stops answering (frozen): the keeper cannot renew, and Fence
// turns false at the deadline its last granting request set, no later.
func TestFenceIsFalseFromTheDeadlineWhenTheGatewayStopsAnswering(t *testing.T) {
	t.Parallel()
	own := testenv.Start(t)
	c := leases.NewClient(own.Connect(t), leases.WithTimeout(time.Second))
	k := startKeeper(t, c, uniqueKey(t), "keeper-a", true)
	changes := k.Changes()
	last := <-changes
	if !last.Owner {
		t.Fatalf("first change %+v", last)
	}
	if err := own.Gateway.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = own.Gateway.Signal(syscall.SIGCONT) })
	frozen := time.Now()
	// A renewal may still have landed just before the freeze.
	for o := range changes {
		if !o.Owner {
			break
		}
		last = o
	}
	ended := time.Now()
	if ended.Before(last.Until) || ended.Sub(last.Until) > 100*time.Millisecond {
		t.Fatalf("ownership ended %v after its deadline", ended.Sub(last.Until))
	}
	if last.Until.After(frozen.Add(ttl)) {
		t.Fatalf("the deadline %v is past the freeze plus the TTL", last.Until.Sub(frozen))
	}
	if _, ok := k.Fence(); ok {
		t.Fatal("Fence after the deadline")
	}
}

func TestWaitOwnerEndsWithKindTimeoutWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	acquired(t, c, key, "other")
	k := startKeeper(t, c, key, "keeper-a", true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := k.WaitOwner(ctx)
	wantKind(t, err, leases.KindTimeout)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the context's error kept: %v", err)
	}
}

func TestAKeeperThatDoesNotWaitEndsWhenTheKeyIsHeld(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	grant := acquired(t, c, key, "other")
	k := startKeeper(t, c, key, "keeper-a", false)
	_, err := k.WaitOwner(ctxFor(t, 5*time.Second))
	lerr := wantKind(t, err, leases.KindLost)
	if lerr.Holder != "other" || lerr.Revision != grant.Revision {
		t.Fatalf("the error names the holder: %+v", lerr)
	}
	if _, open := <-k.Changes(); open {
		t.Fatal("Changes stays open after the keeper ended")
	}
}

func TestStartKeeperRefusesOutOfBoundsOptions(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, opts := range []leases.KeeperOptions{
		{Key: "a.b", Holder: "h", TTL: ttl},
		{Key: "k", Holder: "", TTL: ttl},
		{Key: "k", Holder: "h", TTL: 1500 * time.Millisecond},
	} {
		k := leases.StartKeeper(c, opts)
		_, err := k.WaitOwner(ctxFor(t, time.Second))
		wantKind(t, err, leases.KindInvalid)
	}
}

func TestAKeeperEndsWithKindUnavailableWhenItsConnectionIsClosedForGood(t *testing.T) {
	t.Parallel()
	key := uniqueKey(t)
	acquired(t, newClient(t), key, "other")
	nc := connect(t)
	k := startKeeper(t, leases.NewClient(nc), key, "keeper-a", true)
	nc.Close()
	_, err := k.WaitOwner(ctxFor(t, ttl+2*time.Second))
	wantKind(t, err, leases.KindUnavailable)
}
