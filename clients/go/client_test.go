// Client calls against the real gateway: the replies' fields, the error
// kinds, the bounds checked before sending, cancellation and late copies.

package leases_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/dagnats/dagnats-leases/clients/go/internal/testenv"
	"github.com/nats-io/nats.go"
)

const ttl = 3 * time.Second

func TestAcquireGrantsAFreeKeyWithEveryFieldOfTheWire(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	before := time.Now()
	grant := acquired(t, c, key, "holder-a")
	if !grant.Granted || !grant.Held || grant.Key != key || grant.Holder != "holder-a" || grant.TTLMs != 3000 {
		t.Fatalf("unexpected grant %+v", grant)
	}
	if grant.Revision == 0 {
		t.Fatalf("a grant's revision is never 0: %+v", grant)
	}
	if grant.AcquiredAt.Before(before.Add(-time.Second)) || grant.AcquiredAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("acquired_at %v is not now", grant.AcquiredAt)
	}
	if lasts := grant.ExpiresAt.Sub(grant.AcquiredAt); lasts > ttl || lasts < ttl-100*time.Millisecond {
		t.Fatalf("expires_at is %v after acquired_at, want about %v and never more", lasts, ttl)
	}
}

func TestAcquireOfAHeldKeyIsNotGrantedAndNamesTheHolder(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	first := acquired(t, c, key, "holder-a")
	other, err := c.Acquire(ctxFor(t, 5*time.Second), key, "holder-b", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if other.Granted || !other.Held || other.Holder != "holder-a" || other.Revision != first.Revision {
		t.Fatalf("want granted false naming holder-a at %d, got %+v", first.Revision, other)
	}
}

func TestAcquireByTheHolderAgainReturnsItsLeaseUnchanged(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	first := acquired(t, c, key, "holder-a")
	again := acquired(t, c, key, "holder-a")
	if again != first {
		t.Fatalf("a repeated acquire changed the lease: %+v, then %+v", first, again)
	}
}

func TestRenewRaisesTheFenceAndKeepsTheTenure(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	first := acquired(t, c, key, "holder-a")
	renewed := renewedAt(t, c, key, "holder-a", first.Revision, 5*time.Second)
	if !renewed.Granted || renewed.Revision <= first.Revision || !renewed.AcquiredAt.Equal(first.AcquiredAt) || renewed.TTLMs != 5000 {
		t.Fatalf("renew of %+v answered %+v", first, renewed)
	}
}

func TestRenewAtAStaleFenceIsLost(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	ctx := ctxFor(t, 10*time.Second)
	first := acquired(t, c, key, "holder-a")
	// Two renewals: a retry of the first alone would get its answer again.
	second := renewedAt(t, c, key, "holder-a", first.Revision, ttl)
	renewedAt(t, c, key, "holder-a", second.Revision, ttl)
	_, err := c.Renew(ctx, key, "holder-a", first.Revision, ttl)
	lerr := wantKind(t, err, leases.KindLost)
	if !leases.IsLost(err) || lerr.Holder != "" || lerr.Revision != 0 || lerr.Message == "" {
		t.Fatalf("unexpected lost error %+v", lerr)
	}
}

func TestReleaseFreesTheKey(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	ctx := ctxFor(t, 10*time.Second)
	grant := acquired(t, c, key, "holder-a")
	released, err := c.Release(ctx, key, "holder-a", grant.Revision)
	if err != nil {
		t.Fatal(err)
	}
	want := leases.Released{Released: true, Held: false, Key: key, Holder: "holder-a", Revision: released.Revision}
	if released != want || released.Revision <= grant.Revision {
		t.Fatalf("release answered %+v", released)
	}
	owner, err := c.Owner(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if owner != (leases.Lease{Held: false, Key: key}) {
		t.Fatalf("owner of a released key: %+v", owner)
	}
	// Once another holder took the key, the old fence releases nothing.
	acquired(t, c, key, "holder-b")
	_, err = c.Release(ctx, key, "holder-a", grant.Revision)
	wantKind(t, err, leases.KindLost)
}

func TestOwnerReportsTheHeldLease(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	ctx := ctxFor(t, 10*time.Second)
	grant := acquired(t, c, key, "holder-a")
	owner, err := c.Owner(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if owner != grant.Lease {
		t.Fatalf("owner %+v, the grant said %+v", owner, grant.Lease)
	}
}

func TestTransferMakesTheOtherHolderOwnerAtAHigherFence(t *testing.T) {
	t.Parallel()
	c, key := newClient(t), uniqueKey(t)
	ctx := ctxFor(t, 10*time.Second)
	grant := acquired(t, c, key, "holder-a")
	moved, err := c.Transfer(ctx, key, "holder-a", grant.Revision, "holder-b", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !moved.Granted || moved.Holder != "holder-b" || moved.Revision <= grant.Revision || moved.TTLMs != 4000 {
		t.Fatalf("transfer answered %+v", moved)
	}
	_, err = c.Transfer(ctx, key, "holder-a", grant.Revision, "holder-c", ttl)
	wantKind(t, err, leases.KindLost)
}

func TestListPagesThroughTheHeldLeasesByKey(t *testing.T) {
	t.Parallel()
	c, prefix := newClient(t), uniqueKey(t)
	ctx := ctxFor(t, 10*time.Second)
	for _, suffix := range []string{"-c", "-a", "-b"} {
		acquired(t, c, prefix+suffix, "holder-a")
	}
	page, err := c.List(ctx, prefix, leases.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Leases) != 2 || page.Leases[0].Key != prefix+"-a" || page.Leases[1].Key != prefix+"-b" || page.Next != prefix+"-b" {
		t.Fatalf("first page %+v", page)
	}
	rest, err := c.List(ctx, prefix, leases.WithAfter(page.Next))
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Leases) != 1 || rest.Leases[0].Key != prefix+"-c" || rest.Next != "" {
		t.Fatalf("last page %+v", rest)
	}
	all, err := c.ListAll(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Holder != "holder-a" || !all[2].Held {
		t.Fatalf("ListAll %+v", all)
	}
}

// Every kind of out-of-bounds input is refused with kind invalid before
// anything is sent: the spy on the lease subjects sees only the valid call
// made after them.
func TestOutOfBoundsInputIsInvalidAndNothingIsSent(t *testing.T) {
	c := newClient(t)
	sent := spy(t, connect(t), "api.leases.>")
	ctx := ctxFor(t, 10*time.Second)
	long := string(bytes.Repeat([]byte("k"), 129))
	calls := map[string]func() error{
		"empty key":          func() error { _, err := c.Acquire(ctx, "", "h", ttl); return err },
		"key with a dot":     func() error { _, err := c.Acquire(ctx, "a.b", "h", ttl); return err },
		"key with a star":    func() error { _, err := c.Owner(ctx, "*"); return err },
		"key of 129 bytes":   func() error { _, err := c.Owner(ctx, long); return err },
		"non-ASCII key":      func() error { _, err := c.Owner(ctx, "clé"); return err },
		"holder with space":  func() error { _, err := c.Acquire(ctx, "k", "a b", ttl); return err },
		"ttl 1.5 s":          func() error { _, err := c.Acquire(ctx, "k", "h", 1500*time.Millisecond); return err },
		"ttl 0":              func() error { _, err := c.Acquire(ctx, "k", "h", 0); return err },
		"ttl above 10 min":   func() error { _, err := c.Renew(ctx, "k", "h", 1, 601*time.Second); return err },
		"ttl negative":       func() error { _, err := c.Acquire(ctx, "k", "h", -time.Second); return err },
		"renew revision 0":   func() error { _, err := c.Renew(ctx, "k", "h", 0, ttl); return err },
		"release revision 0": func() error { _, err := c.Release(ctx, "k", "h", 0); return err },
		"transfer to itself": func() error { _, err := c.Transfer(ctx, "k", "h", 3, "h", ttl); return err },
		"transfer to a.b":    func() error { _, err := c.Transfer(ctx, "k", "h", 3, "a.b", ttl); return err },
		"list limit 0":       func() error { _, err := c.List(ctx, "", leases.WithLimit(0)); return err },
		"list limit 5001":    func() error { _, err := c.List(ctx, "", leases.WithLimit(5001)); return err },
		"list after empty":   func() error { _, err := c.List(ctx, "", leases.WithAfter("")); return err },
		"list prefix a.b":    func() error { _, err := c.List(ctx, "a.b"); return err },
		"forward 99 ms":      func() error { _, err := c.Forward(ctx, "k", nil, 99*time.Millisecond); return err },
		"forward 30.001 s":   func() error { _, err := c.Forward(ctx, "k", nil, 30001*time.Millisecond); return err },
		"forward key a b":    func() error { _, err := c.Forward(ctx, "a b", nil, time.Second); return err },
	}
	for name, call := range calls {
		lerr := wantKind(t, call(), leases.KindInvalid)
		if lerr.Message == "" {
			t.Errorf("%s: an invalid error says why", name)
		}
	}
	key := uniqueKey(t)
	if _, err := c.Owner(ctx, key); err != nil {
		t.Fatal(err)
	}
	first := next(t, sent, 5*time.Second)
	if first.Subject != leases.SubjectOwner || !bytes.Contains(first.Data, []byte(key)) {
		t.Fatalf("something was sent before the valid call: %s %s", first.Subject, first.Data)
	}
}

// silent stands a gateway that never answers on subject, a plain
// subscriber on a nats-server of its own; it returns a client of that
// server and the requests the stand-in received.
func silent(t *testing.T, subject string, opts ...leases.ClientOption) (*leases.Client, chan *nats.Msg) {
	t.Helper()
	alone := testenv.StartNATS(t)
	received := spy(t, alone.Connect(t), subject)
	return leases.NewClient(alone.Connect(t), opts...), received
}

func TestAForwardTooLargeForMaxPayloadIsPayloadTooLargeAndNothingIsSent(t *testing.T) {
	t.Parallel()
	alone := testenv.StartNATS(t)
	nc := alone.Connect(t)
	sent := spy(t, nc, "api.leases.>")
	// Base64 in the request makes it a third larger than max_payload.
	payload := make([]byte, nc.MaxPayload()*3/4+1)
	_, err := leases.NewClient(nc).Forward(ctxFor(t, 5*time.Second), "k", payload, time.Second)
	lerr := wantKind(t, err, leases.KindPayloadTooLarge)
	if lerr.Holder != "" || lerr.Revision != 0 {
		t.Fatalf("a client-side refusal names no owner: %+v", lerr)
	}
	// A last message on the same connection: had the forward left, it came first.
	if err := nc.Publish("api.leases.sentinel", nil); err != nil {
		t.Fatal(err)
	}
	if first := next(t, sent, 5*time.Second); first.Subject != "api.leases.sentinel" {
		t.Fatalf("the forward was sent: %s", first.Subject)
	}
}

func TestNoGatewayIsUnavailable(t *testing.T) {
	t.Parallel()
	alone := testenv.StartNATS(t)
	c := leases.NewClient(alone.Connect(t))
	_, err := c.Acquire(ctxFor(t, 5*time.Second), "k", "h", ttl)
	wantKind(t, err, leases.KindUnavailable)
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("want the NATS cause kept: %v", err)
	}
}

// A gateway that never answers, stood in for by a silent subscriber.
func TestNoReplyWithinTheTimeoutIsTimeout(t *testing.T) {
	t.Parallel()
	c, _ := silent(t, leases.SubjectOwner, leases.WithTimeout(400*time.Millisecond))
	started := time.Now()
	_, err := c.Owner(context.Background(), "k")
	took := time.Since(started)
	wantKind(t, err, leases.KindTimeout)
	if took < 400*time.Millisecond || took > 2*time.Second {
		t.Fatalf("timed out after %v, want 400 ms", took)
	}
}

func TestACancelledCallIsTimeoutAndWrapsTheContextsError(t *testing.T) {
	t.Parallel()
	c, _ := silent(t, leases.SubjectAcquire)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	started := time.Now()
	_, err := c.Acquire(ctx, "k", "h", ttl)
	wantKind(t, err, leases.KindTimeout)
	if !errors.Is(err, context.Canceled) || time.Since(started) > 2*time.Second {
		t.Fatalf("want context.Canceled at once, got %v after %v", err, time.Since(started))
	}
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(ctx, "k", "h", ttl)
	wantKind(t, err, leases.KindTimeout)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded, got %v", err)
	}
}

// A call whose reply is late is sent again at half its timeout, telling the
// gateway how long it is still waited for; the copy's answer wins.
func TestALateCallIsCopiedAtHalfItsTimeoutAndTheCopyAnswers(t *testing.T) {
	t.Parallel()
	alone := testenv.StartNATS(t)
	gatewayConn := alone.Connect(t)
	requests := make(chan *nats.Msg, 8)
	copies := 0
	_, err := gatewayConn.Subscribe(leases.SubjectOwner, func(msg *nats.Msg) {
		requests <- msg
		copies++
		if copies == 2 {
			_ = msg.Respond([]byte(`{"held":false,"key":"k"}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := gatewayConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := leases.NewClient(alone.Connect(t), leases.WithTimeout(time.Second))
	started := time.Now()
	owner, err := c.Owner(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if owner != (leases.Lease{Key: "k"}) {
		t.Fatalf("owner %+v", owner)
	}
	if took := time.Since(started); took < 500*time.Millisecond || took > 900*time.Millisecond {
		t.Fatalf("answered after %v, want the copy at 500 ms", took)
	}
	first, second := <-requests, <-requests
	for _, sent := range []struct {
		msg       *nats.Msg
		atLeastMs int
		atMostMs  int
	}{{first, 900, 1000}, {second, 300, 500}} {
		waitMs, err := strconv.Atoi(sent.msg.Header.Get(leases.HeaderWaitMs))
		if err != nil || waitMs < sent.atLeastMs || waitMs > sent.atMostMs {
			t.Fatalf("want %s from %d to %d ms, got %q", leases.HeaderWaitMs, sent.atLeastMs, sent.atMostMs, sent.msg.Header.Get(leases.HeaderWaitMs))
		}
	}
	if !bytes.Equal(first.Data, second.Data) {
		t.Fatalf("the copy differs: %s, then %s", first.Data, second.Data)
	}
}

func TestAForwardIsNeverSentTwice(t *testing.T) {
	t.Parallel()
	c, sent := silent(t, leases.SubjectForward)
	_, err := c.Forward(context.Background(), "k", []byte("once"), 100*time.Millisecond)
	wantKind(t, err, leases.KindTimeout)
	if n := len(sent); n != 1 {
		t.Fatalf("forward was sent %d times", n)
	}
}

// Replies that do not follow the protocol, from a stand-in gateway.
func TestAnUnreadableReplyIsInternal(t *testing.T) {
	t.Parallel()
	alone := testenv.StartNATS(t)
	gatewayConn := alone.Connect(t)
	replies := map[string]string{
		leases.SubjectAcquire: `not json`,
		leases.SubjectRenew:   `{"granted":true,"held":true,"key":"k"}`,
		leases.SubjectRelease: `{"released":true,"held":false,"key":"k","holder":"h","revision":-1}`,
		leases.SubjectOwner:   `{"held":true,"key":"k","holder":"h"}`,
		leases.SubjectList:    `{"leases":[{"held":true,"key":"k"}],"next":null}`,
	}
	for subject, body := range replies {
		body := []byte(body)
		if _, err := gatewayConn.Subscribe(subject, func(msg *nats.Msg) { _ = msg.Respond(body) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := gatewayConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := leases.NewClient(alone.Connect(t))
	ctx := ctxFor(t, 10*time.Second)
	_, err := c.Acquire(ctx, "k", "h", ttl)
	wantKind(t, err, leases.KindInternal)
	_, err = c.Renew(ctx, "k", "h", 1, ttl)
	wantKind(t, err, leases.KindInternal)
	_, err = c.Release(ctx, "k", "h", 1)
	wantKind(t, err, leases.KindInternal)
	_, err = c.Owner(ctx, "k")
	wantKind(t, err, leases.KindInternal)
	_, err = c.List(ctx, "")
	wantKind(t, err, leases.KindInternal)
}

// Every reply that carries a revision, from a stand-in gateway: read up to
// 2^53 - 1, kind internal above (docs/protocol.md, Holder rules and client
// libraries).
func TestAReplyWhoseRevisionIsNotASafeIntegerIsInternal(t *testing.T) {
	t.Parallel()
	for _, rev := range []string{"9007199254740991", "9007199254740992", "18446744073709551615"} {
		lease := `"held":true,"key":"k","holder":"h","revision":` + rev +
			`,"acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000`
		replies := map[string]string{
			leases.SubjectAcquire:  `{"granted":true,` + lease + `}`,
			leases.SubjectRenew:    `{"granted":true,` + lease + `}`,
			leases.SubjectTransfer: `{"granted":true,` + lease + `}`,
			leases.SubjectRelease:  `{"released":true,"held":false,"key":"k","holder":"h","revision":` + rev + `}`,
			leases.SubjectOwner:    `{` + lease + `}`,
			leases.SubjectList:     `{"leases":[{` + lease + `}],"next":null}`,
			leases.SubjectForward:  `{"error":"the owner did not answer","kind":"owner_timeout","holder":"h","revision":` + rev + `}`,
		}
		alone := testenv.StartNATS(t)
		gatewayConn := alone.Connect(t)
		if _, err := gatewayConn.Subscribe("api.leases.*", func(msg *nats.Msg) { _ = msg.Respond([]byte(replies[msg.Subject])) }); err != nil {
			t.Fatal(err)
		}
		if err := gatewayConn.Flush(); err != nil {
			t.Fatal(err)
		}
		c := leases.NewClient(alone.Connect(t))
		ctx := ctxFor(t, 10*time.Second)
		calls := map[string]func() error{
			"acquire":  func() error { _, err := c.Acquire(ctx, "k", "h", ttl); return err },
			"renew":    func() error { _, err := c.Renew(ctx, "k", "h", 1, ttl); return err },
			"transfer": func() error { _, err := c.Transfer(ctx, "k", "h", 1, "g", ttl); return err },
			"release":  func() error { _, err := c.Release(ctx, "k", "h", 1); return err },
			"owner":    func() error { _, err := c.Owner(ctx, "k"); return err },
			"list":     func() error { _, err := c.List(ctx, ""); return err },
			"forward":  func() error { _, err := c.Forward(ctx, "k", []byte("x"), time.Second); return err },
		}
		for method, call := range calls {
			// Up to 2^53 - 1 the replies are read; forward's is an error reply.
			want := ""
			switch {
			case rev != "9007199254740991":
				want = leases.KindInternal
			case method == "forward":
				want = leases.KindOwnerTimeout
			}
			if got := leases.KindOf(call()); got != want {
				t.Errorf("revision %s: %s answered kind %q, want %q", rev, method, got, want)
			}
		}
	}
}

// An error reply's kind reaches the caller as the wire spells it, with
// the holder and revision it names, whether or not this client knows it.
func TestAnErrorReplyCarriesItsKindHolderAndRevision(t *testing.T) {
	t.Parallel()
	alone := testenv.StartNATS(t)
	gatewayConn := alone.Connect(t)
	answer := func(subject, body string) {
		if _, err := gatewayConn.Subscribe(subject, func(msg *nats.Msg) { _ = msg.Respond([]byte(body)) }); err != nil {
			t.Fatal(err)
		}
	}
	answer(leases.SubjectForward, `{"error":"the owner did not answer","kind":"owner_timeout","holder":"h","revision":4}`)
	answer(leases.SubjectOwner, `{"error":"later","kind":"brand_new"}`)
	if err := gatewayConn.Flush(); err != nil {
		t.Fatal(err)
	}
	c := leases.NewClient(alone.Connect(t))
	_, err := c.Forward(ctxFor(t, 5*time.Second), "k", []byte("x"), time.Second)
	lerr := wantKind(t, err, leases.KindOwnerTimeout)
	if *lerr != (leases.LeaseError{Kind: "owner_timeout", Message: "the owner did not answer", Holder: "h", Revision: 4}) {
		t.Fatalf("forward error %+v", lerr)
	}
	_, err = c.Owner(ctxFor(t, 5*time.Second), "k")
	if leases.KindOf(err) != "brand_new" {
		t.Fatalf("want the unknown kind as sent, got %v", err)
	}
}
