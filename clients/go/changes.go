// What a message on dagnats.lease.changed.<key> says, as far as a waiting
// keeper needs it (docs/protocol.md, Change events).

package leases

import (
	"encoding/json"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Change event names: why the key's record changed.
const (
	eventAcquired = "acquired"
	eventRenewed  = "renewed"
	eventReleased = "released"
	eventExpired  = "expired"
)

// change is one write to a key: which event, at which revision, and the
// holder it names when it has one.
type change struct {
	event    string
	revision uint64
	holder   string
}

// endsTenure: the key has no holder after this change.
func (c change) endsTenure() bool {
	return c.event == eventReleased || c.event == eventExpired
}

// changedSubject carries the changes of key.
func changedSubject(key string) string {
	return ChangedPrefix + "." + key
}

// decodeChange reads a change event; ok is false for a message that is not
// one (no revision, or a record that does not say what it is).
func decodeChange(msg *nats.Msg) (c change, ok bool) {
	revision, err := strconv.ParseUint(header(msg.Header, headerSequence), 10, 64)
	if err != nil {
		return c, false
	}
	c.revision = revision
	// The server's marker when a TTL ran out; a release is a purge.
	if header(msg.Header, headerMarkerReason) != "" {
		c.event = eventExpired
		return c, true
	}
	switch header(msg.Header, headerKVOperation) {
	case "DEL", "PURGE":
		c.event = eventReleased
		return c, true
	}
	switch event := header(msg.Header, HeaderEvent); event {
	case eventAcquired, eventRenewed:
		var record struct {
			Holder string `json:"holder"`
		}
		if err := json.Unmarshal(msg.Data, &record); err != nil || record.Holder == "" {
			return c, false
		}
		c.event, c.holder = event, record.Holder
		return c, true
	}
	return c, false
}
