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

// checkSuccessor applies the transfer's rule for to: a valid holder id
// other than holder.
func checkSuccessor(holder, to string) error {
	if err := checkName("to", to); err != nil {
		return err
	}
	if to == holder {
		return invalidf("to must name another holder than holder, got %q for both", to)
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

// millisWithin is d as the wire's milliseconds, if d is a whole number of
// units from lo to hi; field and unitName word the refusal.
func millisWithin(field string, d, lo, hi, unit time.Duration, unitName string) (uint64, error) {
	if d < lo || d > hi || d%unit != 0 {
		return 0, invalidf("%s must be a whole number of %s from %d to %d, got %v",
			field, unitName, lo.Milliseconds(), hi.Milliseconds(), d)
	}
	return uint64(d.Milliseconds()), nil
}

// ttlMillis is the wire's ttl_ms for ttl: whole seconds within bounds.
func ttlMillis(ttl time.Duration) (uint64, error) {
	return millisWithin("ttl_ms", ttl, MinTTL, MaxTTL, time.Second, "seconds")
}

func checkRevision(revision uint64) error {
	if revision == 0 {
		return invalidf("revision must be the fence from your last reply, not 0")
	}
	return nil
}

// forwardMillis is the wire's timeout_ms for a forward bounded by timeout.
func forwardMillis(timeout time.Duration) (uint64, error) {
	return millisWithin("timeout_ms", timeout, MinForwardTimeout, MaxForwardTimeout, time.Millisecond, "milliseconds")
}

func checkLimit(limit int) error {
	if limit < 1 || limit > MaxListLimit {
		return invalidf("limit must be a whole number from 1 to %d, got %d", MaxListLimit, limit)
	}
	return nil
}
