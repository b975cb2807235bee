// Command leader is a small service that elects itself leader with a
// dagnats-leases keeper: it prints when it leads and when it stops, answers
// forwarded requests while it leads, and on SIGINT or SIGTERM hands the
// lease to -handoff-to (or releases it) and exits.
//
//	go run ./examples/leader -key notify-leader -holder notify-7f3a
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	leases "github.com/dagnats/dagnats-leases/clients/go"
	"github.com/nats-io/nats.go"
)

func main() {
	url := flag.String("nats", nats.DefaultURL, "NATS server URL")
	key := flag.String("key", "notify-leader", "the lease key")
	holder := flag.String("holder", fmt.Sprintf("leader-%d", os.Getpid()), "this process's holder id, unique per process")
	ttl := flag.Duration("ttl", 15*time.Second, "the lease TTL (whole seconds)")
	handOffTo := flag.String("handoff-to", "", "on exit, hand the lease to this holder instead of releasing it")
	flag.Parse()

	nc, err := nats.Connect(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()

	keeper := leases.StartKeeper(leases.NewClient(nc), leases.KeeperOptions{
		Key: *key, Holder: *holder, TTL: *ttl, Wait: true})
	inbox, err := leases.ServeInbox(nc, *holder, leases.Tenures(keeper), func(req leases.InboxRequest) []byte {
		return []byte(fmt.Sprintf("%s answered %q at fence %d", *holder, req.Payload, req.Fence))
	})
	if err != nil {
		log.Fatal(err)
	}
	defer inbox.Unsubscribe()

	go func() {
		for o := range keeper.Changes() {
			switch {
			case o.Owner && o.Fence == o.Tenure:
				log.Printf("leading %s since revision %d", *key, o.Tenure)
			case !o.Owner:
				log.Printf("not leading %s", *key)
			}
		}
	}()

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *handOffTo != "" {
		grant, err := keeper.HandOff(ctx, *handOffTo)
		if err == nil {
			log.Printf("handed %s to %s at revision %d", *key, grant.Holder, grant.Revision)
			return
		}
		log.Printf("hand-off failed (%v); released instead", err)
	}
	if err := keeper.Stop(ctx); err != nil {
		log.Printf("release failed (%v); the TTL will free the key", err)
	}
}
