// Keeper: holds one lease for as long as the process is healthy.

package leases

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Delays between attempts after a failed call that was not lost.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 2 * time.Second
)

// changesBuffer is how many ownership changes wait for a slow reader of
// Changes before the oldest is dropped.
const changesBuffer = 64

// ErrKeeperStopped is what WaitOwner answers once the keeper was stopped
// or handed its lease off: a *LeaseError of kind lost, so both
// errors.Is(err, ErrKeeperStopped) and the kind tell it.
var ErrKeeperStopped error = &LeaseError{Kind: KindLost, Message: "the keeper has stopped"}

// KeeperOptions says which lease a Keeper keeps.
type KeeperOptions struct {
	// Key is the lease's key.
	Key string
	// Holder is this process's holder id; unique per process.
	Holder string
	// TTL is the lease's TTL: whole seconds from 1 s to 10 min.
	TTL time.Duration
	// Wait keeps trying until granted, and again after a loss, rather than
	// ending when someone else holds the key.
	Wait bool
}

// Ownership is whether this process may act as owner, as a Keeper
// publishes it on every change: taking the lease, each renewal (the fence
// goes up), and the end of ownership.
type Ownership struct {
	// Owner is true while this process holds the lease.
	Owner bool
	// Tenure is the revision that started this tenure (the acquire's, or
	// the transfer's that named this holder); renew keeps it.
	Tenure uint64
	// Fence is the current revision: send it with every write.
	Fence uint64
	// Until is when the entitlement runs out unless a renewal lands,
	// on this process's monotonic clock.
	Until time.Time
}

// Keeper keeps one lease: it acquires it (waiting, if asked, woken by the
// key's change events rather than by polling), renews it every third of
// its TTL, and tells the process whether it may act as owner now.
//
// Ownership ends the moment a renewal answers lost, or the moment the lease
// may have run out without a renewal landing. That moment is the start of
// the request that granted or renewed the lease plus its TTL (never past
// the reply's expires_at), on this process's monotonic clock: no reply
// delay, clock step or pause of the process can stretch it.
//
// A waiting keeper that a transfer names takes the lease over at the
// transferred fence, with no moment in which the key is free; its
// entitlement starts from its own renewal at that fence.
type Keeper struct {
	client *Client
	opts   KeeperOptions

	mu      sync.Mutex
	state   Ownership
	changed chan struct{} // closed and replaced at every change of state
	endErr  error         // why the keeper ended on its own
	stopErr error         // a failed release on stop
	stopCtx context.Context

	changes    chan Ownership
	handOffs   chan handOffRequest
	stopping   chan struct{}
	stopOnce   sync.Once
	loopCtx    context.Context
	cancelLoop context.CancelFunc
	done       chan struct{}
}

type handOffRequest struct {
	ctx   context.Context
	to    string
	reply chan handOffResult
}

type handOffResult struct {
	grant Grant
	err   error
}

// StartKeeper starts keeping opts.Key in the background. Options out of the
// protocol's bounds end it at once: WaitOwner then returns the kind
// invalid error.
func StartKeeper(client *Client, opts KeeperOptions) *Keeper {
	loopCtx, cancel := context.WithCancel(context.Background())
	k := &Keeper{
		client:     client,
		opts:       opts,
		changed:    make(chan struct{}),
		changes:    make(chan Ownership, changesBuffer),
		handOffs:   make(chan handOffRequest),
		stopping:   make(chan struct{}),
		loopCtx:    loopCtx,
		cancelLoop: cancel,
		done:       make(chan struct{}),
	}
	_, ttlErr := ttlMillis(opts.TTL)
	if err := firstError(checkName("key", opts.Key), checkName("holder", opts.Holder), ttlErr); err != nil {
		k.endErr = err
		k.finish()
		return k
	}
	go k.keep()
	return k
}

// Key is the key this keeper keeps.
func (k *Keeper) Key() string {
	return k.opts.Key
}

// Fence is the fence to send with a write, and true, if this process may
// act as owner now; 0 and false otherwise.
func (k *Keeper) Fence() (uint64, bool) {
	o, ok := k.current()
	return o.Fence, ok
}

// Tenure is the revision that started the current tenure, and true, if
// this process may act as owner now; 0 and false otherwise.
func (k *Keeper) Tenure() (uint64, bool) {
	o, ok := k.current()
	return o.Tenure, ok
}

// Ownership is the last published ownership. Unlike Fence, it does not
// check the clock: compare Until with time.Now before acting on it.
func (k *Keeper) Ownership() Ownership {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

func (k *Keeper) current() (Ownership, bool) {
	k.mu.Lock()
	o := k.state
	k.mu.Unlock()
	if o.Owner && time.Now().Before(o.Until) {
		return o, true
	}
	return Ownership{}, false
}

// WaitOwner waits until this process may act as owner and returns the
// fence. It fails with kind timeout when ctx ends first, with
// ErrKeeperStopped once the keeper is stopped, and with the reason when
// the keeper ends on its own: kind lost when a keeper that does not wait
// finds another holder or loses the lease, kind unavailable when its NATS
// connection is closed for good.
func (k *Keeper) WaitOwner(ctx context.Context) (uint64, error) {
	for {
		if fence, ok := k.Fence(); ok {
			return fence, nil
		}
		k.mu.Lock()
		changed := k.changed
		k.mu.Unlock()
		select {
		case <-changed:
		case <-k.done:
			return 0, k.endError()
		case <-ctx.Done():
			return 0, &LeaseError{Kind: KindTimeout, Message: "not the owner of " + k.opts.Key + " before the context ended", Err: ctx.Err()}
		}
	}
}

func (k *Keeper) endError() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.endErr != nil {
		return k.endErr
	}
	return ErrKeeperStopped
}

// Changes delivers every change of ownership, then is closed when the
// keeper ends. There is one channel per keeper: read it from one
// goroutine. A reader more than 64 changes behind loses the oldest, never
// the latest.
func (k *Keeper) Changes() <-chan Ownership {
	return k.changes
}

// HandOff hands the lease over to holder to, and stops the keeper: this
// process stops acting as owner first, then one transfer at the current
// fence makes to the holder (a keeper of to waiting for the key takes it
// over at once). The reply is to's new lease: its Revision is to's tenure.
// Kind lost if this keeper does not hold the lease; on any other failure
// the lease is released, as by Stop, so that to can acquire it. A to that
// is not another valid holder id is kind invalid before anything happens,
// and the keeper goes on keeping the lease.
func (k *Keeper) HandOff(ctx context.Context, to string) (Grant, error) {
	if err := checkSuccessor(k.opts.Holder, to); err != nil {
		return Grant{}, err
	}
	req := handOffRequest{ctx: ctx, to: to, reply: make(chan handOffResult, 1)}
	select {
	case k.handOffs <- req:
	case <-k.done:
		return Grant{}, notTheOwner(k.opts.Key)
	case <-ctx.Done():
		_ = k.Stop(context.Background())
		return Grant{}, &LeaseError{Kind: KindTimeout, Message: "the hand-off's context ended before it started", Err: ctx.Err()}
	}
	res := <-req.reply
	<-k.done
	return res.grant, res.err
}

// Stop stops renewing and releases the lease if held, then returns; ctx
// bounds the release. A release answered lost (the lease had already
// ended) is not an error. Stop is safe to call more than once.
func (k *Keeper) Stop(ctx context.Context) error {
	k.stopOnce.Do(func() {
		k.mu.Lock()
		k.stopCtx = ctx
		k.mu.Unlock()
		close(k.stopping)
		k.cancelLoop()
	})
	select {
	case <-k.done:
	case <-ctx.Done():
		return &LeaseError{Kind: KindTimeout, Message: "the keeper did not stop before the context ended", Err: ctx.Err()}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopErr
}

func notTheOwner(key string) error {
	return &LeaseError{Kind: KindLost, Message: "this keeper does not hold the lease on " + key}
}

// Tenures returns the tenure function ServeInbox needs for the keys these
// keepers keep: each key's keeper's Tenure, and false for any other key.
func Tenures(keepers ...*Keeper) func(key string) (uint64, bool) {
	byKey := make(map[string]*Keeper, len(keepers))
	for _, k := range keepers {
		byKey[k.opts.Key] = k
	}
	return func(key string) (uint64, bool) {
		if k, ok := byKey[key]; ok {
			return k.Tenure()
		}
		return 0, false
	}
}

// publish makes state the current ownership and tells Changes; a full
// channel loses its oldest change, never this one.
func (k *Keeper) publish(state Ownership) {
	k.mu.Lock()
	if state == k.state {
		k.mu.Unlock()
		return
	}
	k.state = state
	close(k.changed)
	k.changed = make(chan struct{})
	k.mu.Unlock()
	for {
		select {
		case k.changes <- state:
			return
		default:
		}
		select {
		case <-k.changes:
		default:
		}
	}
}

// finish ends the keeper: not the owner, Changes closed, waiters woken.
func (k *Keeper) finish() {
	k.publish(Ownership{})
	close(k.changes)
	close(k.done)
}

func (k *Keeper) endWith(err error) {
	k.mu.Lock()
	k.endErr = err
	k.mu.Unlock()
}

func (k *Keeper) isStopping() bool {
	select {
	case <-k.stopping:
		return true
	default:
		return false
	}
}

// entitledUntil is when a grant stops entitling us to act: ttl after the
// request started, and never past the reply's expires_at.
func entitledUntil(started time.Time, lease Lease) time.Time {
	byTTL := started.Add(lease.TTL())
	now := time.Now()
	byExpiry := now.Add(lease.ExpiresAt.Sub(now))
	if byExpiry.Before(byTTL) {
		return byExpiry
	}
	return byTTL
}

// keep acquires (or takes over a transfer), holds, and waits for the key,
// until stopped.
func (k *Keeper) keep() {
	defer k.finish()
	retry := retryMin
	var transferred uint64
	// When this wait for the key began: each try says how long ago.
	var waitingSince time.Time
	for {
		// Subscribed before the acquire, so a release that lands while the
		// acquire is in flight still wakes us.
		events, sub := k.watchChanges()
		started := time.Now()
		// A transfer named us: renewing at its fence is the request our
		// entitlement counts from; otherwise, acquire.
		takingOver := transferred
		transferred = 0
		var grant Grant
		var err error
		switch {
		case takingOver != 0:
			grant, err = k.client.Renew(k.loopCtx, k.opts.Key, k.opts.Holder, takingOver, k.opts.TTL)
		case k.opts.Wait:
			if waitingSince.IsZero() {
				waitingSince = started
			}
			waited := started.Sub(waitingSince)
			grant, err = k.client.AcquireWaited(k.loopCtx, k.opts.Key, k.opts.Holder, k.opts.TTL, waited)
		default:
			grant, err = k.client.Acquire(k.loopCtx, k.opts.Key, k.opts.Holder, k.opts.TTL)
		}
		if k.isStopping() {
			unsubscribe(sub)
			if err == nil && grant.Granted {
				k.release(grant.Revision)
			}
			return
		}
		var waitFor time.Duration
		switch {
		case err == nil && grant.Granted && entitledUntil(started, grant.Lease).After(time.Now()):
			unsubscribe(sub)
			retry = retryMin
			waitingSince = time.Time{}
			tenure := takingOver
			if tenure == 0 {
				tenure = grant.Revision
			}
			if stopped := k.hold(started, tenure, grant.Lease); stopped {
				return
			}
			if !k.opts.Wait {
				k.endWith(&LeaseError{Kind: KindLost, Message: "the lease on " + k.opts.Key + " was lost and the keeper does not wait"})
				return
			}
			continue
		case err == nil && grant.Granted:
			// Granted, but by the conservative clock already run out.
			waitFor = retryMin
		case err == nil:
			if !k.opts.Wait {
				unsubscribe(sub)
				k.endWith(&LeaseError{Kind: KindLost, Message: grant.Holder + " holds " + k.opts.Key + " and the keeper does not wait", Holder: grant.Holder, Revision: grant.Revision})
				return
			}
			// Woken by its release or expiry; failing that, when it
			// should have run out anyway.
			waitFor = clamp(time.Until(grant.ExpiresAt), retryMin, k.opts.TTL) + retryMin
		case IsLost(err):
			// The transfer was overtaken (released, revoked, moved on).
			waitFor = retryMin
		case k.client.Conn().IsClosed():
			unsubscribe(sub)
			k.endWith(&LeaseError{Kind: KindUnavailable, Message: "the NATS connection is closed for good", Err: err})
			return
		default:
			// A takeover's renew is retried as it was sent: the same
			// renew answers the same, whether or not it landed.
			transferred = takingOver
			retry *= 2
			if retry > retryMax {
				retry = retryMax
			}
			waitFor = retry
		}
		stopped := k.waitForKey(events, waitFor, &transferred)
		unsubscribe(sub)
		if stopped {
			return
		}
	}
}

// waitForKey waits until the key is freed (released or expired) or handed
// to us, or waitFor passes; true when the keeper is to end.
func (k *Keeper) waitForKey(events <-chan *nats.Msg, waitFor time.Duration, transferred *uint64) bool {
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	for {
		select {
		case <-k.stopping:
			return true
		case <-timer.C:
			return false
		case msg := <-events:
			c, ok := decodeChange(msg)
			if !ok {
				continue
			}
			if c.endsTenure() {
				return false
			}
			if c.event == eventAcquired && c.holder == k.opts.Holder {
				*transferred = c.revision
				return false
			}
		case req := <-k.handOffs:
			req.reply <- handOffResult{err: notTheOwner(k.opts.Key)}
			return true
		}
	}
}

// hold renews every ttl/3 until stopped (true), lost or run out (false),
// or handed off (true), publishing ownership as it goes.
func (k *Keeper) hold(started time.Time, tenure uint64, lease Lease) bool {
	fence := lease.Revision
	until := entitledUntil(started, lease)
	nextRenew := started.Add(k.opts.TTL / 3)
	k.publish(Ownership{Owner: true, Tenure: tenure, Fence: fence, Until: until})
	retry := retryMin
	for {
		runOut := time.NewTimer(time.Until(until))
		renewAt := time.NewTimer(time.Until(nextRenew))
		var req handOffRequest
		handOff, stop := false, false
		select {
		case <-k.stopping:
			stop = true
		case <-runOut.C:
		case <-renewAt.C:
		case req = <-k.handOffs:
			handOff = true
		}
		runOut.Stop()
		renewAt.Stop()
		switch {
		case stop:
			k.release(fence)
			return true
		case handOff:
			k.handOff(fence, req)
			return true
		case !time.Now().Before(until):
			// Checked before renewing: a process paused past its
			// deadline wakes with both timers due.
			k.publish(Ownership{})
			return false
		}

		renewStarted := time.Now()
		ctx, cancel := context.WithDeadline(k.loopCtx, until)
		grant, err := k.client.Renew(ctx, k.opts.Key, k.opts.Holder, fence, k.opts.TTL)
		cancel()
		if err == nil && !grant.Granted {
			err = &LeaseError{Kind: KindLost, Message: "renew was not granted"}
		}
		if err == nil {
			fence = grant.Revision
		}
		switch {
		case k.isStopping():
			k.release(fence)
			return true
		case err == nil:
			until = entitledUntil(renewStarted, grant.Lease)
			nextRenew = renewStarted.Add(k.opts.TTL / 3)
			retry = retryMin
			k.publish(Ownership{Owner: true, Tenure: tenure, Fence: fence, Until: until})
		case IsLost(err) || !time.Now().Before(until):
			k.publish(Ownership{})
			return false
		default:
			// Retrying at the same fence is safe: a renew whose reply was
			// lost gets the same answer again.
			nextRenew = time.Now().Add(retry)
			retry *= 2
			if retry > retryMax {
				retry = retryMax
			}
		}
	}
}

// release stops acting as owner, then frees the lease at fence, within the
// context Stop was given.
func (k *Keeper) release(fence uint64) {
	k.publish(Ownership{})
	k.mu.Lock()
	ctx := k.stopCtx
	k.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	k.releaseWithin(ctx, fence)
}

func (k *Keeper) releaseWithin(ctx context.Context, fence uint64) {
	_, err := k.client.Release(ctx, k.opts.Key, k.opts.Holder, fence)
	if err != nil && !IsLost(err) {
		k.mu.Lock()
		k.stopErr = err
		k.mu.Unlock()
	}
}

// handOff stops acting as owner, then transfers at fence. A failure other
// than lost may or may not have moved the lease: the release that follows
// frees it if it did not (and is refused if it did).
func (k *Keeper) handOff(fence uint64, req handOffRequest) {
	k.publish(Ownership{})
	grant, err := k.client.Transfer(req.ctx, k.opts.Key, k.opts.Holder, fence, req.to, k.opts.TTL)
	if err != nil && !IsLost(err) {
		k.releaseWithin(req.ctx, fence)
	}
	req.reply <- handOffResult{grant: grant, err: err}
}

// watchChanges subscribes to the key's change events; with no
// subscription the keeper still wakes on its timer.
func (k *Keeper) watchChanges() (<-chan *nats.Msg, *nats.Subscription) {
	events := make(chan *nats.Msg, changesBuffer)
	sub, err := k.client.Conn().ChanSubscribe(changedSubject(k.opts.Key), events)
	if err != nil {
		return nil, nil
	}
	return events, sub
}

func unsubscribe(sub *nats.Subscription) {
	if sub != nil {
		_ = sub.Unsubscribe()
	}
}

func clamp(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		return lo
	}
	if d > hi {
		return hi
	}
	return d
}
