// Command conformancedriver is the Go library's conformance driver: it
// speaks the JSON lines of clients/conformance/DRIVER.md on stdin and
// stdout, and answers each request by calling the library's public API. It
// holds no lease logic of its own.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/nats-io/nats.go"
)

func main() {
	timeout := leases.DefaultTimeout
	if ms := os.Getenv("DRIVER_CALL_TIMEOUT_MS"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil {
			fmt.Fprintf(os.Stderr, "DRIVER_CALL_TIMEOUT_MS=%q is not a number of milliseconds\n", ms)
			os.Exit(2)
		}
		timeout = time.Duration(n) * time.Millisecond
	}
	url := os.Getenv("NATS_URL")
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot connect to %s: %v\n", url, err)
		os.Exit(1)
	}
	d := newDriver(nc, leases.NewClient(nc, leases.WithTimeout(timeout)), os.Stdout)
	d.print(map[string]interface{}{"ready": true, "library": "go", "version": leases.Version})
	d.serve(os.Stdin)
	nc.Close()
}

// driver is the state the requests share: the named keepers, inboxes and
// gates, and stdout.
type driver struct {
	nc     *nats.Conn
	client *leases.Client

	out   *bufio.Writer
	outMu sync.Mutex

	mu      sync.Mutex
	keepers map[string]*leases.Keeper
	inboxes map[string]*nats.Subscription
	gates   map[string]*leases.FenceGate
}

func newDriver(nc *nats.Conn, client *leases.Client, out io.Writer) *driver {
	return &driver{
		nc:      nc,
		client:  client,
		out:     bufio.NewWriter(out),
		keepers: map[string]*leases.Keeper{},
		inboxes: map[string]*nats.Subscription{},
		gates:   map[string]*leases.FenceGate{},
	}
}

// print writes one whole line.
func (d *driver) print(line interface{}) {
	data, err := json.Marshal(line)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"driver_error": err.Error()})
	}
	d.outMu.Lock()
	defer d.outMu.Unlock()
	_, _ = d.out.Write(append(data, '\n'))
	_ = d.out.Flush()
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Op     string          `json:"op"`
	Method string          `json:"method"`
	Args   args            `json:"args"`
	Fields args            `json:"-"`
}

// serve answers each line on its own goroutine until stdin closes or an
// exit request; then it stops every keeper (releasing), which also ends
// any wait for ownership still running, and gives the requests in flight
// a moment to answer.
func (d *driver) serve(in io.Reader) {
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	var running sync.WaitGroup
	for lines.Scan() {
		line := append([]byte(nil), lines.Bytes()...)
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			d.answer(req.ID, nil, driverError("bad_request", "not a request: "+err.Error()))
			continue
		}
		_ = json.Unmarshal(line, &req.Fields)
		if req.Op == "exit" {
			d.stopKeepers()
			d.answer(req.ID, map[string]interface{}{}, nil)
			return
		}
		running.Add(1)
		go func() {
			defer running.Done()
			ok, err := d.handle(req)
			d.answer(req.ID, ok, err)
		}()
	}
	d.stopKeepers()
	finished := make(chan struct{})
	go func() {
		running.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
	}
}

func (d *driver) answer(id json.RawMessage, ok interface{}, err error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	if err != nil {
		d.print(map[string]interface{}{"id": id, "error": errorJSON(err)})
		return
	}
	d.print(map[string]interface{}{"id": id, "ok": ok})
}

func (d *driver) handle(req request) (interface{}, error) {
	if req.Op == "call" {
		return d.call(req.Method, req.Args)
	}
	ops := map[string]func(args) (interface{}, error){
		"keeper.start":      d.keeperStart,
		"keeper.state":      d.keeperState,
		"keeper.wait_owner": d.keeperWaitOwner,
		"keeper.hand_off":   d.keeperHandOff,
		"keeper.stop":       d.keeperStop,
		"inbox.serve":       d.inboxServe,
		"inbox.stop":        d.inboxStop,
		"gate.admit":        d.gateAdmit,
	}
	if op, ok := ops[req.Op]; ok {
		return op(req.Fields)
	}
	return nil, driverError("bad_request", fmt.Sprintf("unknown op %q", req.Op))
}

func (d *driver) call(method string, a args) (interface{}, error) {
	ctx := context.Background()
	switch method {
	case "acquire":
		grant, err := d.client.Acquire(ctx, a.str("key"), a.str("holder"), a.duration("ttl_ms"))
		return grantJSON(grant), a.or(err)
	case "renew":
		grant, err := d.client.Renew(ctx, a.str("key"), a.str("holder"), a.uint("revision"), a.duration("ttl_ms"))
		return grantJSON(grant), a.or(err)
	case "release":
		released, err := d.client.Release(ctx, a.str("key"), a.str("holder"), a.uint("revision"))
		return map[string]interface{}{
			"released": released.Released, "held": released.Held, "key": released.Key,
			"holder": released.Holder, "revision": released.Revision,
		}, a.or(err)
	case "owner":
		lease, err := d.client.Owner(ctx, a.str("key"))
		return leaseJSON(lease), a.or(err)
	case "transfer":
		grant, err := d.client.Transfer(ctx, a.str("key"), a.str("holder"), a.uint("revision"), a.str("to"), a.duration("ttl_ms"))
		return grantJSON(grant), a.or(err)
	case "list":
		var opts []leases.ListOption
		if a.present("after") {
			opts = append(opts, leases.WithAfter(a.str("after")))
		}
		if a.present("limit") {
			opts = append(opts, leases.WithLimit(a.int("limit")))
		}
		page, err := d.client.List(ctx, a.str("prefix"), opts...)
		list := make([]interface{}, 0, len(page.Leases))
		for _, lease := range page.Leases {
			list = append(list, leaseJSON(lease))
		}
		var next interface{}
		if page.Next != "" {
			next = page.Next
		}
		return map[string]interface{}{"leases": list, "next": next}, a.or(err)
	case "forward":
		timeout := 5 * time.Second
		if a.present("timeout_ms") {
			timeout = a.duration("timeout_ms")
		}
		forwarded, err := d.client.Forward(ctx, a.str("key"), a.bytes("payload_b64"), timeout)
		return map[string]interface{}{"payload_b64": forwarded.Payload}, a.or(err)
	}
	return nil, driverError("bad_request", fmt.Sprintf("unknown method %q", method))
}

func (d *driver) keeperStart(f args) (interface{}, error) {
	name := f.str("keeper")
	d.mu.Lock()
	_, exists := d.keepers[name]
	d.mu.Unlock()
	if exists {
		return nil, driverError("bad_request", fmt.Sprintf("keeper %q exists", name))
	}
	keeper := leases.StartKeeper(d.client, leases.KeeperOptions{
		Key: f.str("key"), Holder: f.str("holder"), TTL: f.duration("ttl_ms"), Wait: f.bool("wait"),
	})
	if err := f.or(nil); err != nil {
		_ = keeper.Stop(context.Background())
		return nil, err
	}
	d.mu.Lock()
	d.keepers[name] = keeper
	d.mu.Unlock()
	go func() {
		for o := range keeper.Changes() {
			d.print(map[string]interface{}{
				"event": "ownership", "keeper": name, "owner": o.Owner,
				"fence": optional(o.Fence, o.Owner), "tenure": optional(o.Tenure, o.Owner),
			})
		}
	}()
	return map[string]interface{}{}, nil
}

func (d *driver) keeper(f args) (*leases.Keeper, error) {
	return d.findKeeper(f, false)
}

// findKeeper is the keeper a request names; forget drops it from the
// names, as a hand-off or a stop ends it.
func (d *driver) findKeeper(f args, forget bool) (*leases.Keeper, error) {
	name := f.str("keeper")
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.keepers[name]
	if !ok {
		return nil, driverError("not_found", fmt.Sprintf("no keeper named %q", name))
	}
	if forget {
		delete(d.keepers, name)
	}
	return k, nil
}

func (d *driver) keeperState(f args) (interface{}, error) {
	k, err := d.keeper(f)
	if err != nil {
		return nil, err
	}
	fence, owner := k.Fence()
	tenure, owning := k.Tenure()
	return map[string]interface{}{"fence": optional(fence, owner), "tenure": optional(tenure, owning)}, nil
}

func (d *driver) keeperWaitOwner(f args) (interface{}, error) {
	k, err := d.keeper(f)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if f.present("timeout_ms") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.duration("timeout_ms"))
		defer cancel()
	}
	if err := f.or(nil); err != nil {
		return nil, err
	}
	fence, err := k.WaitOwner(ctx)
	return map[string]interface{}{"fence": fence}, err
}

func (d *driver) keeperHandOff(f args) (interface{}, error) {
	k, err := d.findKeeper(f, true)
	if err != nil {
		return nil, err
	}
	grant, err := k.HandOff(context.Background(), f.str("to"))
	if leases.KindOf(err) == leases.KindInvalid {
		// Refused before anything happened: the keeper keeps running.
		d.mu.Lock()
		d.keepers[f.str("keeper")] = k
		d.mu.Unlock()
	}
	return grantJSON(grant), f.or(err)
}

func (d *driver) keeperStop(f args) (interface{}, error) {
	k, err := d.findKeeper(f, true)
	if err != nil {
		return nil, err
	}
	return map[string]interface{}{}, k.Stop(context.Background())
}

func (d *driver) stopKeepers() {
	d.mu.Lock()
	keepers := make([]*leases.Keeper, 0, len(d.keepers))
	for _, k := range d.keepers {
		keepers = append(keepers, k)
	}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range keepers {
		if err := k.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stopping keeper of %s: %v\n", k.Key(), err)
		}
	}
}

func (d *driver) inboxServe(f args) (interface{}, error) {
	name := f.str("inbox")
	tenure, err := d.tenures(f.object("tenures"))
	if err != nil {
		return nil, err
	}
	handler, err := d.handler(name, f.str("mode"))
	if err != nil {
		return nil, err
	}
	if err := f.or(nil); err != nil {
		return nil, err
	}
	sub, err := leases.ServeInbox(d.nc, f.str("holder"), tenure, handler)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.inboxes[name] = sub
	d.mu.Unlock()
	return map[string]interface{}{}, nil
}

// tenures is the tenure function a request names: a keeper's own (looked
// up at each request, so the keeper may start later), or fixed revisions.
func (d *driver) tenures(t args) (leases.TenureFunc, error) {
	if t.present("keeper") {
		name := t.str("keeper")
		return func(key string) (uint64, bool) {
			d.mu.Lock()
			k, ok := d.keepers[name]
			d.mu.Unlock()
			if !ok {
				return 0, false
			}
			return leases.Tenures(k)(key)
		}, t.or(nil)
	}
	given := t.object("fixed")
	fixed := map[string]uint64{}
	for key := range given.fields {
		fixed[key] = given.uint(key)
	}
	if err := t.or(nil); err != nil {
		return nil, err
	}
	return func(key string) (uint64, bool) {
		revision, ok := fixed[key]
		return revision, ok
	}, nil
}

func (d *driver) handler(inbox, mode string) (leases.InboxHandler, error) {
	seen := func(req leases.InboxRequest) {
		d.print(map[string]interface{}{
			"event": "inbox", "inbox": inbox, "key": req.Key, "fence": req.Fence, "payload_b64": req.Payload,
		})
	}
	switch mode {
	case "echo":
		return func(req leases.InboxRequest) []byte {
			seen(req)
			return append([]byte("echo:"), req.Payload...)
		}, nil
	case "hang":
		return func(req leases.InboxRequest) []byte {
			seen(req)
			select {}
		}, nil
	case "large":
		large := make([]byte, 1000000)
		for i := range large {
			large[i] = 'x'
		}
		return func(req leases.InboxRequest) []byte {
			seen(req)
			return large
		}, nil
	}
	return nil, driverError("bad_request", fmt.Sprintf("unknown inbox mode %q", mode))
}

func (d *driver) inboxStop(f args) (interface{}, error) {
	name := f.str("inbox")
	d.mu.Lock()
	sub, ok := d.inboxes[name]
	delete(d.inboxes, name)
	d.mu.Unlock()
	if !ok {
		return nil, driverError("not_found", fmt.Sprintf("no inbox named %q", name))
	}
	if err := sub.Unsubscribe(); err != nil {
		return nil, driverError("bad_request", err.Error())
	}
	if err := d.nc.Flush(); err != nil {
		return nil, driverError("bad_request", err.Error())
	}
	return map[string]interface{}{}, nil
}

func (d *driver) gateAdmit(f args) (interface{}, error) {
	name, fence := f.str("gate"), f.uint("fence")
	if err := f.or(nil); err != nil {
		return nil, err
	}
	d.mu.Lock()
	gate, ok := d.gates[name]
	if !ok {
		gate = leases.NewFenceGate()
		d.gates[name] = gate
	}
	d.mu.Unlock()
	if err := gate.Admit(fence); err != nil {
		return nil, driverError("stale_fence", err.Error())
	}
	return map[string]interface{}{}, nil
}

// optional is n, or null when the library said there is none.
func optional(n uint64, ok bool) interface{} {
	if !ok {
		return nil
	}
	return n
}
