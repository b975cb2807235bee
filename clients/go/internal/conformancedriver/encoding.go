// The driver's JSON: request arguments read as the library's Go types,
// and the library's typed replies and errors written with the wire's
// field names.

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
)

// wireTime is the wire's timestamp layout: UTC, milliseconds, Z.
const wireTime = "2006-01-02T15:04:05.000Z"

// args are a request's fields. A value no Go type of the library's
// signature can hold (a negative revision, a string for a number) is
// remembered; or then answers kind invalid, the refusal Go's types make
// before anything could be sent.
type args struct {
	fields map[string]json.RawMessage
	bad    *string
}

func (a *args) UnmarshalJSON(data []byte) error {
	a.bad = new(string)
	return json.Unmarshal(data, &a.fields)
}

func (a args) present(name string) bool {
	raw, ok := a.fields[name]
	return ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func (a args) refuse(name string, raw json.RawMessage, want string) {
	if a.bad != nil && *a.bad == "" {
		*a.bad = fmt.Sprintf("%s must be %s, got %s", name, want, raw)
	}
}

// or is the first argument Go's types refused, as kind invalid, else err.
func (a args) or(err error) error {
	if a.bad != nil && *a.bad != "" {
		return &leases.LeaseError{Kind: leases.KindInvalid, Message: *a.bad}
	}
	return err
}

func (a args) decode(name string, out interface{}, want string) {
	if !a.present(name) {
		return
	}
	if err := json.Unmarshal(a.fields[name], out); err != nil {
		a.refuse(name, a.fields[name], want)
	}
}

func (a args) str(name string) string {
	var s string
	a.decode(name, &s, "a string")
	return s
}

func (a args) bool(name string) bool {
	var b bool
	a.decode(name, &b, "true or false")
	return b
}

func (a args) object(name string) args {
	nested := args{bad: a.bad}
	a.decode(name, &nested.fields, "an object")
	return nested
}

func (a args) number(name string) (float64, bool) {
	var f float64
	if !a.present(name) {
		return 0, false
	}
	if err := json.Unmarshal(a.fields[name], &f); err != nil {
		a.refuse(name, a.fields[name], "a number")
		return 0, false
	}
	return f, true
}

// duration reads a count of milliseconds, fractions included.
func (a args) duration(name string) time.Duration {
	f, ok := a.number(name)
	if !ok {
		return 0
	}
	return time.Duration(math.Round(f * float64(time.Millisecond)))
}

func (a args) uint(name string) uint64 {
	if !a.present(name) {
		return 0
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(a.fields[name])), 10, 64)
	if err != nil {
		a.refuse(name, a.fields[name], "a whole number from 0 to 2^64-1")
	}
	return n
}

func (a args) int(name string) int {
	if !a.present(name) {
		return 0
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(a.fields[name])))
	if err != nil {
		a.refuse(name, a.fields[name], "a whole number")
	}
	return n
}

func (a args) bytes(name string) []byte {
	data, err := base64.StdEncoding.DecodeString(a.str(name))
	if err != nil {
		a.refuse(name, a.fields[name], "base64")
	}
	return data
}

// leaseJSON is an owner reply: a lease, or a free key.
func leaseJSON(l leases.Lease) map[string]interface{} {
	if !l.Held {
		return map[string]interface{}{"held": false, "key": l.Key}
	}
	return leaseFields(l)
}

// grantJSON is a grant: always a whole lease, with granted.
func grantJSON(g leases.Grant) map[string]interface{} {
	out := leaseFields(g.Lease)
	out["granted"] = g.Granted
	return out
}

func leaseFields(l leases.Lease) map[string]interface{} {
	return map[string]interface{}{
		"held": l.Held, "key": l.Key, "holder": l.Holder, "revision": l.Revision,
		"acquired_at": l.AcquiredAt.UTC().Format(wireTime),
		"expires_at":  l.ExpiresAt.UTC().Format(wireTime),
		"ttl_ms":      l.TTLMs,
	}
}

// driverErr is a failure of the driver itself, with a driver-level kind.
type driverErr struct {
	kind, message string
}

func (e *driverErr) Error() string {
	return e.kind + ": " + e.message
}

func driverError(kind, message string) error {
	return &driverErr{kind: kind, message: message}
}

func errorJSON(err error) map[string]interface{} {
	var lerr *leases.LeaseError
	if errors.As(err, &lerr) {
		var holder, revision interface{}
		if lerr.Holder != "" {
			holder = lerr.Holder
		}
		if lerr.Revision != 0 {
			revision = lerr.Revision
		}
		return map[string]interface{}{"kind": lerr.Kind, "message": lerr.Message, "holder": holder, "revision": revision}
	}
	kind, message := leases.KindInternal, err.Error()
	var derr *driverErr
	if errors.As(err, &derr) {
		kind, message = derr.kind, derr.message
	}
	return map[string]interface{}{"kind": kind, "message": message, "holder": nil, "revision": nil}
}
