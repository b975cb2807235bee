/**
 * `dagnats-leases`: the holder side of dagnats-leases for TypeScript and
 * JavaScript, on any `NatsConnection` of `@nats-io/nats-core` (Node with
 * `@nats-io/transport-node`, Deno, browsers and websockets alike). It
 * speaks the wire of docs/protocol.md; nothing here is needed to hold a
 * lease, it only saves writing the holder rules by hand.
 *
 * - {@link LeaseClient}: acquire, renew, release, owner, transfer, list
 *   and forward as typed calls, refusing out-of-bounds input before
 *   sending.
 * - {@link LeaseKeeper}: acquire (optionally waiting), renew every ttl/3,
 *   and "may I act as owner now, at which fence" on the monotonic clock.
 * - {@link serveInbox}: the owner's side of forward, answering only while
 *   entitled to.
 * - {@link FenceGate}: admits a write only if its fence is the highest seen.
 * - {@link LeaseError}: every failure, with its `kind`.
 *
 * Fences are numbers: every fence (a JetStream sequence) is below 2^53, so
 * a JavaScript number holds it exactly, and a reply whose revision is not
 * a safe integer is refused with kind `internal`.
 *
 * @module
 */

export { LeaseClient, type LeaseClientOptions, type ListOptions } from "./client.js";
export { LeaseKeeper, type KeeperOptions, type Ownership } from "./keeper.js";
export { serveInbox, type Inbox, type InboxHandler, type InboxOptions, type InboxRequest, type TenureOf } from "./inbox.js";
export { FenceGate, StaleFence } from "./fence.js";
export { LeaseError, type LeaseErrorDetails, type LeaseErrorKind } from "./errors.js";
export type { FreeKey, Grant, Lease, LeaseList, Owner, Released } from "./replies.js";
