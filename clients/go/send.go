// One call's requests: the first, the late copies that let another
// gateway answer, and what a failure means.

package leases

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// callBudget is how long a gateway lets a call on one key take before it
// answers unavailable, whether or not its caller says how long it waits.
const callBudget = 4500 * time.Millisecond

// replyMargin is the room a gateway leaves for its reply's way back to a
// caller that said how long it waits: a tenth of the wait when less.
const replyMargin = 200 * time.Millisecond

// resends says whether a late call on subject is sent again. The queue
// group hands each request to one gateway; one whose node froze still gets
// requests until its routes close, and they are lost there. Copies at half
// and three quarters of the timeout let another gateway answer. Every call
// the protocol makes safe to repeat is copied: acquire (idempotent), renew,
// release and transfer (fenced: a copy gets the first one's outcome, or
// lost once the key moved on), owner and list (reads). Forward never is:
// the owner could process it twice.
func resends(subject string) bool {
	return subject != SubjectForward
}

// isKeyCall: the calls on one key, which a gateway bounds with callBudget.
func isKeyCall(subject string) bool {
	switch subject {
	case SubjectAcquire, SubjectRenew, SubjectRelease, SubjectTransfer, SubjectOwner:
		return true
	}
	return false
}

// waitBounds says whether a request still waited for during wait should
// tell the gateway so: never a forward (its timeout_ms bounds it), a key
// call only when wait cuts the gateway's budget short, a list always.
func waitBounds(subject string, wait time.Duration) bool {
	if subject == SubjectForward {
		return false
	}
	if !isKeyCall(subject) {
		return true
	}
	margin := wait / 10
	if margin > replyMargin {
		margin = replyMargin
	}
	return wait-margin < callBudget
}

type reply struct {
	msg *nats.Msg
	err error
}

// send makes the call: a request now and, for calls safe to repeat, a copy
// at half and at three quarters of the time it may take, if no reply came.
// The first reply wins. A failure is the answer only when no other copy is
// in flight. The caller's context shortens the call and cancels it. Each
// copy carries the extra headers.
func (c *Client) send(ctx context.Context, subject string, body []byte, timeout time.Duration, extra nats.Header) ([]byte, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	callCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	var copiesAt []time.Time
	if resends(subject) {
		total := deadline.Sub(start)
		copiesAt = []time.Time{start.Add(total / 2), start.Add(total * 3 / 4)}
	}
	replies := make(chan reply, 1+len(copiesAt))
	inFlight := 0
	sendOne := func() {
		inFlight++
		msg := nats.NewMsg(subject)
		msg.Data = body
		for name, values := range extra {
			msg.Header[name] = values
		}
		if left := time.Until(deadline); waitBounds(subject, left) {
			msg.Header.Set(HeaderWaitMs, strconv.FormatInt(left.Milliseconds(), 10))
		}
		go func() {
			got, err := c.nc.RequestMsgWithContext(callCtx, msg)
			replies <- reply{got, err}
		}()
	}

	// One timer, re-armed for each copy still to send.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	arm := func() <-chan time.Time {
		if len(copiesAt) == 0 {
			return nil
		}
		timer.Reset(time.Until(copiesAt[0]))
		return timer.C
	}

	sendOne()
	nextCopy := arm()
	for {
		select {
		case r := <-replies:
			inFlight--
			if r.err == nil {
				return r.msg.Data, nil
			}
			if inFlight == 0 {
				return nil, c.failure(ctx, r.err, timeout)
			}
		case <-nextCopy:
			copiesAt = copiesAt[1:]
			sendOne()
			nextCopy = arm()
		}
	}
}

// failure turns a failed request into its *LeaseError.
func (c *Client) failure(ctx context.Context, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &LeaseError{Kind: KindUnavailable, Message: "no dagnats-leases gateway is listening", Err: err}
	case ctx.Err() != nil:
		return &LeaseError{Kind: KindTimeout, Message: "the call's context ended before a reply; it may or may not have taken effect", Err: ctx.Err()}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return &LeaseError{Kind: KindTimeout, Message: "no reply from the gateway within " + timeout.String() + "; the call may or may not have taken effect", Err: err}
	case errors.Is(err, nats.ErrMaxPayload):
		return &LeaseError{Kind: KindPayloadTooLarge, Message: "the request does not fit the NATS server's max_payload", Err: err}
	default:
		return &LeaseError{Kind: KindUnavailable, Message: "NATS request failed: " + err.Error(), Err: err}
	}
}
