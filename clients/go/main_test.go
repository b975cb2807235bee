// The processes every test shares, and the helpers they use.

package leases_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/dagnats/dagnats-leases/clients/go/internal/testenv"
	"github.com/nats-io/nats.go"
)

// shared is one nats-server and gateway for the whole package; tests keep
// apart by their keys.
var shared *testenv.Env

func TestMain(m *testing.M) {
	if os.Getenv(fencedHolderEnv) != "" {
		os.Exit(runFencedHolder())
	}
	var err error
	shared, err = testenv.StartEnv(freePort(), freePort())
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot start the test servers: %v\n", err)
		os.Exit(1)
	}
	natsURL = shared.NATSURL
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

func freePort() int {
	return testenv.FreePort(mainTB{})
}

// mainTB lets TestMain use the fixtures, failing the run on error.
type mainTB struct{}

func (mainTB) Helper() {}
func (mainTB) Fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
func (mainTB) Logf(format string, args ...interface{}) {}
func (mainTB) Cleanup(func())                          {}

// connect opens a connection to the shared server.
func connect(t *testing.T) *nats.Conn {
	t.Helper()
	return shared.Connect(t)
}

func newClient(t *testing.T, opts ...leases.ClientOption) *leases.Client {
	t.Helper()
	return leases.NewClient(connect(t), opts...)
}

var keys int64

// uniqueKey is a key no other test uses: the test's name and a counter.
func uniqueKey(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return fmt.Sprintf("%s-%d", name, atomic.AddInt64(&keys, 1))
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// acquired takes key for holder with a 3 s TTL, failing the test unless
// granted.
func acquired(t *testing.T, c *leases.Client, key, holder string) leases.Grant {
	t.Helper()
	grant, err := c.Acquire(ctxFor(t, 5*time.Second), key, holder, ttl)
	if err != nil || !grant.Granted {
		t.Fatalf("acquire %s for %s: %+v, %v", key, holder, grant, err)
	}
	return grant
}

// renewedAt is holder's renew of key at revision for ttl, failing the test
// on an error.
func renewedAt(t *testing.T, c *leases.Client, key, holder string, revision uint64, ttl time.Duration) leases.Grant {
	t.Helper()
	grant, err := c.Renew(ctxFor(t, 10*time.Second), key, holder, revision, ttl)
	if err != nil {
		t.Fatalf("renew %s for %s at %d: %v", key, holder, revision, err)
	}
	return grant
}

// leaseError is err as a *LeaseError, failing the test otherwise.
func leaseError(t *testing.T, err error) *leases.LeaseError {
	t.Helper()
	var lerr *leases.LeaseError
	if !errors.As(err, &lerr) {
		t.Fatalf("want a *leases.LeaseError, got %T: %v", err, err)
	}
	return lerr
}

func wantKind(t *testing.T, err error, kind string) *leases.LeaseError {
	t.Helper()
	lerr := leaseError(t, err)
	if lerr.Kind != kind {
		t.Fatalf("want kind %q, got %q: %v", kind, lerr.Kind, err)
	}
	return lerr
}

// eventually polls cond every 10 ms until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spy records every message on subject, from its own connection.
func spy(t *testing.T, nc *nats.Conn, subject string) chan *nats.Msg {
	t.Helper()
	msgs := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(subject, msgs)
	if err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return msgs
}

func next(t *testing.T, msgs chan *nats.Msg, within time.Duration) *nats.Msg {
	t.Helper()
	select {
	case msg := <-msgs:
		return msg
	case <-time.After(within):
		t.Fatalf("no message within %v", within)
		return nil
	}
}
