/**
 * The gateway's replies (docs/protocol.md, Replies), typed with the wire's
 * own field names, and read strictly: a reply that is not JSON, lacks a
 * field, or carries a revision that is not a safe integer is a
 * `LeaseError` of kind `internal`, never a guess.
 *
 * Fences are JavaScript numbers. Every fence a gateway hands out is a
 * JetStream sequence below 2^53 (`Number.MAX_SAFE_INTEGER`), so it is
 * exact; a reply whose revision is not a safe integer is refused rather
 * than rounded, since a rounded fence could compare equal to another.
 *
 * @module
 */

import { LeaseError, unreadable } from "./errors.js";

/** A held lease, as acquire, renew, transfer, owner and list report it. */
export interface Lease {
  /** Always true: this key has a holder. */
  readonly held: true;
  /** The lease key. */
  readonly key: string;
  /** Who holds it. */
  readonly holder: string;
  /** The fencing token: the key's revision, below 2^53. */
  readonly revision: number;
  /** Start of the tenure (RFC 3339, UTC); renew keeps it. */
  readonly acquired_at: string;
  /** Advisory end (RFC 3339, UTC): the server's TTL frees the key, never earlier than this. */
  readonly expires_at: string;
  /** The TTL of the last grant, in milliseconds. */
  readonly ttl_ms: number;
}

/**
 * The reply to acquire, renew and transfer. `granted: false` is a normal
 * answer (acquire only): the lease fields then describe the current holder's lease.
 */
export interface Grant extends Lease {
  /** Whether the caller holds the key now. */
  readonly granted: boolean;
}

/** The owner reply for a key nobody holds. */
export interface FreeKey {
  /** Always false. */
  readonly held: false;
  /** The key asked about. */
  readonly key: string;
}

/** The reply to owner: the lease, or a free key; `held` tells which. */
export type Owner = Lease | FreeKey;

/** The reply to release. */
export interface Released {
  /** Always true. */
  readonly released: true;
  /** Always false. */
  readonly held: false;
  /** The key released. */
  readonly key: string;
  /** Who released it. */
  readonly holder: string;
  /** The fence of the release write. */
  readonly revision: number;
}

/** The reply to list: one page of held leases, ordered by key. */
export interface LeaseList {
  /** The leases of this page. */
  readonly leases: readonly Lease[];
  /** The last key of this page when more follow (pass it back as `after`); null at the end. */
  readonly next: string | null;
}

type Fields = Record<string, unknown>;

function field(object: Fields, name: string): unknown {
  if (!(name in object)) {
    throw unreadable(`field ${name} is missing`);
  }
  return object[name];
}

function text(object: Fields, name: string): string {
  const value = field(object, name);
  if (typeof value !== "string") {
    throw unreadable(`${name} is not a string`);
  }
  return value;
}

function flag(object: Fields, name: string): boolean {
  const value = field(object, name);
  if (typeof value !== "boolean") {
    throw unreadable(`${name} is not a boolean`);
  }
  return value;
}

/** A whole number the reply carries; a revision beyond 2^53 would lose digits. */
function whole(object: Fields, name: string): number {
  const value = field(object, name);
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw unreadable(`${name} is not a whole number below 2^53: ${String(value)}`);
  }
  return value;
}

function time(object: Fields, name: string): string {
  const value = text(object, name);
  if (Number.isNaN(Date.parse(value))) {
    throw unreadable(`${name} is not a time: ${value}`);
  }
  return value;
}

function optional<T>(object: Fields, name: string, read: (o: Fields, n: string) => T): T | null {
  return object[name] === undefined || object[name] === null ? null : read(object, name);
}

/**
 * The JSON object of a reply, or the `LeaseError` it carries: a reply with
 * both `error` and `kind` is a failure, with `holder` and `revision` where
 * it names them.
 */
export function replyObject(body: Uint8Array): Fields {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(body));
  } catch (cause) {
    throw unreadable("not JSON", cause);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw unreadable("not a JSON object");
  }
  const object = value as Fields;
  if ("error" in object && "kind" in object) {
    throw new LeaseError(text(object, "kind"), text(object, "error"), {
      holder: optional(object, "holder", text),
      revision: optional(object, "revision", whole),
    });
  }
  return object;
}

/** A held lease's fields; `held` must be true. */
export function readLease(object: Fields): Lease {
  if (flag(object, "held") !== true) {
    throw unreadable("a lease with held: false");
  }
  return {
    held: true,
    key: text(object, "key"),
    holder: text(object, "holder"),
    revision: whole(object, "revision"),
    acquired_at: time(object, "acquired_at"),
    expires_at: time(object, "expires_at"),
    ttl_ms: whole(object, "ttl_ms"),
  };
}

/** An acquire, renew or transfer reply. */
export function readGrant(object: Fields): Grant {
  return { granted: flag(object, "granted"), ...readLease(object) };
}

/** A release reply. */
export function readReleased(object: Fields): Released {
  if (flag(object, "released") !== true || flag(object, "held") !== false) {
    throw unreadable("a release reply that is not released: true, held: false");
  }
  return {
    released: true,
    held: false,
    key: text(object, "key"),
    holder: text(object, "holder"),
    revision: whole(object, "revision"),
  };
}

/** An owner reply. */
export function readOwner(object: Fields): Owner {
  return flag(object, "held") ? readLease(object) : { held: false, key: text(object, "key") };
}

/** A list reply. */
export function readLeaseList(object: Fields): LeaseList {
  const leases = field(object, "leases");
  if (!Array.isArray(leases)) {
    throw unreadable("leases is not an array");
  }
  return {
    leases: leases.map((lease: unknown) => {
      if (typeof lease !== "object" || lease === null) {
        throw unreadable("a listed lease is not an object");
      }
      return readLease(lease as Fields);
    }),
    next: optional(object, "next", text),
  };
}

/** The owner's reply bytes a forward reply carries (base64 on the wire), once the reply is whole. */
export function readForwardedPayload(object: Fields): Uint8Array {
  text(object, "key");
  text(object, "holder");
  whole(object, "revision");
  return fromBase64(text(object, "payload"));
}

/** Standard base64 of `bytes`, without Node's Buffer (browsers too). */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

function fromBase64(encoded: string): Uint8Array {
  let binary: string;
  try {
    binary = atob(encoded);
  } catch (cause) {
    throw unreadable("payload is not base64", cause);
  }
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) {
    bytes[i] = binary.charCodeAt(i);
  }
  return bytes;
}
