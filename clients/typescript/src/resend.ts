/**
 * When a call is sent again because its reply is late, and when a copy
 * says how long it is still waited for (`Dagnats-Lease-Wait-Ms`).
 *
 * The queue group hands each request to one gateway of the cluster; one
 * whose node froze still gets requests until its routes close, and they
 * are lost there. Copies at half and three quarters of the timeout let
 * another gateway answer. Every call the protocol makes safe to repeat is
 * copied: acquire (idempotent for its holder), renew, release and
 * transfer (fenced: a copy gets the first one's outcome, or `lost`), owner
 * and list (reads). Forward never is: the owner could process it twice.
 *
 * @module
 */

import { KEY_CALL_SUBJECTS, SUBJECT_FORWARD, SUBJECT_LIST } from "./names.js";

/** How long a gateway lets a key call take in all before it answers `unavailable`. */
export const CALL_BUDGET_MS = 4_500;

/** Room left for the reply's way back, a tenth of the wait when that is less. */
const REPLY_MARGIN_MS = 200;

/** When copies of a call on `subject` that waits `timeoutMs` in all leave, from its first send. */
export function copiesAt(subject: string, timeoutMs: number): number[] {
  if (KEY_CALL_SUBJECTS.includes(subject) || subject === SUBJECT_LIST) {
    return [timeoutMs / 2, (timeoutMs * 3) / 4];
  }
  return [];
}

/**
 * Whether a caller still waiting `waitMs` bounds a call on `subject` by
 * saying so: never a forward (its `timeout_ms` bounds it); a key call
 * only when the wait, less the reply's margin, cuts the gateway's budget
 * short; a list always.
 */
export function waitBounds(subject: string, waitMs: number): boolean {
  if (subject === SUBJECT_FORWARD) {
    return false;
  }
  if (KEY_CALL_SUBJECTS.includes(subject)) {
    return waitMs - Math.min(REPLY_MARGIN_MS, waitMs / 10) < CALL_BUDGET_MS;
  }
  return true;
}
