// The names on the wire that this library speaks (docs/protocol.md):
// subjects, headers and the request bodies.

package leases

import (
	"net/textproto"
	"strings"

	"github.com/nats-io/nats.go"
)

// Request/reply subjects of the lease API.
const (
	SubjectAcquire  = "api.leases.acquire"
	SubjectRenew    = "api.leases.renew"
	SubjectRelease  = "api.leases.release"
	SubjectOwner    = "api.leases.owner"
	SubjectTransfer = "api.leases.transfer"
	SubjectList     = "api.leases.list"
	SubjectForward  = "api.leases.forward"
)

// Subject prefixes of the change events and of the owners' inboxes.
const (
	// ChangedPrefix + "." + key carries every write to key
	// (docs/protocol.md, Change events).
	ChangedPrefix = "dagnats.lease.changed"
	// InboxPrefix + "." + holder + "." + key is where forward reaches the
	// owner of key (docs/protocol.md, Forwarding to the owner).
	InboxPrefix = "dagnats.lease.inbox"
)

// Headers of forwarding and of change events.
const (
	// HeaderFence carries the lease revision on a forwarded request.
	HeaderFence = "Dagnats-Lease-Fence"
	// HeaderReject with value RejectStale is an owner's refusal.
	HeaderReject = "Dagnats-Lease-Reject"
	// RejectStale is the only value of HeaderReject.
	RejectStale = "stale"
	// HeaderWaitMs tells the gateway how long a late copy of a request
	// is still waited for.
	HeaderWaitMs = "Dagnats-Lease-Wait-Ms"
	// HeaderWaitedMs, on each try of a wait for a key, says how many
	// milliseconds have passed since the first try.
	HeaderWaitedMs = "Dagnats-Lease-Waited-Ms"
	// HeaderEvent says why a record was written: acquired, renewed or
	// released.
	HeaderEvent = "Dagnats-Lease-Event"

	headerSequence     = "Nats-Sequence"
	headerMarkerReason = "Nats-Marker-Reason"
	headerKVOperation  = "KV-Operation"
)

type acquireRequest struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	TTLMs  uint64 `json:"ttl_ms"`
}

type renewRequest struct {
	Key      string `json:"key"`
	Holder   string `json:"holder"`
	Revision uint64 `json:"revision"`
	TTLMs    uint64 `json:"ttl_ms"`
}

type releaseRequest struct {
	Key      string `json:"key"`
	Holder   string `json:"holder"`
	Revision uint64 `json:"revision"`
}

type ownerRequest struct {
	Key string `json:"key"`
}

type transferRequest struct {
	Key      string `json:"key"`
	Holder   string `json:"holder"`
	Revision uint64 `json:"revision"`
	To       string `json:"to"`
	TTLMs    uint64 `json:"ttl_ms"`
}

type listRequest struct {
	Prefix string `json:"prefix"`
	After  string `json:"after,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

type forwardRequest struct {
	Key       string `json:"key"`
	Payload   []byte `json:"payload"`
	TimeoutMs uint64 `json:"timeout_ms"`
}

// header is the first value of name in h, whatever the case of its
// spelling: clients differ in how they write header names. The exact
// spelling wins.
func header(h nats.Header, name string) string {
	if values := h[name]; len(values) > 0 {
		return values[0]
	}
	if values := h[textproto.CanonicalMIMEHeaderKey(name)]; len(values) > 0 {
		return values[0]
	}
	for key, values := range h {
		if strings.EqualFold(key, name) && len(values) > 0 {
			return values[0]
		}
	}
	return ""
}
