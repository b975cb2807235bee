// Client: the lease subjects as typed calls.

package leases

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultTimeout is how long a Client waits for each reply unless told
// otherwise with WithTimeout.
const DefaultTimeout = 5 * time.Second

// forwardMargin is how much longer than its timeout_ms a forward waits:
// the gateway's own answer about a late owner must still reach us.
const forwardMargin = time.Second

// Client makes typed calls to the lease gateway over a NATS connection. It
// is safe for concurrent use and holds no state besides its settings.
type Client struct {
	nc      *nats.Conn
	timeout time.Duration
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithTimeout sets how long each call waits for its reply (default 5 s).
// A context with an earlier deadline shortens it for that call.
func WithTimeout(timeout time.Duration) ClientOption {
	return func(c *Client) {
		c.timeout = timeout
	}
}

// NewClient returns a Client on nc.
func NewClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := &Client{nc: nc, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Conn is the NATS connection underneath.
func (c *Client) Conn() *nats.Conn {
	return c.nc
}

// Timeout is how long each call waits for its reply.
func (c *Client) Timeout() time.Duration {
	return c.timeout
}

// Acquire takes key for ttl (whole seconds, 1 s to 10 min) if nobody holds
// it. Granted false names the current holder. Safe to retry: the holder
// asking again gets its own lease back, unchanged.
func (c *Client) Acquire(ctx context.Context, key, holder string, ttl time.Duration) (Grant, error) {
	return c.acquire(ctx, key, holder, ttl, nil)
}

// AcquireWaited is [Client.Acquire] as one try of a wait for the key that
// began waited ago: once it grants the key, the gateway counts how long
// its holder waited for it ([HeaderWaitedMs]).
func (c *Client) AcquireWaited(ctx context.Context, key, holder string, ttl, waited time.Duration) (Grant, error) {
	if waited < 0 {
		waited = 0
	}
	extra := nats.Header{}
	extra.Set(HeaderWaitedMs, strconv.FormatInt(waited.Milliseconds(), 10))
	return c.acquire(ctx, key, holder, ttl, extra)
}

func (c *Client) acquire(ctx context.Context, key, holder string, ttl time.Duration, extra nats.Header) (Grant, error) {
	var grant Grant
	if err := firstError(checkName("key", key), checkName("holder", holder)); err != nil {
		return grant, err
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return grant, err
	}
	req := acquireRequest{Key: key, Holder: holder, TTLMs: ttlMs}
	data, err := c.request(ctx, SubjectAcquire, req, c.timeout, extra)
	if err != nil {
		return grant, err
	}
	return grant, decodeInto(data, grantFields, &grant)
}

// Renew extends the lease held at revision to ttl from now; the reply
// carries the new fence. A [LeaseError] of kind lost means: stop acting
// as owner now.
func (c *Client) Renew(ctx context.Context, key, holder string, revision uint64, ttl time.Duration) (Grant, error) {
	var grant Grant
	if err := firstError(checkName("key", key), checkName("holder", holder), checkRevision(revision)); err != nil {
		return grant, err
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return grant, err
	}
	req := renewRequest{Key: key, Holder: holder, Revision: revision, TTLMs: ttlMs}
	return grant, c.call(ctx, SubjectRenew, req, grantFields, &grant)
}

// Release frees the lease held at revision.
func (c *Client) Release(ctx context.Context, key, holder string, revision uint64) (Released, error) {
	var released Released
	if err := firstError(checkName("key", key), checkName("holder", holder), checkRevision(revision)); err != nil {
		return released, err
	}
	req := releaseRequest{Key: key, Holder: holder, Revision: revision}
	return released, c.call(ctx, SubjectRelease, req, releasedFields, &released)
}

// Owner reads who holds key, through the stream leader. A free key is a
// Lease with Held false and only Key set.
func (c *Client) Owner(ctx context.Context, key string) (Lease, error) {
	if err := checkName("key", key); err != nil {
		return Lease{}, err
	}
	data, err := c.request(ctx, SubjectOwner, ownerRequest{Key: key}, c.timeout, nil)
	if err != nil {
		return Lease{}, err
	}
	return decodeOwner(data)
}

// Transfer hands the lease holder holds at revision to another holder, to,
// for ttl from now, in one write: the reply is to's lease, a new tenure at
// a higher fence. Stop acting as owner before calling it. Kind lost means
// holder did not hold the key at revision.
func (c *Client) Transfer(ctx context.Context, key, holder string, revision uint64, to string, ttl time.Duration) (Grant, error) {
	var grant Grant
	err := firstError(checkName("key", key), checkName("holder", holder), checkRevision(revision), checkSuccessor(holder, to))
	if err != nil {
		return grant, err
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return grant, err
	}
	req := transferRequest{Key: key, Holder: holder, Revision: revision, To: to, TTLMs: ttlMs}
	return grant, c.call(ctx, SubjectTransfer, req, grantFields, &grant)
}

// ListOption narrows a List call.
type ListOption func(*listRequest) error

// WithAfter lists only keys sorting after key: the Next of the previous
// page.
func WithAfter(key string) ListOption {
	return func(req *listRequest) error {
		if err := checkName("after", key); err != nil {
			return err
		}
		req.After = key
		return nil
	}
}

// WithLimit asks for at most limit leases (1 to 5000; without it the
// gateway answers up to 1000).
func WithLimit(limit int) ListOption {
	return func(req *listRequest) error {
		if err := checkLimit(limit); err != nil {
			return err
		}
		req.Limit = limit
		return nil
	}
}

// List reads one page of the held leases whose key starts with prefix
// ("" for every key), ordered by key and never more than fit one NATS
// message. Next is "" on the last page.
func (c *Client) List(ctx context.Context, prefix string, opts ...ListOption) (LeaseList, error) {
	if err := checkPrefix(prefix); err != nil {
		return LeaseList{}, err
	}
	req := listRequest{Prefix: prefix}
	for _, opt := range opts {
		if err := opt(&req); err != nil {
			return LeaseList{}, err
		}
	}
	data, err := c.request(ctx, SubjectList, req, c.timeout, nil)
	if err != nil {
		return LeaseList{}, err
	}
	return decodeList(data)
}

// ListAll reads every held lease whose key starts with prefix, page after
// page until Next is "".
func (c *Client) ListAll(ctx context.Context, prefix string) ([]Lease, error) {
	var all []Lease
	var opts []ListOption
	for {
		page, err := c.List(ctx, prefix, opts...)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Leases...)
		if page.Next == "" {
			return all, nil
		}
		opts = []ListOption{WithAfter(page.Next)}
	}
}

// Forward sends payload to whichever process holds key, and returns its
// reply. timeout (100 ms to 30 s) bounds the whole call at the gateway;
// the client waits a second longer for the gateway's answer. A forward is
// never sent twice: the owner might process it twice.
func (c *Client) Forward(ctx context.Context, key string, payload []byte, timeout time.Duration) (Forwarded, error) {
	var forwarded Forwarded
	if err := checkName("key", key); err != nil {
		return forwarded, err
	}
	timeoutMs, err := forwardMillis(timeout)
	if err != nil {
		return forwarded, err
	}
	if payload == nil {
		payload = []byte{}
	}
	req := forwardRequest{Key: key, Payload: payload, TimeoutMs: timeoutMs}
	data, err := c.request(ctx, SubjectForward, req, timeout+forwardMargin, nil)
	if err != nil {
		return forwarded, err
	}
	return forwarded, decodeInto(data, forwardedFields, &forwarded)
}

// call sends req on subject and reads a reply that must carry fields into
// out.
func (c *Client) call(ctx context.Context, subject string, req interface{}, fields []string, out interface{}) error {
	data, err := c.request(ctx, subject, req, c.timeout, nil)
	if err != nil {
		return err
	}
	return decodeInto(data, fields, out)
}

func (c *Client) request(ctx context.Context, subject string, req interface{}, timeout time.Duration, extra nats.Header) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, internalf("cannot encode the request: %v", err)
	}
	return c.send(ctx, subject, body, timeout, extra)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
