// The gateway's replies as Go structs whose fields are the wire's, and the
// reading of a reply body that refuses anything short of the protocol.

package leases

import (
	"bytes"
	"encoding/json"
	"time"
)

// Lease is a held lease as acquire, renew, transfer, owner and list report
// it (docs/protocol.md, Replies). From Owner, a free key is a Lease with
// Held false and only Key set.
type Lease struct {
	// Held is true when the key has a holder.
	Held bool `json:"held"`
	// Key is the lease's key.
	Key string `json:"key"`
	// Holder is the holder id that owns the key.
	Holder string `json:"holder"`
	// Revision is the fencing token: the key's KV revision. Send it with
	// every write made as owner.
	Revision uint64 `json:"revision"`
	// AcquiredAt is the start of the tenure; renew keeps it.
	AcquiredAt time.Time `json:"acquired_at"`
	// ExpiresAt is advisory: the server's TTL frees the key, never earlier.
	ExpiresAt time.Time `json:"expires_at"`
	// TTLMs is the lease's TTL in milliseconds.
	TTLMs uint64 `json:"ttl_ms"`
}

// TTL is the lease's TTL as a duration.
func (l Lease) TTL() time.Duration {
	return time.Duration(l.TTLMs) * time.Millisecond
}

// Grant is the reply to acquire, renew and transfer. Granted false is a
// normal answer, not an error: the embedded Lease names the current
// holder and its lease.
type Grant struct {
	// Granted is true when the caller (or, for a transfer, the new
	// holder) now holds the key.
	Granted bool `json:"granted"`
	Lease
}

// Released is the reply to release.
type Released struct {
	// Released is always true.
	Released bool `json:"released"`
	// Held is always false.
	Held bool `json:"held"`
	// Key is the released key.
	Key string `json:"key"`
	// Holder is the holder that released it.
	Holder string `json:"holder"`
	// Revision is the fence of the release write.
	Revision uint64 `json:"revision"`
}

// LeaseList is one page of List.
type LeaseList struct {
	// Leases are the held leases of this page, ordered by key.
	Leases []Lease `json:"leases"`
	// Next is the last key of this page when more leases follow (pass it
	// to WithAfter); "" on the last page.
	Next string `json:"next"`
	// Corrupt names keys whose record does not parse; they are left out
	// of Leases. Empty when there are none.
	Corrupt []string `json:"corrupt,omitempty"`
}

// Forwarded is the reply to forward: the owner's reply bytes, and who
// answered.
type Forwarded struct {
	// Key is the forwarded key.
	Key string `json:"key"`
	// Holder is the owner that answered.
	Holder string `json:"holder"`
	// Revision is the fence the gateway forwarded with.
	Revision uint64 `json:"revision"`
	// Payload is the owner's reply body.
	Payload []byte `json:"payload"`
}

// Fields each reply must carry; Go's decoder would zero a missing one.
var (
	leaseFields     = []string{"held", "key", "holder", "revision", "acquired_at", "expires_at", "ttl_ms"}
	grantFields     = append([]string{"granted"}, leaseFields...)
	releasedFields  = []string{"released", "held", "key", "holder", "revision"}
	freeKeyFields   = []string{"held", "key"}
	forwardedFields = []string{"key", "holder", "revision", "payload"}
	listFields      = []string{"leases"}
)

// MaxRevision is the highest revision a reply carries: fences start near
// 1.7e15 and stay below 2^53, exact as JSON numbers in every language
// (docs/protocol.md, Storage: the leases bucket). A reply with a higher one
// is refused with kind internal.
const MaxRevision = 1<<53 - 1

// errorBody is the wire's {"error", "kind"}, with the owner a forward last
// tried.
type errorBody struct {
	Error    string  `json:"error"`
	Kind     string  `json:"kind"`
	Holder   *string `json:"holder"`
	Revision *uint64 `json:"revision"`
}

// object reads a reply body as a JSON object, turning an error reply into
// its *LeaseError.
func object(data []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, internalf("unreadable reply %q: not a JSON object", truncate(data))
	}
	if _, hasKind := fields["kind"]; hasKind {
		if _, hasError := fields["error"]; hasError {
			var body errorBody
			if err := json.Unmarshal(data, &body); err != nil {
				return nil, internalf("unreadable error reply %q: %v", truncate(data), err)
			}
			if err := checkRevisionField(fields); err != nil {
				return nil, err
			}
			lerr := &LeaseError{Kind: body.Kind, Message: body.Error}
			if body.Holder != nil {
				lerr.Holder = *body.Holder
			}
			if body.Revision != nil {
				lerr.Revision = *body.Revision
			}
			return nil, lerr
		}
	}
	return fields, nil
}

// present checks that every field in names is there and not null.
func present(fields map[string]json.RawMessage, names []string) error {
	for _, name := range names {
		raw, ok := fields[name]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return internalf("unreadable reply: field %q is missing", name)
		}
	}
	return nil
}

// decodeInto reads a reply that must carry names into out.
func decodeInto(data []byte, names []string, out interface{}) error {
	fields, err := object(data)
	if err != nil {
		return err
	}
	if err := present(fields, names); err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return internalf("unreadable reply %q: %v", truncate(data), err)
	}
	return checkRevisionField(fields)
}

// checkRevisionField refuses a revision above MaxRevision; a reply's other
// checks have read it as a uint64 (or null) already.
func checkRevisionField(fields map[string]json.RawMessage) error {
	var revision uint64
	if raw, ok := fields["revision"]; ok && json.Unmarshal(raw, &revision) == nil && revision > MaxRevision {
		return internalf("unreadable reply: revision %d is above 2^53 - 1, beyond every fence", revision)
	}
	return nil
}

// decodeOwner reads an owner reply: a lease, or {"held": false, "key"}.
func decodeOwner(data []byte) (Lease, error) {
	var lease Lease
	fields, err := object(data)
	if err != nil {
		return lease, err
	}
	if err := present(fields, freeKeyFields); err != nil {
		return lease, err
	}
	names := freeKeyFields
	if !bytes.Equal(bytes.TrimSpace(fields["held"]), []byte("false")) {
		names = leaseFields
	}
	return lease, decodeInto(data, names, &lease)
}

// decodeList reads a list page, each lease checked as an owner reply's.
func decodeList(data []byte) (LeaseList, error) {
	var page struct {
		Leases  []json.RawMessage `json:"leases"`
		Next    *string           `json:"next"`
		Corrupt []string          `json:"corrupt"`
	}
	if err := decodeInto(data, listFields, &page); err != nil {
		return LeaseList{}, err
	}
	list := LeaseList{Leases: make([]Lease, 0, len(page.Leases)), Corrupt: page.Corrupt}
	if page.Next != nil {
		list.Next = *page.Next
	}
	for _, raw := range page.Leases {
		var lease Lease
		if err := decodeInto(raw, leaseFields, &lease); err != nil {
			return LeaseList{}, err
		}
		list.Leases = append(list.Leases, lease)
	}
	return list, nil
}

// truncate keeps error sentences short whatever the reply.
func truncate(data []byte) []byte {
	const most = 200
	if len(data) > most {
		return data[:most]
	}
	return data
}
