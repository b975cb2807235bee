// Examples, run by go test against the real gateway: their output is
// checked.

package leases_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/nats-io/nats.go"
)

// natsURL is where the examples connect: nats.DefaultURL for a reader,
// the test servers' address when go test runs them.
var natsURL = nats.DefaultURL

// mustConnect connects to NATS as a service does at start-up.
func mustConnect() *nats.Conn {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		panic(err)
	}
	return nc
}

// A leader: keep the lease, act only while Fence says so, and send the
// fence with every write.
func ExampleStartKeeper() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()

	keeper := leases.StartKeeper(leases.NewClient(nc), leases.KeeperOptions{
		Key: "notify-leader", Holder: "notify-7f3a", TTL: 15 * time.Second, Wait: true})
	defer keeper.Stop(ctx)
	fence, err := keeper.WaitOwner(ctx) // send fence with every write

	fmt.Println(err == nil, fence > 0)
	// Output: true true
}

func ExampleClient_Acquire() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()
	client := leases.NewClient(nc, leases.WithTimeout(2*time.Second))

	grant, err := client.Acquire(ctx, "report-builder", "builder-1", 15*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("granted:", grant.Granted, "holder:", grant.Holder)

	other, err := client.Acquire(ctx, "report-builder", "builder-2", 15*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("granted:", other.Granted, "held by:", other.Holder)

	if _, err := client.Release(ctx, "report-builder", "builder-1", grant.Revision); err != nil {
		panic(err)
	}
	// Output:
	// granted: true holder: builder-1
	// granted: false held by: builder-1
}

func ExampleClient_Renew() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()
	client := leases.NewClient(nc)

	grant, err := client.Acquire(ctx, "compactor", "compactor-1", 15*time.Second)
	if err != nil {
		panic(err)
	}
	renewed, err := client.Renew(ctx, "compactor", "compactor-1", grant.Revision, 15*time.Second)
	if err != nil {
		panic(err)
	}
	// A renewal at an old fence once the lease moved on answers lost.
	moved, err := client.Transfer(ctx, "compactor", "compactor-1", renewed.Revision, "compactor-2", 15*time.Second)
	if err != nil {
		panic(err)
	}
	_, err = client.Renew(ctx, "compactor", "compactor-1", renewed.Revision, 15*time.Second)
	var lerr *leases.LeaseError
	if errors.As(err, &lerr) && lerr.Kind == leases.KindLost {
		fmt.Println("stop acting as owner")
	}
	fmt.Println(renewed.Revision > grant.Revision)
	_, _ = client.Release(ctx, "compactor", "compactor-2", moved.Revision)
	// Output:
	// stop acting as owner
	// true
}

func ExampleClient_List() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()
	client := leases.NewClient(nc)
	for _, shard := range []string{"ingest-0", "ingest-1", "ingest-2"} {
		if _, err := client.Acquire(ctx, shard, "worker-a1", 15*time.Second); err != nil {
			panic(err)
		}
	}

	var opts []leases.ListOption
	for {
		page, err := client.List(ctx, "ingest-", append(opts, leases.WithLimit(2))...)
		if err != nil {
			panic(err)
		}
		for _, lease := range page.Leases {
			fmt.Println(lease.Key, "held by", lease.Holder)
		}
		if page.Next == "" {
			break
		}
		opts = []leases.ListOption{leases.WithAfter(page.Next)}
	}
	// Output:
	// ingest-0 held by worker-a1
	// ingest-1 held by worker-a1
	// ingest-2 held by worker-a1
}

// The owner's side of forward: answer requests only while keeping the
// lease, and any process can reach the owner through Forward.
func ExampleServeInbox() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()
	client := leases.NewClient(nc)

	keeper := leases.StartKeeper(client, leases.KeeperOptions{
		Key: "shard-7", Holder: "worker-b2", TTL: 15 * time.Second, Wait: true})
	defer keeper.Stop(ctx)
	inbox, err := leases.ServeInbox(nc, "worker-b2", leases.Tenures(keeper), func(req leases.InboxRequest) []byte {
		return []byte("handled " + string(req.Payload))
	})
	if err != nil {
		panic(err)
	}
	defer inbox.Unsubscribe()
	if _, err := keeper.WaitOwner(ctx); err != nil {
		panic(err)
	}

	reply, err := client.Forward(ctx, "shard-7", []byte("job 42"), 2*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s by %s\n", reply.Payload, reply.Holder)
	// Output: handled job 42 by worker-b2
}

// A clean hand-over: the successor waits for the key, the holder hands it
// off, and the successor owns it at once at the transferred fence.
func ExampleKeeper_HandOff() {
	nc := mustConnect()
	defer nc.Close()
	ctx := context.Background()
	client := leases.NewClient(nc)
	options := leases.KeeperOptions{Key: "scheduler", Holder: "sched-old", TTL: 15 * time.Second, Wait: true}

	old := leases.StartKeeper(client, options)
	if _, err := old.WaitOwner(ctx); err != nil {
		panic(err)
	}
	options.Holder = "sched-new"
	successor := leases.StartKeeper(client, options)
	defer successor.Stop(ctx)

	grant, err := old.HandOff(ctx, "sched-new")
	if err != nil {
		panic(err)
	}
	if _, err := successor.WaitOwner(ctx); err != nil {
		panic(err)
	}
	tenure, _ := successor.Tenure()
	fmt.Println(grant.Holder, tenure == grant.Revision)
	// Output: sched-new true
}

// Watching ownership change, as a leader loop would.
func ExampleKeeper_Changes() {
	nc := mustConnect()
	defer nc.Close()
	keeper := leases.StartKeeper(leases.NewClient(nc), leases.KeeperOptions{
		Key: "janitor", Holder: "janitor-1", TTL: 15 * time.Second, Wait: true})

	for o := range keeper.Changes() {
		if o.Owner {
			fmt.Println("leading")
			_ = keeper.Stop(context.Background())
		} else {
			fmt.Println("not leading")
		}
	}
	// Output:
	// leading
	// not leading
}

func ExampleFenceGate() {
	gate := leases.NewFenceGate()
	fmt.Println(gate.Admit(42)) // the owner at revision 42 writes
	fmt.Println(gate.Admit(45)) // it renewed: revision 45
	fmt.Println(gate.Admit(50)) // a new owner took over at 50
	err := gate.Admit(45)       // the old owner wakes up
	fmt.Println(errors.Is(err, leases.ErrStaleFence), err)
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// true dagnats-leases: fence 45 is stale: a write at fence 50 was already admitted
}
