// ServeInbox and Forward against the real gateway: the three rejection
// rules, the acceptance, and forward's error kinds.

package leases_test

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/nats-io/nats.go"
)

// serve runs an inbox for holder, counting the requests its handler gets.
func serve(t *testing.T, nc *nats.Conn, holder string, tenure leases.TenureFunc, reply func(leases.InboxRequest) []byte) *int64 {
	t.Helper()
	var handled int64
	sub, err := leases.ServeInbox(nc, holder, tenure, func(req leases.InboxRequest) []byte {
		atomic.AddInt64(&handled, 1)
		return reply(req)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return &handled
}

// owning starts a keeper of a new key for holder with an inbox answering
// with reply, and waits until it owns the key.
func owning(t *testing.T, holder string, reply func(leases.InboxRequest) []byte) (*leases.Client, *leases.Keeper, string, *int64) {
	t.Helper()
	nc, key := connect(t), uniqueKey(t)
	c := leases.NewClient(nc)
	k := startKeeper(t, c, key, holder, true)
	handled := serve(t, nc, holder, leases.Tenures(k), reply)
	waitOwner(t, k, 5*time.Second)
	return c, k, key, handled
}

func echo(req leases.InboxRequest) []byte {
	return append([]byte("echo:"+req.Key+":"+strconv.FormatUint(req.Fence, 10)+":"), req.Payload...)
}

func TestAForwardAtTheOwnersFenceReachesTheHandler(t *testing.T) {
	t.Parallel()
	c, k, key, handled := owning(t, "owner-a", echo)
	got, err := c.Forward(ctxFor(t, 5*time.Second), key, []byte("hi"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fence, _ := k.Fence()
	tenure, _ := k.Tenure()
	if got.Key != key || got.Holder != "owner-a" || got.Revision < tenure || got.Revision > fence {
		t.Fatalf("forward answered %+v; tenure %d, fence %d", got, tenure, fence)
	}
	want := "echo:" + key + ":" + strconv.FormatUint(got.Revision, 10) + ":hi"
	if string(got.Payload) != want || atomic.LoadInt64(handled) != 1 {
		t.Fatalf("payload %q, want %q; handled %d", got.Payload, want, atomic.LoadInt64(handled))
	}
}

// Rule one: a process not acting as owner of the key rejects; the gateway
// answers owner_rejected, naming the owner it tried.
func TestAnInboxNotActingAsOwnerRejectsAndTheHandlerNeverRuns(t *testing.T) {
	t.Parallel()
	nc, key := connect(t), uniqueKey(t)
	c := leases.NewClient(nc)
	grant := acquired(t, c, key, "owner-b")
	notOwner := func(string) (uint64, bool) { return 0, false }
	handled := serve(t, nc, "owner-b", notOwner, echo)
	_, err := c.Forward(ctxFor(t, 5*time.Second), key, []byte("hi"), 2*time.Second)
	lerr := wantKind(t, err, leases.KindOwnerRejected)
	if lerr.Holder != "owner-b" || lerr.Revision != grant.Revision {
		t.Fatalf("the error names the owner tried: %+v", lerr)
	}
	if n := atomic.LoadInt64(handled); n != 0 {
		t.Fatalf("a rejected request reached the handler %d times", n)
	}
}

// Rules two and three, sent straight to the inbox as the gateway would:
// a missing or malformed fence, and a fence below the tenure.
func TestAnInboxRejectsAMissingMalformedOrStaleFence(t *testing.T) {
	t.Parallel()
	nc := connect(t)
	const tenure = 10
	handled := serve(t, nc, "owner-c", func(key string) (uint64, bool) { return tenure, key == "k" }, echo)
	for _, fence := range []string{"", "x", "-1", "+12", "1.5", "١٢", "18446744073709551616", "9"} {
		msg := nats.NewMsg("dagnats.lease.inbox.owner-c.k")
		msg.Data = []byte("body")
		if fence != "" {
			msg.Header.Set(leases.HeaderFence, fence)
		}
		reply, err := nc.RequestMsg(msg, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if reply.Header.Get(leases.HeaderReject) != leases.RejectStale || len(reply.Data) != 0 {
			t.Fatalf("fence %q: want an empty stale rejection, got %v %q", fence, reply.Header, reply.Data)
		}
	}
	if n := atomic.LoadInt64(handled); n != 0 {
		t.Fatalf("a rejected request reached the handler %d times", n)
	}
	// The fence header is read whatever the case of its name.
	msg := nats.NewMsg("dagnats.lease.inbox.owner-c.k")
	msg.Header["dagnats-lease-fence"] = []string{"10"}
	reply, err := nc.RequestMsg(msg, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reply.Data, []byte("echo:k:10:")) {
		t.Fatalf("a fence at the tenure is accepted: %v %q", reply.Header, reply.Data)
	}
}

func TestForwardToAFreeKeyIsNotHeld(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, err := c.Forward(ctxFor(t, 5*time.Second), uniqueKey(t), []byte("hi"), time.Second)
	wantKind(t, err, leases.KindNotHeld)
}

func TestForwardToAnOwnerWithNoInboxIsOwnerUnavailable(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	grant := acquired(t, c, key, "no-inbox")
	_, err := c.Forward(ctxFor(t, 5*time.Second), key, []byte("hi"), time.Second)
	lerr := wantKind(t, err, leases.KindOwnerUnavailable)
	if lerr.Holder != "no-inbox" || lerr.Revision != grant.Revision {
		t.Fatalf("the error names the owner tried: %+v", lerr)
	}
}

func TestForwardToAnOwnerThatDoesNotAnswerIsOwnerTimeout(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	c, _, key, _ := owning(t, "owner-d", func(leases.InboxRequest) []byte {
		<-hang
		return nil
	})
	started := time.Now()
	_, err := c.Forward(ctxFor(t, 5*time.Second), key, []byte("hi"), 300*time.Millisecond)
	wantKind(t, err, leases.KindOwnerTimeout)
	if took := time.Since(started); took > 1300*time.Millisecond {
		t.Fatalf("forward took %v, bounded by its 300 ms", took)
	}
}

func TestAnOwnersReplyTooLargeForTheGatewayIsReplyTooLarge(t *testing.T) {
	t.Parallel()
	large := bytes.Repeat([]byte("x"), 1000000)
	c, _, key, _ := owning(t, "owner-e", func(leases.InboxRequest) []byte { return large })
	_, err := c.Forward(ctxFor(t, 5*time.Second), key, []byte("hi"), 2*time.Second)
	wantKind(t, err, leases.KindReplyTooLarge)
}
