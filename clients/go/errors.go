// The error every failed call returns, and the kinds it carries.

package leases

import (
	"errors"
	"fmt"
)

// Error kinds. A [LeaseError]'s Kind is one of the gateway's wire kinds
// (docs/protocol.md, Error kinds) or one of the five client-side kinds
// below, which every holder library spells the same way.
const (
	// KindInvalid: input out of the protocol's bounds. Raised by the
	// client before anything is sent, or answered by the gateway.
	KindInvalid = "invalid"
	// KindLost: the caller is not the holder at that fence (renew,
	// release, transfer). Stop acting as owner now.
	KindLost = "lost"
	// KindUnsupported: the NATS server is older than 2.11.
	KindUnsupported = "unsupported"
	// KindUnavailable: no gateway answers the subject (no responders),
	// the NATS connection failed, or the gateway cannot reach JetStream.
	KindUnavailable = "unavailable"
	// KindTimeout: no reply in time, or the caller's context ended first.
	// The call may or may not have taken effect.
	KindTimeout = "timeout"
	// KindInternal: a reply the client cannot read, or a gateway fault.
	KindInternal = "internal"
	// KindNotHeld: forward to a key nobody holds.
	KindNotHeld = "not_held"
	// KindOwnerUnavailable: forward found no responder on the owner's inbox.
	KindOwnerUnavailable = "owner_unavailable"
	// KindOwnerTimeout: the owner did not answer a forward in time.
	KindOwnerTimeout = "owner_timeout"
	// KindOwnerRejected: the owner rejected a forward as stale.
	KindOwnerRejected = "owner_rejected"
	// KindReplyTooLarge: the owner's reply does not fit the gateway hop.
	KindReplyTooLarge = "reply_too_large"
	// KindPayloadTooLarge: the forwarded payload does not fit a NATS
	// message: its request does not fit the connection's max_payload (the
	// client sends nothing), or it does not fit the gateway's hop to the
	// owner.
	KindPayloadTooLarge = "payload_too_large"
	// KindForbidden: the gateway's policy refuses this caller.
	KindForbidden = "forbidden"
)

// LeaseError is the error of every failed call. Use errors.As to read it:
//
//	var lerr *leases.LeaseError
//	if errors.As(err, &lerr) && lerr.Kind == leases.KindLost { ... }
type LeaseError struct {
	// Kind is the wire kind the gateway answered, or a client-side kind.
	Kind string
	// Message is the gateway's sentence, or the client's.
	Message string
	// Holder is the owner a failed forward last tried; "" otherwise.
	Holder string
	// Revision is the fence of the owner a failed forward last tried; 0
	// otherwise (no fence is 0).
	Revision uint64
	// Err is the underlying cause, when there is one: the context's error
	// for a call cut short by its context, the NATS error for a failed
	// request.
	Err error
}

// Error reads "dagnats-leases: <kind>: <message>".
func (e *LeaseError) Error() string {
	return fmt.Sprintf("dagnats-leases: %s: %s", e.Kind, e.Message)
}

// Unwrap returns the underlying cause, so errors.Is(err,
// context.Canceled) holds for a call its context cancelled.
func (e *LeaseError) Unwrap() error {
	return e.Err
}

// KindOf returns the kind of err if it is (or wraps) a [*LeaseError], else "".
func KindOf(err error) string {
	var lerr *LeaseError
	if errors.As(err, &lerr) {
		return lerr.Kind
	}
	return ""
}

// IsLost reports whether err says the caller does not hold the lease at
// that fence: stop acting as owner now.
func IsLost(err error) bool {
	return KindOf(err) == KindLost
}

func invalidf(format string, args ...interface{}) *LeaseError {
	return &LeaseError{Kind: KindInvalid, Message: fmt.Sprintf(format, args...)}
}

func internalf(format string, args ...interface{}) *LeaseError {
	return &LeaseError{Kind: KindInternal, Message: fmt.Sprintf(format, args...)}
}
