/**
 * {@link LeaseClient}: the lease subjects as typed calls over any
 * `NatsConnection` of `@nats-io/nats-core` (Node, Deno, browsers,
 * websockets).
 *
 * @module
 */

import { headers, type Msg, type NatsConnection, type RequestOptions } from "@nats-io/nats-core";

import {
  checkForwardTimeout,
  checkListLimit,
  checkName,
  checkPrefix,
  checkRevision,
  checkSuccessor,
  checkTtl,
  DEFAULT_FORWARD_TIMEOUT_MS,
} from "./bounds.js";
import { LeaseError } from "./errors.js";
import {
  HEADER_WAIT_MS,
  HEADER_WAITED_MS,
  SUBJECT_ACQUIRE,
  SUBJECT_FORWARD,
  SUBJECT_LIST,
  SUBJECT_OWNER,
  SUBJECT_RELEASE,
  SUBJECT_RENEW,
  SUBJECT_TRANSFER,
} from "./names.js";
import {
  type Grant,
  type LeaseList,
  type Owner,
  type Released,
  readForwardedPayload,
  readGrant,
  readLeaseList,
  readOwner,
  readReleased,
  replyObject,
  toBase64,
} from "./replies.js";
import { copiesAt, waitBounds } from "./resend.js";

/** How long a call waits for the gateway's reply when not told otherwise. */
export const DEFAULT_TIMEOUT_MS = 5_000;

/** Extra time a forward waits beyond its own bound, so the gateway's answer to it arrives. */
const FORWARD_MARGIN_MS = 1_000;

/** Options of a {@link LeaseClient}. */
export interface LeaseClientOptions {
  /** How long each call waits for its reply, in milliseconds (default 5000). */
  timeoutMs?: number;
}

/** Which leases {@link LeaseClient.list} answers. */
export interface ListOptions {
  /** Only keys starting with this (empty or absent: every key). */
  prefix?: string | null;
  /** Only keys after this one: the `next` of the previous page. */
  after?: string | null;
  /** At most this many (1 to 5000; absent: the gateway's 1000). */
  limit?: number | null;
}

/**
 * Typed calls to the lease gateway over NATS. Out-of-bounds input throws a
 * {@link LeaseError} of kind `invalid` before anything is sent; every
 * other failure is a `LeaseError` too, with the gateway's kind or a
 * client-side one (`unavailable`, `timeout`, `internal`).
 *
 * @example
 * ```ts
 * import { connect } from "@nats-io/transport-node";
 * import { LeaseClient } from "dagnats-leases";
 *
 * const nc = await connect({ servers: "nats://127.0.0.1:4222" });
 * const leases = new LeaseClient(nc);
 * const grant = await leases.acquire("notify-leader", "notify-7f3a", 15_000);
 * if (grant.granted) {
 *   const renewed = await leases.renew("notify-leader", "notify-7f3a", grant.revision, 15_000);
 *   await leases.release("notify-leader", "notify-7f3a", renewed.revision);
 * } else {
 *   console.log(`held by ${grant.holder}`);
 * }
 * ```
 */
export class LeaseClient {
  /** The NATS connection underneath. */
  readonly nc: NatsConnection;
  /** How long each call waits for its reply, in milliseconds. */
  readonly timeoutMs: number;

  /** A client on `nc`; `options.timeoutMs` bounds each call (default 5000 ms). */
  constructor(nc: NatsConnection, options: LeaseClientOptions = {}) {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 1) {
      throw new LeaseError("invalid", `timeoutMs must be a positive number, got ${String(timeoutMs)}`);
    }
    this.nc = nc;
    this.timeoutMs = timeoutMs;
  }

  /**
   * Takes `key` for `ttlMs` if nobody holds it; `granted: false` names the
   * holder. Safe to retry: the holder asking again gets its lease back,
   * without its TTL extended. A try of a wait for the key gives `waitedMs`,
   * the milliseconds since its first try, so the gateway counts the wait
   * once it grants the key.
   */
  async acquire(key: string, holder: string, ttlMs: number, waitedMs?: number): Promise<Grant> {
    const request = { key: checkName("key", key), holder: checkName("holder", holder), ttl_ms: checkTtl(ttlMs) };
    const extra = waitedMs === undefined ? undefined : { [HEADER_WAITED_MS]: String(Math.max(0, Math.floor(waitedMs))) };
    return readGrant(await this.#call(SUBJECT_ACQUIRE, request, this.timeoutMs, extra));
  }

  /**
   * Extends the lease held at `revision` to `ttlMs` from now; the reply
   * carries the new fence. Kind `lost` means stop acting as owner.
   */
  async renew(key: string, holder: string, revision: number, ttlMs: number): Promise<Grant> {
    const request = {
      key: checkName("key", key),
      holder: checkName("holder", holder),
      revision: checkRevision("revision", revision),
      ttl_ms: checkTtl(ttlMs),
    };
    return readGrant(await this.#call(SUBJECT_RENEW, request, this.timeoutMs));
  }

  /** Frees the lease held at `revision`; `lost` if it is not held at that fence. */
  async release(key: string, holder: string, revision: number): Promise<Released> {
    const request = {
      key: checkName("key", key),
      holder: checkName("holder", holder),
      revision: checkRevision("revision", revision),
    };
    return readReleased(await this.#call(SUBJECT_RELEASE, request, this.timeoutMs));
  }

  /** Who holds `key`, read through the stream leader, with no side effects. */
  async owner(key: string): Promise<Owner> {
    const request = { key: checkName("key", key) };
    return readOwner(await this.#call(SUBJECT_OWNER, request, this.timeoutMs));
  }

  /**
   * Hands the lease `holder` holds at `revision` to `to` for `ttlMs` from
   * now, in one write: the reply is `to`'s lease, a new tenure at a higher
   * fence. Stop acting as owner before calling it. `lost` means `holder`
   * did not hold the key at `revision`.
   */
  async transfer(key: string, holder: string, revision: number, to: string, ttlMs: number): Promise<Grant> {
    const from = checkName("holder", holder);
    const request = {
      key: checkName("key", key),
      holder: from,
      revision: checkRevision("revision", revision),
      to: checkSuccessor(from, to),
      ttl_ms: checkTtl(ttlMs),
    };
    return readGrant(await this.#call(SUBJECT_TRANSFER, request, this.timeoutMs));
  }

  /**
   * One page of the held leases, ordered by key: those starting with
   * `prefix`, after `after` (a previous page's `next`), at most `limit`.
   * `next` is null on the last page.
   *
   * @example
   * ```ts
   * let after: string | null = null;
   * do {
   *   const page = await leases.list({ prefix: "shard-", after });
   *   for (const lease of page.leases) console.log(lease.key, lease.holder);
   *   after = page.next;
   * } while (after !== null);
   * ```
   */
  async list(options: ListOptions = {}): Promise<LeaseList> {
    const request: Record<string, unknown> = { prefix: checkPrefix(options.prefix ?? "") };
    if (options.after !== undefined && options.after !== null) {
      request["after"] = checkName("after", options.after);
    }
    if (options.limit !== undefined && options.limit !== null) {
      request["limit"] = checkListLimit(options.limit);
    }
    return readLeaseList(await this.#call(SUBJECT_LIST, request, this.timeoutMs));
  }

  /**
   * Sends `payload` to whichever process holds `key` and answers with the
   * owner's reply bytes; `timeoutMs` (100 to 30000) bounds the whole call.
   * Never sent twice: on `timeout` or `owner_timeout` the owner may have
   * processed it.
   */
  async forward(
    key: string,
    payload: Uint8Array | string,
    timeoutMs: number = DEFAULT_FORWARD_TIMEOUT_MS,
  ): Promise<Uint8Array> {
    const bytes = typeof payload === "string" ? new TextEncoder().encode(payload) : payload;
    if (!(bytes instanceof Uint8Array)) {
      throw new LeaseError("invalid", "payload must be a Uint8Array or a string");
    }
    const request = {
      key: checkName("key", key),
      payload: toBase64(bytes),
      timeout_ms: checkForwardTimeout(timeoutMs),
    };
    const reply = await this.#call(SUBJECT_FORWARD, request, timeoutMs + FORWARD_MARGIN_MS);
    return readForwardedPayload(reply);
  }

  async #call(
    subject: string,
    request: object,
    timeoutMs: number,
    extra?: Record<string, string>,
  ): Promise<Record<string, unknown>> {
    const msg = await this.#send(subject, new TextEncoder().encode(JSON.stringify(request)), timeoutMs, extra);
    return replyObject(msg.data);
  }

  /**
   * Sends `body`, and again at each time {@link copiesAt} names that
   * passes with no reply; the first reply wins. A failure is the answer
   * only when no other copy is still in flight.
   */
  #send(subject: string, body: Uint8Array, timeoutMs: number, extra?: Record<string, string>): Promise<Msg> {
    const deadline = performance.now() + timeoutMs;
    return new Promise<Msg>((resolve, reject) => {
      let inFlight = 0;
      let settled = false;
      const timers: ReturnType<typeof setTimeout>[] = [];
      const settle = () => {
        settled = true;
        timers.forEach(clearTimeout);
      };
      const send = () => {
        const left = Math.max(1, Math.floor(deadline - performance.now()));
        const options: RequestOptions = { timeout: left };
        const sent: Record<string, string> = { ...extra };
        if (waitBounds(subject, left)) {
          sent[HEADER_WAIT_MS] = String(left);
        }
        if (Object.keys(sent).length > 0) {
          const h = headers();
          for (const [name, value] of Object.entries(sent)) {
            h.set(name, value);
          }
          options.headers = h;
        }
        inFlight += 1;
        let reply: Promise<Msg>;
        try {
          reply = this.nc.request(subject, body, options);
        } catch (err) {
          reply = Promise.reject(err);
        }
        reply.then(
          (msg) => {
            if (!settled) {
              settle();
              resolve(msg);
            }
          },
          (err: unknown) => {
            inFlight -= 1;
            if (!settled && inFlight === 0) {
              settle();
              reject(requestFailure(err, timeoutMs));
            }
          },
        );
      };
      send();
      for (const at of copiesAt(subject, timeoutMs)) {
        timers.push(setTimeout(() => settled || send(), at));
      }
    });
  }
}

/**
 * The kind of a failed NATS request. Errors are told apart by name, not
 * class: a second copy of `@nats-io/nats-core` in an application would
 * make `instanceof` fail.
 */
function requestFailure(err: unknown, timeoutMs: number): LeaseError {
  const name = err instanceof Error ? err.name : "";
  const cause = err instanceof Error ? err.cause : undefined;
  if (name === "TimeoutError") {
    return new LeaseError("timeout", `no reply from the gateway within ${timeoutMs} ms`, { cause: err });
  }
  if (name === "NoResponders" || (cause instanceof Error && cause.name === "NoResponders")) {
    return new LeaseError("unavailable", "no dagnats-leases gateway is listening", { cause: err });
  }
  const message = err instanceof Error ? err.message : String(err);
  if (name === "InvalidArgumentError" && message.includes("max_payload")) {
    const why = "the request does not fit the NATS server's max_payload; nothing was sent";
    return new LeaseError("payload_too_large", why, { cause: err });
  }
  return new LeaseError("unavailable", `NATS request failed: ${message}`, { cause: err });
}
