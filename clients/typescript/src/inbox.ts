/**
 * {@link serveInbox}: the owner side of forward (docs/protocol.md,
 * Forwarding to the owner).
 *
 * A holder that accepts forwards subscribes on
 * `dagnats.lease.inbox.<holder>.>` (a plain subscription: the subject
 * names one process) and rejects, with an empty body and
 * `Dagnats-Lease-Reject: stale`, any request when it is not acting as
 * owner of the key, when `Dagnats-Lease-Fence` is missing or not an
 * unsigned integer, or when the fence is lower than its tenure's acquire
 * revision. A rejected request never reaches the handler, and the gateway
 * may retry it elsewhere.
 *
 * @module
 */

import { Empty, headers, type Msg, type NatsConnection, type Subscription } from "@nats-io/nats-core";

import { checkName } from "./bounds.js";
import { header } from "./headers.js";
import { HEADER_FENCE, HEADER_REJECT, INBOX_PREFIX, REJECT_STALE } from "./names.js";

/** A forwarded request this process accepted. */
export interface InboxRequest {
  /** The lease key it was forwarded for. */
  readonly key: string;
  /** The lease revision the gateway read when it forwarded (at least the tenure). */
  readonly fence: number;
  /** The request body. */
  readonly payload: Uint8Array;
}

/**
 * Whether this process acts as owner of `key` now, and since which
 * revision: the tenure's acquire revision, or null (or undefined) when not
 * the owner. A keeper's `tenure()` for its own key is such a function.
 */
export type TenureOf = (key: string) => number | null | undefined;

/** Produces the reply body of an accepted request. */
export type InboxHandler = (request: InboxRequest) => Uint8Array | string | Promise<Uint8Array | string>;

/** Options of {@link serveInbox}. */
export interface InboxOptions {
  /**
   * Called with what a handler threw. Such a request gets no reply (the
   * caller sees `owner_timeout`): it may have been partly processed, so it
   * must not be retried elsewhere.
   */
  onError?: (err: unknown, request: InboxRequest) => void;
}

/** A running owner inbox; stop it with {@link Inbox.stop} or `await using`. */
export interface Inbox extends AsyncDisposable {
  /** The subject it answers: `dagnats.lease.inbox.<holder>.>`. */
  readonly subject: string;
  /** Unsubscribes; requests already received are still answered. Idempotent. */
  stop(): Promise<void>;
}

/** Why a request was rejected; never sent, only decided. */
type Reject = "not owner" | "no fence" | "stale fence";

/** The protocol's three rejection rules, in order. */
function check(msg: Msg, prefix: string, tenureOf: TenureOf): InboxRequest | Reject {
  const key = msg.subject.startsWith(prefix) ? msg.subject.slice(prefix.length) : "";
  const tenure = tenureOf(key);
  if (tenure === null || tenure === undefined) {
    return "not owner";
  }
  const value = header(msg.headers, HEADER_FENCE);
  const fence = value !== null && /^[0-9]+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(fence)) {
    return "no fence";
  }
  if (fence < tenure) {
    return "stale fence";
  }
  return { key, fence, payload: msg.data };
}

/**
 * Answers forwarded requests for `holder` until stopped; subscribed at the
 * server when the returned promise resolves. `tenure(key)` says whether
 * this process acts as owner of `key` now and since which revision;
 * `handler` produces the reply body of each accepted request.
 *
 * @example
 * ```ts
 * const keeper = LeaseKeeper.start(leases, { key: "shard-7", holder: "worker-a1", ttlMs: 15_000 });
 * const inbox = await serveInbox(
 *   nc,
 *   "worker-a1",
 *   (key) => (key === keeper.key ? keeper.tenure() : null),
 *   (req) => `handled ${req.payload.length} bytes at fence ${req.fence}`,
 * );
 * // ...
 * await inbox.stop();
 * ```
 */
export async function serveInbox(
  nc: NatsConnection,
  holder: string,
  tenure: TenureOf,
  handler: InboxHandler,
  options: InboxOptions = {},
): Promise<Inbox> {
  const prefix = `${INBOX_PREFIX}.${checkName("holder", holder)}.`;
  const answer = async (msg: Msg, request: InboxRequest) => {
    let body: Uint8Array | string;
    try {
      body = await handler(request);
    } catch (err) {
      options.onError?.(err, request);
      return;
    }
    msg.respond(typeof body === "string" ? new TextEncoder().encode(body) : body);
  };
  const subscription: Subscription = nc.subscribe(`${prefix}>`, {
    callback: (err, msg) => {
      if (err !== null || msg.reply === undefined || msg.reply === "") {
        return;
      }
      const request = check(msg, prefix, tenure);
      if (typeof request === "string") {
        const h = headers();
        h.set(HEADER_REJECT, REJECT_STALE);
        msg.respond(Empty, { headers: h });
        return;
      }
      void answer(msg, request);
    },
  });
  await nc.flush();
  let stopped: Promise<void> | null = null;
  const stop = () => {
    stopped ??= subscription.drain().catch(() => {
      // The connection closed first: so did the subscription.
    });
    return stopped;
  };
  return { subject: `${prefix}>`, stop, [Symbol.asyncDispose]: stop };
}
