/**
 * The change events of one key (`dagnats.lease.changed.<key>`, see
 * docs/protocol.md, Change events), read as far as a waiting keeper needs:
 * whether the key was freed, or acquired by whom, at which revision.
 *
 * @module
 */

import { type Msg } from "@nats-io/nats-core";

import { header } from "./headers.js";
import { CHANGED_PREFIX, HEADER_EVENT, HEADER_KV_OPERATION, HEADER_MARKER_REASON, HEADER_SEQUENCE } from "./names.js";

/** What one write did to a key. */
export interface KeyChange {
  /** `acquired` (by acquire or transfer), `renewed`, `released` or `expired`. */
  readonly event: "acquired" | "renewed" | "released" | "expired";
  /** The revision of the write (or of the server's expiry marker). */
  readonly revision: number;
  /** The holder of an acquired or renewed lease; null for a freed key. */
  readonly holder: string | null;
}

/** The subject carrying the changes of `key`. */
export function changeSubject(key: string): string {
  return `${CHANGED_PREFIX}.${key}`;
}

/**
 * The change `msg` carries; null for a message that is not one (no
 * revision, no event, a record that does not parse): a keeper ignores it
 * and still wakes at the lease's expiry.
 */
export function readChange(msg: Msg): KeyChange | null {
  const sequence = header(msg.headers, HEADER_SEQUENCE);
  const revision = sequence !== null && /^[0-9]+$/.test(sequence) ? Number(sequence) : NaN;
  if (!Number.isSafeInteger(revision)) {
    return null;
  }
  if (header(msg.headers, HEADER_MARKER_REASON) !== null) {
    return { event: "expired", revision, holder: null };
  }
  const event = header(msg.headers, HEADER_EVENT);
  const operation = header(msg.headers, HEADER_KV_OPERATION);
  // A release, a revoke, or a delete by a KV tool: the key is free.
  if (event === "released" || operation === "DEL" || operation === "PURGE") {
    return { event: "released", revision, holder: null };
  }
  if (event !== "acquired" && event !== "renewed") {
    return null;
  }
  try {
    const record: unknown = msg.json();
    const holder = typeof record === "object" && record !== null ? (record as { holder?: unknown }).holder : undefined;
    return typeof holder === "string" ? { event, revision, holder } : null;
  } catch {
    return null;
  }
}
