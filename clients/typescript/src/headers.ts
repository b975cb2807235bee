/**
 * Header lookups that ignore the case of the name, as HTTP does: an owner
 * or a server may spell the protocol's headers in any case.
 *
 * @module
 */

import { type MsgHdrs } from "@nats-io/nats-core";

/** The first value of header `name`, the exact spelling first, else any case; null when absent. */
export function header(h: MsgHdrs | undefined, name: string): string | null {
  if (h === undefined) {
    return null;
  }
  if (h.has(name)) {
    return h.get(name);
  }
  return h.has(name, "insensitive") ? h.get(name, "insensitive") : null;
}
