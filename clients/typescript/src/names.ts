/**
 * The names on the wire, in one place: subjects and headers, as
 * docs/protocol.md ("Operations", "Forwarding to the owner", "Change
 * events") spells them.
 *
 * @module
 */

/** Request/reply subjects of the lease API (docs/protocol.md, Operations). */
export const SUBJECT_ACQUIRE = "api.leases.acquire";
/** See {@link SUBJECT_ACQUIRE}. */
export const SUBJECT_RENEW = "api.leases.renew";
/** See {@link SUBJECT_ACQUIRE}. */
export const SUBJECT_RELEASE = "api.leases.release";
/** See {@link SUBJECT_ACQUIRE}. */
export const SUBJECT_OWNER = "api.leases.owner";
/** See {@link SUBJECT_ACQUIRE}. */
export const SUBJECT_TRANSFER = "api.leases.transfer";
/** See {@link SUBJECT_ACQUIRE}. */
export const SUBJECT_LIST = "api.leases.list";
/** Sends a request to whichever process holds a key. */
export const SUBJECT_FORWARD = "api.leases.forward";

/** The calls on one key: safe to send again, and bounded by the gateway's own budget. */
export const KEY_CALL_SUBJECTS: readonly string[] = [
  SUBJECT_ACQUIRE,
  SUBJECT_RENEW,
  SUBJECT_RELEASE,
  SUBJECT_TRANSFER,
  SUBJECT_OWNER,
];

/** The owner inbox: `dagnats.lease.inbox.<holder>.<key>`. */
export const INBOX_PREFIX = "dagnats.lease.inbox";

/** Change events: `dagnats.lease.changed.<key>`. */
export const CHANGED_PREFIX = "dagnats.lease.changed";

/** The lease revision a forwarded request carries. */
export const HEADER_FENCE = "Dagnats-Lease-Fence";

/** An owner's refusal of a forwarded request; its only value is {@link REJECT_STALE}. */
export const HEADER_REJECT = "Dagnats-Lease-Reject";

/** The value of {@link HEADER_REJECT}. */
export const REJECT_STALE = "stale";

/** How many milliseconds the caller still waits for this reply. */
export const HEADER_WAIT_MS = "Dagnats-Lease-Wait-Ms";

/** On each try of a wait for a key: milliseconds since the first try. */
export const HEADER_WAITED_MS = "Dagnats-Lease-Waited-Ms";

/** Added by the server to a republished write: its revision. */
export const HEADER_SEQUENCE = "Nats-Sequence";

/** Why a record was written: `acquired`, `renewed` or `released`. */
export const HEADER_EVENT = "Dagnats-Lease-Event";

/** Set by the server on the marker it writes when a key's TTL runs out. */
export const HEADER_MARKER_REASON = "Nats-Marker-Reason";

/** The KV operation of a write; a release is a `PURGE`. */
export const HEADER_KV_OPERATION = "KV-Operation";
