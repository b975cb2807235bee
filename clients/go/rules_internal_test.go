// Pure-logic rules, without servers: the entitlement deadline, when a copy
// tells the gateway its wait, header names in any case, change events.

package leases

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The deadline counts from the start of the granting request, not from
// its reply, and never passes the reply's expires_at.
func TestEntitlementCountsFromTheRequestsStartAndNeverPassesExpiresAt(t *testing.T) {
	started := time.Now().Add(-2 * time.Second) // the reply took 2 s
	far := Lease{TTLMs: 3000, ExpiresAt: time.Now().Add(time.Hour)}
	if left := time.Until(entitledUntil(started, far)); left > time.Second || left < 900*time.Millisecond {
		t.Fatalf("3 s from a request 2 s ago leaves about 1 s, got %v", left)
	}
	near := Lease{TTLMs: 3000, ExpiresAt: time.Now().Add(500 * time.Millisecond)}
	if left := time.Until(entitledUntil(started, near)); left > 500*time.Millisecond || left < 400*time.Millisecond {
		t.Fatalf("capped by expires_at 500 ms away, got %v", left)
	}
	past := Lease{TTLMs: 3000, ExpiresAt: time.Now().Add(-time.Second)}
	if entitledUntil(time.Now(), past).After(time.Now()) {
		t.Fatal("a reply already past its expires_at entitles to nothing")
	}
}

func TestACopyTellsItsWaitOnlyWhereThatBoundsTheCall(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, subject := range []string{SubjectAcquire, SubjectRenew, SubjectRelease, SubjectTransfer, SubjectOwner} {
		for wait, bounds := range map[time.Duration]bool{ms(60000): false, ms(5000): false, ms(4700): false, ms(4699): true, ms(2500): true, 0: true} {
			if waitBounds(subject, wait) != bounds {
				t.Errorf("%s waiting %v: bounds %v", subject, wait, !bounds)
			}
		}
	}
	if !waitBounds(SubjectList, ms(60000)) || waitBounds(SubjectForward, ms(500)) {
		t.Error("a wait always bounds a list and never a forward")
	}
	if resends(SubjectForward) || !resends(SubjectList) || !resends(SubjectAcquire) {
		t.Error("every call but forward is copied")
	}
}

func TestAHeaderIsFoundWhateverTheCaseOfItsName(t *testing.T) {
	for _, name := range []string{"Dagnats-Lease-Fence", "dagnats-lease-fence", "DAGNATS-LEASE-FENCE"} {
		if got := header(nats.Header{name: {"7"}}, HeaderFence); got != "7" {
			t.Errorf("%s: got %q", name, got)
		}
	}
	both := nats.Header{"dagnats-lease-fence": {"1"}, "Dagnats-Lease-Fence": {"2"}}
	if header(both, HeaderFence) != "2" || header(nats.Header{"Other": {"7"}}, HeaderFence) != "" {
		t.Error("the exact spelling wins, and another header is not the fence")
	}
}

func TestChangeEventsSayReleasedExpiredOrWhoAcquired(t *testing.T) {
	msg := func(headers map[string]string, body string) *nats.Msg {
		m := nats.NewMsg("dagnats.lease.changed.k")
		for name, value := range headers {
			m.Header.Set(name, value)
		}
		m.Data = []byte(body)
		return m
	}
	cases := []struct {
		msg  *nats.Msg
		want change
		ok   bool
	}{
		{msg(map[string]string{"Nats-Sequence": "9", "Nats-Marker-Reason": "MaxAge"}, ""), change{eventExpired, 9, ""}, true},
		{msg(map[string]string{"Nats-Sequence": "10", "KV-Operation": "PURGE", HeaderEvent: "released"}, `{"v":1,"holder":"h"}`), change{eventReleased, 10, ""}, true},
		{msg(map[string]string{"Nats-Sequence": "11", HeaderEvent: "acquired"}, `{"v":1,"holder":"b"}`), change{eventAcquired, 11, "b"}, true},
		{msg(map[string]string{"Nats-Sequence": "12", HeaderEvent: "renewed"}, `{"v":1,"holder":"b"}`), change{eventRenewed, 12, "b"}, true},
		{msg(map[string]string{HeaderEvent: "acquired"}, `{"v":1,"holder":"b"}`), change{}, false},
		{msg(map[string]string{"Nats-Sequence": "13", HeaderEvent: "acquired"}, `not json`), change{}, false},
	}
	for i, c := range cases {
		got, ok := decodeChange(c.msg)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("case %d: got %+v %v, want %+v %v", i, got, ok, c.want, c.ok)
		}
	}
}
