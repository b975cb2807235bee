// The driver itself, against the real gateway: each op answers through the
// library, events are printed, and bad requests are answered, never fatal.

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/dagnats/dagnats-leases/clients/go/internal/testenv"
)

// session runs a driver on a fresh gateway; send writes request lines,
// and lines delivers what the driver printed.
type session struct {
	in      io.WriteCloser
	lines   chan map[string]interface{}
	answers map[float64]map[string]interface{} // read, not yet asked for
}

func start(t *testing.T) *session {
	env := testenv.Start(t)
	nc := env.Connect(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := newDriver(nc, leases.NewClient(nc), outW)
	go func() {
		d.serve(inR)
		outW.Close()
	}()
	s := &session{in: inW, lines: make(chan map[string]interface{}, 64), answers: map[float64]map[string]interface{}{}}
	go func() {
		out := bufio.NewScanner(outR)
		for out.Scan() {
			var line map[string]interface{}
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Errorf("the driver printed a line that is not JSON: %q", out.Text())
				continue
			}
			s.lines <- line
		}
		close(s.lines)
	}()
	t.Cleanup(func() { inW.Close() })
	return s
}

func (s *session) send(t *testing.T, request string) {
	t.Helper()
	if _, err := io.WriteString(s.in, request+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answer waits for the answer to id, keeping the events seen on the way.
func (s *session) answer(t *testing.T, id float64, events *[]map[string]interface{}) map[string]interface{} {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if line, ok := s.answers[id]; ok {
			return line
		}
		select {
		case line := <-s.lines:
			if answered, ok := line["id"].(float64); ok {
				s.answers[answered] = line
			} else if events != nil {
				*events = append(*events, line)
			}
		case <-deadline:
			t.Fatalf("no answer to request %v", id)
		}
	}
}

func okOf(t *testing.T, answer map[string]interface{}) map[string]interface{} {
	t.Helper()
	ok, isOK := answer["ok"].(map[string]interface{})
	if !isOK {
		t.Fatalf("want ok, got %v", answer)
	}
	return ok
}

func kindOf(t *testing.T, answer map[string]interface{}) string {
	t.Helper()
	failure, isError := answer["error"].(map[string]interface{})
	if !isError {
		t.Fatalf("want an error, got %v", answer)
	}
	return failure["kind"].(string)
}

func TestTheDriverAnswersCallsWithTheWiresFieldsAndKinds(t *testing.T) {
	s := start(t)
	s.send(t, `{"id":1,"op":"call","method":"acquire","args":{"key":"k","holder":"a","ttl_ms":3000}}`)
	grant := okOf(t, s.answer(t, 1, nil))
	for _, field := range []string{"granted", "held", "key", "holder", "revision", "acquired_at", "expires_at", "ttl_ms"} {
		if _, ok := grant[field]; !ok {
			t.Errorf("the grant lacks %s: %v", field, grant)
		}
	}
	if !strings.HasSuffix(grant["expires_at"].(string), "Z") || len(grant["expires_at"].(string)) != len("2026-10-18T12:00:15.250Z") {
		t.Errorf("times are written as the wire writes them: %v", grant["expires_at"])
	}
	s.send(t, `{"id":2,"op":"call","method":"acquire","args":{"key":"k","holder":"a","ttl_ms":1500}}`)
	s.send(t, `{"id":3,"op":"call","method":"renew","args":{"key":"k","holder":"a","revision":-1,"ttl_ms":3000}}`)
	s.send(t, `{"id":4,"op":"call","method":"list","args":{"prefix":null,"after":null,"limit":0}}`)
	s.send(t, `{"id":5,"op":"call","method":"owner","args":{"key":"free"}}`)
	s.send(t, `{"id":6,"op":"call","method":"forward","args":{"key":"free","payload_b64":"aGk=","timeout_ms":null}}`)
	s.send(t, `{"id":7,"op":"nope"}`)
	s.send(t, `{"id":8,"op":"keeper.state","keeper":"none"}`)
	for id, kind := range map[float64]string{2: "invalid", 3: "invalid", 4: "invalid", 6: "not_held", 7: "bad_request", 8: "not_found"} {
		if got := kindOf(t, s.answer(t, id, nil)); got != kind {
			t.Errorf("request %v: kind %q, want %q", id, got, kind)
		}
	}
	if free := okOf(t, s.answer(t, 5, nil)); len(free) != 2 || free["held"] != false || free["key"] != "free" {
		t.Errorf("a free key is {held: false, key}: %v", free)
	}
}

func TestTheDriverRunsKeepersInboxesAndGatesAndPrintsTheirEvents(t *testing.T) {
	s := start(t)
	var events []map[string]interface{}
	s.send(t, `{"id":1,"op":"keeper.start","keeper":"k1","key":"kk","holder":"h1","ttl_ms":3000,"wait":true}`)
	okOf(t, s.answer(t, 1, &events))
	s.send(t, `{"id":2,"op":"keeper.wait_owner","keeper":"k1","timeout_ms":5000}`)
	fence := okOf(t, s.answer(t, 2, &events))["fence"]
	s.send(t, `{"id":3,"op":"inbox.serve","inbox":"i1","holder":"h1","tenures":{"keeper":"k1"},"mode":"echo"}`)
	okOf(t, s.answer(t, 3, &events))
	s.send(t, `{"id":4,"op":"call","method":"forward","args":{"key":"kk","payload_b64":"aGk=","timeout_ms":1000}}`)
	if got := okOf(t, s.answer(t, 4, &events))["payload_b64"]; got != "ZWNobzpoaQ==" {
		t.Errorf("forward answered %v, want echo:hi", got)
	}
	// Requests run concurrently: the second admit waits for the first.
	s.send(t, `{"id":5,"op":"gate.admit","gate":"g","fence":5}`)
	okOf(t, s.answer(t, 5, &events))
	s.send(t, `{"id":6,"op":"gate.admit","gate":"g","fence":4}`)
	if kind := kindOf(t, s.answer(t, 6, &events)); kind != "stale_fence" {
		t.Errorf("a lower fence is stale_fence, got %q", kind)
	}
	s.send(t, `{"id":7,"op":"keeper.stop","keeper":"k1"}`)
	okOf(t, s.answer(t, 7, &events))
	s.send(t, `{"id":8,"op":"keeper.state","keeper":"k1"}`)
	if kind := kindOf(t, s.answer(t, 8, &events)); kind != "not_found" {
		t.Errorf("a stopped keeper is forgotten, got %q", kind)
	}
	var owned, inbox, ended bool
	for _, e := range events {
		switch {
		case e["event"] == "ownership" && e["owner"] == true && e["tenure"] == fence:
			owned = true
		case e["event"] == "ownership" && e["owner"] == false && e["fence"] == nil:
			ended = owned
		case e["event"] == "inbox" && e["key"] == "kk" && e["payload_b64"] == "aGk=":
			inbox = true
		}
	}
	if !owned || !inbox || !ended {
		t.Errorf("events owned %v, inbox %v, ended %v: %v", owned, inbox, ended, events)
	}
}

func TestTheDriverExitsOnExitWhileAWaitForOwnershipIsPending(t *testing.T) {
	s := start(t)
	s.send(t, `{"id":1,"op":"call","method":"acquire","args":{"key":"busy","holder":"other","ttl_ms":60000}}`)
	okOf(t, s.answer(t, 1, nil))
	s.send(t, `{"id":2,"op":"keeper.start","keeper":"k1","key":"busy","holder":"h1","ttl_ms":3000,"wait":true}`)
	okOf(t, s.answer(t, 2, nil))
	s.send(t, `{"id":3,"op":"keeper.wait_owner","keeper":"k1","timeout_ms":null}`)
	s.send(t, `{"id":4,"op":"exit"}`)
	okOf(t, s.answer(t, 4, nil))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, open := <-s.lines:
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("the driver did not stop after exit")
		}
	}
}
