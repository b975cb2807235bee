/**
 * The protocol's input bounds (docs/protocol.md, Input bounds), checked
 * before anything is sent: a call out of bounds throws a `LeaseError` of
 * kind `invalid` and never reaches the wire.
 *
 * @module
 */

import { invalid } from "./errors.js";

/** Longest key or holder id, in bytes (each character is one byte). */
export const MAX_NAME_LENGTH = 128;
/** Shortest lease: one second. */
export const MIN_TTL_MS = 1_000;
/** Longest lease: ten minutes. */
export const MAX_TTL_MS = 600_000;
/** Shortest bound of a whole forward call. */
export const MIN_FORWARD_TIMEOUT_MS = 100;
/** Longest bound of a whole forward call. */
export const MAX_FORWARD_TIMEOUT_MS = 30_000;
/** A forward's bound when none is given. */
export const DEFAULT_FORWARD_TIMEOUT_MS = 5_000;
/** The most leases one list reply may be asked for. */
export const MAX_LIST_LIMIT = 5_000;

const NAME = /^[A-Za-z0-9_-]+$/;

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** A key, a holder id or a list's `after`: 1 to 128 of `[A-Za-z0-9_-]`, one subject token. */
export function checkName(field: string, value: unknown): string {
  if (typeof value !== "string" || value.length > MAX_NAME_LENGTH || !NAME.test(value)) {
    throw invalid(
      `${field} must be 1 to ${MAX_NAME_LENGTH} bytes of [A-Za-z0-9_-], got ${describe(value)}`,
    );
  }
  return value;
}

/** A list's key prefix: empty (every key) or under the key rule. */
export function checkPrefix(value: unknown): string {
  return value === "" ? "" : checkName("prefix", value);
}

/** A TTL: a whole number of seconds from 1000 to 600000 ms; anything else is refused, not rounded. */
export function checkTtl(value: unknown): number {
  if (
    typeof value !== "number" ||
    !Number.isInteger(value) ||
    value < MIN_TTL_MS ||
    value > MAX_TTL_MS ||
    value % 1_000 !== 0
  ) {
    throw invalid(
      `ttl_ms must be a whole number of seconds from ${MIN_TTL_MS} to ${MAX_TTL_MS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** A fence from an earlier reply: a safe integer, never 0. */
export function checkRevision(field: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw invalid(`${field} must be the fence from your last reply (a whole number from 1), got ${describe(value)}`);
  }
  return value;
}

/** A forward's bound on the whole call: 100 to 30000 ms. */
export function checkForwardTimeout(value: unknown): number {
  if (
    typeof value !== "number" ||
    !Number.isInteger(value) ||
    value < MIN_FORWARD_TIMEOUT_MS ||
    value > MAX_FORWARD_TIMEOUT_MS
  ) {
    throw invalid(
      `timeout_ms must be a whole number from ${MIN_FORWARD_TIMEOUT_MS} to ${MAX_FORWARD_TIMEOUT_MS}, got ${describe(value)}`,
    );
  }
  return value;
}

/** A list's page size: 1 to 5000. */
export function checkListLimit(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_LIST_LIMIT) {
    throw invalid(`limit must be a whole number from 1 to ${MAX_LIST_LIMIT}, got ${describe(value)}`);
  }
  return value;
}

/** A transfer's new holder: a valid holder id, and not the current one. */
export function checkSuccessor(holder: string, to: unknown): string {
  const successor = checkName("to", to);
  if (successor === holder) {
    throw invalid(`to must name another holder than holder, got ${JSON.stringify(to)} for both`);
  }
  return successor;
}
