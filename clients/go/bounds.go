// The protocol's input bounds, checked before anything is sent.

package leases

import "time"

// The input bounds of docs/protocol.md, Input bounds. The client refuses
// anything outside them with kind invalid before sending.
const (
	// MaxNameLen is the longest key, holder or prefix, in bytes.
	MaxNameLen = 128
	// MinTTL and MaxTTL bound a lease's TTL, which is a whole number of
	// seconds: the server keeps message TTLs in whole seconds.
	MinTTL = time.Second
	// MaxTTL: see MinTTL.
	MaxTTL = 10 * time.Minute
	// MinForwardTimeout and MaxForwardTimeout bound a forward's timeout_ms.
	MinForwardTimeout = 100 * time.Millisecond
	// MaxForwardTimeout: see MinForwardTimeout.
	MaxForwardTimeout = 30 * time.Second
	// MaxListLimit is the most leases one list page may be asked for.
	MaxListLimit = 5000
)

func isNameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// checkName applies the key and holder rule: 1 to 128 bytes of
// [A-Za-z0-9_-], so a name is exactly one subject token.
func checkName(field, value string) error {
	valid := len(value) >= 1 && len(value) <= MaxNameLen
	for i := 0; valid && i < len(value); i++ {
		valid = isNameByte(value[i])
	}
	if !valid {
		return invalidf("%s must be 1 to %d bytes of [A-Za-z0-9_-], got %q", field, MaxNameLen, value)
	}
	return nil
}

// checkPrefix: a list prefix follows the key rule, or is empty (every key).
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkName("prefix", prefix)
}

// ttlMillis is the wire's ttl_ms for ttl, if ttl is a whole number of
// seconds within bounds.
func ttlMillis(ttl time.Duration) (uint64, error) {
	if ttl < MinTTL || ttl > MaxTTL || ttl%time.Second != 0 {
		return 0, invalidf("ttl_ms must be a whole number of seconds from %d to %d, got %v",
			MinTTL.Milliseconds(), MaxTTL.Milliseconds(), ttl)
	}
	return uint64(ttl.Milliseconds()), nil
}

func checkRevision(revision uint64) error {
	if revision == 0 {
		return invalidf("revision must be the fence from your last reply, not 0")
	}
	return nil
}

// forwardMillis is the wire's timeout_ms for a forward bounded by timeout.
func forwardMillis(timeout time.Duration) (uint64, error) {
	if timeout < MinForwardTimeout || timeout > MaxForwardTimeout || timeout%time.Millisecond != 0 {
		return 0, invalidf("timeout_ms must be a whole number of milliseconds from %d to %d, got %v",
			MinForwardTimeout.Milliseconds(), MaxForwardTimeout.Milliseconds(), timeout)
	}
	return uint64(timeout.Milliseconds()), nil
}

func checkLimit(limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return invalidf("limit must be a whole number from 1 to %d, got %d", MaxListLimit, limit)
	}
	return nil
}
