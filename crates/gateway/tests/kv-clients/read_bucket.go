// Reads the `leases` bucket as a user of nats.go's KV would: its keys, a
// watch of every key's current value, and a get of each key seen and of
// the barrier keys earlier gateways wrote. Prints one JSON object, as
// read-bucket.mjs does. Usage: read_bucket NATS_URL
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
)

type watched struct {
	Key       string `json:"key"`
	Operation string `json:"operation"`
}

// The operations as the JavaScript client names them.
var operations = map[nats.KeyValueOp]string{
	nats.KeyValuePut:    "PUT",
	nats.KeyValueDelete: "DEL",
	nats.KeyValuePurge:  "PURGE",
}

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	kv, err := js.KeyValue("leases")
	if err != nil {
		return err
	}
	keys, err := kv.Keys()
	if err != nil {
		return err
	}
	// The watch delivers every key's current value, then a nil entry.
	w, err := kv.WatchAll()
	if err != nil {
		return err
	}
	var seen []watched
	for entry := range w.Updates() {
		if entry == nil {
			break
		}
		seen = append(seen, watched{entry.Key(), operations[entry.Operation()]})
	}
	if err := w.Stop(); err != nil {
		return err
	}
	gets := map[string]*string{}
	asked := append([]string{}, keys...)
	for _, e := range seen {
		asked = append(asked, e.Key)
	}
	for _, key := range append(asked, "_dagnats.read", "_dagnats.list") {
		entry, err := kv.Get(key)
		switch {
		case errors.Is(err, nats.ErrKeyNotFound):
			gets[key] = nil
		case err != nil:
			return fmt.Errorf("get %s: %w", key, err)
		default:
			op := operations[entry.Operation()]
			gets[key] = &op
		}
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]interface{}{
		"keys": keys, "watched": seen, "gets": gets,
	})
}
