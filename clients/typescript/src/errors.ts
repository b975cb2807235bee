/**
 * {@link LeaseError}: every failure of this library, with the kind that
 * says what to do about it (docs/protocol.md, Error kinds).
 *
 * @module
 */

/**
 * The kinds a gateway answers with (docs/protocol.md, Error kinds), and
 * the client-side ones (`timeout` and, when no gateway answered,
 * `invalid`, `unavailable`, `internal`, `payload_too_large`). A newer gateway may send a kind
 * not listed here: `kind` is then that string.
 */
export type LeaseErrorKind =
  | "invalid"
  | "lost"
  | "unsupported"
  | "unavailable"
  | "internal"
  | "timeout"
  | "not_held"
  | "owner_unavailable"
  | "owner_timeout"
  | "owner_rejected"
  | "reply_too_large"
  | "payload_too_large"
  | "forbidden"
  | (string & {});

/** Where a {@link LeaseError} names the owner it concerns. */
export interface LeaseErrorDetails {
  /** Forward: the owner last tried. */
  holder?: string | null;
  /** Forward: the fence of the owner last tried. */
  revision?: number | null;
  /** The underlying failure, if any. */
  cause?: unknown;
}

/**
 * A failed call. `kind` is the machine-readable reason:
 *
 * - a gateway's kind, as it answered (`lost`: stop acting as owner now);
 * - `invalid`: the input is out of the protocol's bounds, nothing was sent;
 * - `unavailable`: no gateway answers the subject, or the NATS connection failed;
 * - `timeout`: no reply in time; the call may or may not have taken effect;
 * - `internal`: a reply this library cannot read (not JSON, a missing
 *   field, a revision that is not a safe integer);
 * - `payload_too_large`: a forward whose request does not fit the
 *   connection's `max_payload`, nothing was sent (the gateway answers the
 *   same kind for a payload that does not fit its hop to the owner).
 *
 * @example
 * ```ts
 * try {
 *   await leases.renew("notify-leader", "notify-7f3a", fence, 15_000);
 * } catch (err) {
 *   if (err instanceof LeaseError && err.kind === "lost") stopLeading();
 *   else throw err;
 * }
 * ```
 */
export class LeaseError extends Error {
  /** Why the call failed: a wire kind or a client-side one. */
  readonly kind: LeaseErrorKind;
  /** Forward errors: the owner last tried; else null. */
  readonly holder: string | null;
  /** Forward errors: the fence of the owner last tried; else null. */
  readonly revision: number | null;

  /** A failure of kind `kind`, described by `message`. */
  constructor(kind: LeaseErrorKind, message: string, details: LeaseErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "LeaseError";
    this.kind = kind;
    this.holder = details.holder ?? null;
    this.revision = details.revision ?? null;
  }
}

/** A `LeaseError` of kind `invalid`: refused before anything was sent. */
export function invalid(message: string): LeaseError {
  return new LeaseError("invalid", message);
}

/** A `LeaseError` of kind `internal`: a reply this library cannot read. */
export function unreadable(message: string, cause?: unknown): LeaseError {
  return new LeaseError("internal", `unreadable reply: ${message}`, { cause });
}
