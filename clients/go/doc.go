// Package leases is the holder side of dagnats-leases for Go services, on
// nats.go. It speaks the protocol of docs/protocol.md and nothing else: the
// gateway decides, this package only saves writing the calls and the holder
// rules by hand.
//
//   - [Client] makes the calls (Acquire, Renew, Release, Owner, Transfer,
//     List, Forward) as typed replies, refusing out-of-bounds input with
//     kind invalid before anything is sent.
//   - [Keeper] holds one lease: acquires it (optionally waiting, woken by
//     the key's change events), renews it every ttl/3, and answers
//     [Keeper.Fence] with false the moment this process may no longer act
//     as owner, measured on the monotonic clock from the start of the
//     request that granted the lease.
//   - [ServeInbox] is the owner's side of forward, with the protocol's
//     three rejection rules.
//   - [FenceGate] admits a write only at the highest fence seen; a durable
//     store keeps that fence beside the data instead (the README's
//     PostgreSQL recipe).
//
// Every failure is a [*LeaseError] whose Kind is the wire's error kind, or
// one of the client-side kinds invalid, unavailable, timeout and internal.
//
// The shape follows what Go users know from etcd's client/v3/concurrency
// (Election, Session) and Consul's api.Lock: a context first on every call
// that waits, a background keeper with a channel of changes, and Stop to
// release.
package leases

// Version is this library's version.
const Version = "0.1.0"
