// ServeInbox: the owner's side of forward (docs/protocol.md, Forwarding
// to the owner).

package leases

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// InboxRequest is a forwarded request this process accepted.
type InboxRequest struct {
	// Key is the lease the request was forwarded for.
	Key string
	// Fence is the lease revision the gateway read when it forwarded.
	Fence uint64
	// Payload is the request body.
	Payload []byte
}

// TenureFunc says whether this process acts as owner of key now, and since
// which revision (a Keeper's Tenure). Tenures builds one from keepers.
type TenureFunc func(key string) (uint64, bool)

// InboxHandler produces the reply body for an accepted request. Each runs
// on its own goroutine.
type InboxHandler func(req InboxRequest) []byte

// ServeInbox answers the requests forwarded to holder, on
// dagnats.lease.inbox.<holder>.> (a plain subscription: the subject names
// one process). It rejects, with an empty body and the header
// Dagnats-Lease-Reject: stale, any request for a key it does not act as
// owner of now (tenure answers false), whose Dagnats-Lease-Fence header is
// missing or not an unsigned integer, or whose fence is below the tenure.
// A rejected request never reaches handler, and the gateway may retry it
// elsewhere. The subscription is in place at the server when ServeInbox
// returns; unsubscribe (or drain) it to stop.
func ServeInbox(nc *nats.Conn, holder string, tenure TenureFunc, handler InboxHandler) (*nats.Subscription, error) {
	if err := checkName("holder", holder); err != nil {
		return nil, err
	}
	prefix := InboxPrefix + "." + holder + "."
	sub, err := nc.Subscribe(prefix+">", func(msg *nats.Msg) {
		if msg.Reply == "" {
			return
		}
		req, ok := admitForward(msg, prefix, tenure)
		if !ok {
			reject := nats.NewMsg(msg.Reply)
			reject.Header.Set(HeaderReject, RejectStale)
			_ = nc.PublishMsg(reject)
			return
		}
		go func() {
			_ = msg.Respond(handler(req))
		}()
	})
	if err != nil {
		return nil, &LeaseError{Kind: KindUnavailable, Message: "cannot subscribe to the inbox: " + err.Error(), Err: err}
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, &LeaseError{Kind: KindUnavailable, Message: "the inbox subscription did not reach the server: " + err.Error(), Err: err}
	}
	return sub, nil
}

// admitForward applies the three rejection rules to a forwarded request.
func admitForward(msg *nats.Msg, prefix string, tenure TenureFunc) (InboxRequest, bool) {
	key := strings.TrimPrefix(msg.Subject, prefix)
	since, owner := tenure(key)
	if !owner {
		return InboxRequest{}, false
	}
	fence, err := strconv.ParseUint(header(msg.Header, HeaderFence), 10, 64)
	if err != nil || fence < since {
		return InboxRequest{}, false
	}
	return InboxRequest{Key: key, Fence: fence, Payload: msg.Data}, true
}
