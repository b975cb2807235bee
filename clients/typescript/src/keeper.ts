/**
 * {@link LeaseKeeper}: holds one lease for as long as the process is
 * healthy (docs/protocol.md, Holder rules and client libraries).
 *
 * It acquires (optionally waiting, woken by the key's change events rather
 * than polling), renews about every ttl/3, and says at any moment whether
 * this process may act as owner. Ownership ends the moment renew answers
 * `lost`, or the moment the lease may have run out without a renewal
 * landing: measured on the monotonic clock (`performance.now()`) from the
 * *start* of the request that granted or renewed the lease, and never past
 * the reply's `expires_at`, so no reply delay, paused process or clock
 * skew can stretch it.
 *
 * A hand-off is one transfer: the keeper stops acting as owner, then
 * transfers; a keeper waiting for the key that the transfer names takes it
 * over at the transferred fence, with no moment in which the key is free.
 * Its entitlement starts, like any other, from a request of its own: the
 * renew at that fence it sends the moment it sees the transfer.
 *
 * @module
 */

import { type Subscription } from "@nats-io/nats-core";

import { checkName, checkSuccessor, checkTtl } from "./bounds.js";
import { changeSubject, readChange } from "./changes.js";
import { type LeaseClient } from "./client.js";
import { LeaseError } from "./errors.js";
import { type Grant, type Lease } from "./replies.js";
import { Alarm, Pulse, type Settled, settle } from "./wake.js";

/** Retry delays after a failed call that was not `lost`. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2_000;

/** What a {@link LeaseKeeper} keeps. */
export interface KeeperOptions {
  /** The lease key. */
  key: string;
  /** This process's holder id: unique per process. */
  holder: string;
  /** The lease's TTL in milliseconds: whole seconds from 1000 to 600000. */
  ttlMs: number;
  /**
   * Keep trying until granted, and again after a loss (default true).
   * False: give up, and end the keeper, when someone else holds the key.
   */
  wait?: boolean;
}

/** Whether this process may act as owner, as {@link LeaseKeeper.changes} reports it. */
export type Ownership =
  | {
      /** This process may act as owner. */
      readonly owner: true;
      /** The fence to send with every write: the lease's current revision. */
      readonly fence: number;
      /** The revision that started this tenure (renew raises the fence, not the tenure). */
      readonly tenure: number;
    }
  | {
      /** Not the owner: never acquired, lost, released, handed off or run out. */
      readonly owner: false;
      /** No fence to write with. */
      readonly fence: null;
      /** No tenure. */
      readonly tenure: null;
    };

const NOT_OWNER: Ownership = { owner: false, fence: null, tenure: null };

/** Ownership with the moment (on the monotonic clock) it runs out. */
interface Held {
  readonly tenure: number;
  readonly fence: number;
  readonly until: number;
}

/** A hand-off asked for, and where its answer goes. */
interface HandOffRequest {
  readonly to: string;
  readonly resolve: (grant: Grant) => void;
  readonly reject: (err: unknown) => void;
}

/** One reader of {@link LeaseKeeper.changes}. */
interface ChangeQueue {
  readonly items: Ownership[];
  readonly pulse: Pulse;
}

/** A reader that falls this far behind loses the oldest states; the latest is always kept. */
const CHANGE_QUEUE_LIMIT = 64;

/** The monotonic clock, in milliseconds. */
const now = (): number => performance.now();

/** The instant until which a grant entitles us to act: at most `ttl_ms` after the request started, never past `expires_at`. */
function entitledUntil(started: number, lease: Lease): number {
  const byTtl = started + lease.ttl_ms;
  const byExpiry = now() + Math.max(0, Date.parse(lease.expires_at) - Date.now());
  return Math.min(byTtl, byExpiry);
}

function notTheOwner(): LeaseError {
  return new LeaseError("lost", "this keeper does not hold the lease");
}

/** How holding ended. */
type Ended = "stopped" | "lost";

/** What ended a wait for the key: a transfer to us at this fence, or anything else (try again). */
type Woken = { readonly transferredAt: number } | "retry" | "stopped";

/**
 * A lease kept alive in the background: acquired, renewed every ttl/3,
 * released by {@link LeaseKeeper.stop} (or `await using`).
 *
 * @example
 * ```ts
 * const keeper = LeaseKeeper.start(new LeaseClient(nc), {
 *   key: "notify-leader",
 *   holder: "notify-7f3a",
 *   ttlMs: 15_000,
 *   wait: true,
 * });
 * const fence = await keeper.waitOwner();
 * // ... write downstream with the fence, and check keeper.fence() before each write
 * await keeper.stop(); // releases
 * ```
 */
export class LeaseKeeper implements AsyncDisposable {
  /** The lease key. */
  readonly key: string;
  /** This process's holder id. */
  readonly holder: string;
  /** The lease's TTL in milliseconds. */
  readonly ttlMs: number;
  /** Whether the keeper waits for a held key rather than giving up. */
  readonly wait: boolean;

  readonly #client: LeaseClient;
  #held: Held | null = null;
  #reported: Ownership = NOT_OWNER;
  #stopping = false;
  #ended = false;
  #endReason: LeaseError = new LeaseError("lost", "the keeper stopped");
  readonly #attention = new Pulse();
  readonly #handOffs: HandOffRequest[] = [];
  readonly #readers = new Set<ChangeQueue>();
  readonly #done: Promise<void>;

  private constructor(client: LeaseClient, options: KeeperOptions) {
    this.key = checkName("key", options.key);
    this.holder = checkName("holder", options.holder);
    this.ttlMs = checkTtl(options.ttlMs);
    this.wait = options.wait ?? true;
    this.#client = client;
    // A connection closed for good wakes the loop, which then ends.
    void client.nc.closed().then(() => this.#attention.notify());
    this.#done = this.#run();
  }

  /**
   * Starts keeping `options.key` in the background. Out-of-bounds options
   * throw a `LeaseError` of kind `invalid` at once.
   */
  static start(client: LeaseClient, options: KeeperOptions): LeaseKeeper {
    return new LeaseKeeper(client, options);
  }

  /** The fence to send downstream, or null when this process may not act as owner now. */
  fence(): number | null {
    const held = this.#heldNow();
    return held === null ? null : held.fence;
  }

  /** The revision that started this tenure, or null when this process may not act as owner now. */
  tenure(): number | null {
    const held = this.#heldNow();
    return held === null ? null : held.tenure;
  }

  /**
   * The fence, once this process may act as owner. Rejects with kind
   * `timeout` after `timeoutMs` (null or absent: no limit), with kind
   * `lost` when the keeper ends first (stopped, handed off, or, without
   * `wait`, the key held by another, whom the error names), with kind
   * `unavailable` when it ended because the NATS connection closed for
   * good, and with the signal's reason when `options.signal` aborts.
   */
  waitOwner(timeoutMs?: number | null, options: { signal?: AbortSignal } = {}): Promise<number> {
    const fence = this.fence();
    if (fence !== null) {
      return Promise.resolve(fence);
    }
    if (timeoutMs !== undefined && timeoutMs !== null && !(timeoutMs >= 0)) {
      return Promise.reject(new LeaseError("invalid", `timeoutMs must be at least 0, got ${String(timeoutMs)}`));
    }
    const { signal } = options;
    if (signal?.aborted) {
      return Promise.reject(signal.reason);
    }
    return new Promise<number>((resolve, reject) => {
      const changes = this.changes();
      const timer =
        timeoutMs === undefined || timeoutMs === null
          ? undefined
          : setTimeout(() => {
              finish();
              reject(new LeaseError("timeout", `not the owner of ${this.key} within ${timeoutMs} ms`));
            }, timeoutMs);
      const onAbort = () => {
        finish();
        reject(signal?.reason);
      };
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        void changes.return?.();
      };
      signal?.addEventListener("abort", onAbort);
      void (async () => {
        for await (const ownership of changes) {
          const current = this.fence();
          if (ownership.owner && current !== null) {
            finish();
            resolve(current);
            return;
          }
        }
        if (this.#ended) {
          finish();
          reject(this.#endReason);
        }
      })();
    });
  }

  /**
   * Ownership as it changes, from now until the keeper ends: one state per
   * change (acquired, renewed at a new fence, lost, released). It turns
   * to not-owner the moment ownership ends; {@link LeaseKeeper.fence}
   * also checks the clock, for readers that look between changes.
   *
   * @example
   * ```ts
   * for await (const ownership of keeper.changes()) {
   *   if (ownership.owner) startLeading(ownership.fence);
   *   else stopLeading();
   * }
   * ```
   */
  changes(): AsyncIterableIterator<Ownership> {
    const queue: ChangeQueue = { items: [], pulse: new Pulse() };
    if (!this.#ended) {
      this.#readers.add(queue);
    }
    const next = async (): Promise<IteratorResult<Ownership>> => {
      for (;;) {
        const item = queue.items.shift();
        if (item !== undefined) {
          return { value: item, done: false };
        }
        if (!this.#readers.has(queue)) {
          return { value: undefined, done: true };
        }
        await queue.pulse.next();
      }
    };
    const iterator: AsyncIterableIterator<Ownership> = {
      next,
      return: async () => {
        this.#readers.delete(queue);
        queue.items.length = 0;
        queue.pulse.notify();
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /**
   * Hands the lease over to `to` and ends the keeper: it stops acting as
   * owner first, then one transfer at the current fence makes `to` the
   * holder (a keeper of `to` waiting for the key takes it over). Resolves
   * to `to`'s new lease, whose `revision` is the successor's tenure.
   * Rejects with `lost` if this keeper does not hold the lease; on any
   * other failure the lease is released, so `to` can acquire it.
   */
  async handOff(to: string): Promise<Grant> {
    const successor = checkSuccessor(this.holder, to);
    try {
      if (this.#ended || this.#stopping) {
        throw notTheOwner();
      }
      return await new Promise<Grant>((resolve, reject) => {
        this.#handOffs.push({ to: successor, resolve, reject });
        this.#attention.notify();
      });
    } finally {
      await this.stop();
    }
  }

  /**
   * Stops renewing and releases the lease if held; resolves once released
   * (or once the release failed, leaving the key to its TTL). A stop while
   * an acquire is in flight waits for its answer and releases what it
   * granted. Idempotent.
   */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#attention.notify();
    await this.#done;
  }

  /** `await using keeper = LeaseKeeper.start(...)` stops it at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  #heldNow(): Held | null {
    const held = this.#held;
    return held !== null && now() < held.until ? held : null;
  }

  /** Records ownership and tells every reader of `changes()` when it changed. */
  #publish(held: Held | null): void {
    this.#held = held;
    const ownership: Ownership =
      held === null ? NOT_OWNER : { owner: true, fence: held.fence, tenure: held.tenure };
    const last = this.#reported;
    if (ownership.owner === last.owner && ownership.fence === last.fence && ownership.tenure === last.tenure) {
      return;
    }
    this.#reported = ownership;
    for (const queue of this.#readers) {
      if (queue.items.length >= CHANGE_QUEUE_LIMIT) {
        queue.items.shift();
      }
      queue.items.push(ownership);
      queue.pulse.notify();
    }
  }

  async #run(): Promise<void> {
    try {
      await this.#keep();
    } finally {
      this.#publish(null);
      this.#ended = true;
      for (const request of this.#handOffs.splice(0)) {
        request.reject(notTheOwner());
      }
      for (const queue of this.#readers) {
        queue.pulse.notify();
      }
      this.#readers.clear();
    }
  }

  /** Acquires (or takes over a transfer), holds, and after a loss starts again if waiting. */
  async #keep(): Promise<void> {
    let retry = RETRY_MIN_MS;
    let transferredAt: number | null = null;
    // When this wait for the key began: each try says how long ago.
    let waitingSince: number | null = null;
    while (!this.#stopping) {
      if (this.#client.nc.isClosed()) {
        this.#endReason = new LeaseError("unavailable", "the NATS connection is closed");
        return;
      }
      // Subscribed before the acquire, so a release that lands while the
      // acquire is in flight still wakes us.
      const watch = this.#watchKey();
      try {
        const started = now();
        const takingOver: number | null = transferredAt;
        transferredAt = null;
        let waitedMs: number | undefined;
        if (this.wait) {
          waitingSince ??= started;
          waitedMs = started - waitingSince;
        }
        const call = settle(
          takingOver === null
            ? this.#client.acquire(this.key, this.holder, this.ttlMs, waitedMs)
            : this.#client.renew(this.key, this.holder, takingOver, this.ttlMs),
        );
        const outcome = await this.#whileRunning(call);
        if (outcome === "stopped") {
          await this.#releaseLate(call);
          return;
        }
        let waitFor: number;
        if (outcome.ok && outcome.value.granted && entitledUntil(started, outcome.value) > now()) {
          watch.close();
          retry = RETRY_MIN_MS;
          waitingSince = null;
          const ended = await this.#hold(started, takingOver ?? outcome.value.revision, outcome.value);
          if (ended === "stopped") {
            return;
          }
          if (!this.wait) {
            this.#endReason = new LeaseError("lost", `the lease on ${this.key} was lost, and the keeper does not wait`);
            return;
          }
          continue;
        } else if (outcome.ok && outcome.value.granted) {
          // Granted, but by the conservative clock already run out.
          waitFor = RETRY_MIN_MS;
        } else if (outcome.ok) {
          if (!this.wait) {
            this.#endReason = new LeaseError("lost", `${this.key} is held by ${outcome.value.holder}`, {
              holder: outcome.value.holder,
              revision: outcome.value.revision,
            });
            return;
          }
          const left = Date.parse(outcome.value.expires_at) - Date.now();
          waitFor = Math.min(Math.max(left, RETRY_MIN_MS), this.ttlMs) + RETRY_MIN_MS;
        } else if (outcome.error instanceof LeaseError && outcome.error.kind === "lost") {
          // The transfer was overtaken (released, revoked, moved on).
          waitFor = RETRY_MIN_MS;
        } else {
          // A takeover's renew is retried as it was sent: the same renew
          // answers the same, whether or not it landed.
          transferredAt = takingOver;
          retry = Math.min(retry * 2, RETRY_MAX_MS);
          waitFor = retry;
        }
        const woken = await this.#waitForKey(watch, waitFor);
        if (woken === "stopped") {
          return;
        }
        if (woken !== "retry") {
          transferredAt = woken.transferredAt;
        }
      } finally {
        watch.close();
      }
    }
  }

  /** Renews until stopped, lost or handed off; publishes ownership as it goes. */
  async #hold(started: number, tenure: number, lease: Lease): Promise<Ended> {
    let fence = lease.revision;
    let until = entitledUntil(started, lease);
    let nextRenew = started + this.ttlMs / 3;
    let retry = RETRY_MIN_MS;
    this.#publish({ tenure, fence, until });
    for (;;) {
      // Stop and hand-off come first; then the deadline, before any renew:
      // a process resumed after a pause past its deadline never renews first.
      if (this.#stopping) {
        return this.#release(fence);
      }
      const handOff = this.#handOffs.shift();
      if (handOff !== undefined) {
        return this.#transfer(fence, handOff);
      }
      if (now() >= until) {
        return this.#lose();
      }
      if (now() < nextRenew) {
        await this.#attentionOr(Math.min(until, nextRenew));
        continue;
      }
      const renewStarted = now();
      const renewal = settle(this.#client.renew(this.key, this.holder, fence, this.ttlMs));
      const renewed = await this.#whileEntitled(renewal, until);
      if (renewed === "stopped") {
        // Released at the fence the renew in flight answers with, so a
        // renew that landed does not leave the key to its TTL.
        this.#publish(null);
        const late = await renewal;
        return this.#release(late.ok ? late.value.revision : fence);
      }
      if (renewed === "ran out") {
        return this.#lose();
      }
      if (renewed.ok) {
        fence = renewed.value.revision;
        until = entitledUntil(renewStarted, renewed.value);
        nextRenew = renewStarted + this.ttlMs / 3;
        retry = RETRY_MIN_MS;
        this.#publish({ tenure, fence, until });
      } else if (renewed.error instanceof LeaseError && renewed.error.kind === "lost") {
        return this.#lose();
      } else {
        // Retrying at the same fence is safe: a renew whose reply was lost
        // gets the same answer again.
        nextRenew = now() + retry;
        retry = Math.min(retry * 2, RETRY_MAX_MS);
      }
    }
  }

  #lose(): Ended {
    this.#publish(null);
    return "lost";
  }

  async #release(fence: number): Promise<Ended> {
    this.#publish(null);
    // A failed release leaves the key to its TTL.
    await settle(this.#client.release(this.key, this.holder, fence));
    return "stopped";
  }

  /** A stop came while an acquire was in flight: release what it granted, once it answers. */
  async #releaseLate(call: Promise<Settled<Grant>>): Promise<void> {
    const outcome = await call;
    if (outcome.ok && outcome.value.granted) {
      await settle(this.#client.release(this.key, this.holder, outcome.value.revision));
    }
  }

  /**
   * Stops acting as owner, then transfers at `fence`. A failure that is
   * not `lost` may or may not have moved the lease: the release that
   * follows frees it if it did not (and is refused if it did).
   */
  async #transfer(fence: number, request: HandOffRequest): Promise<Ended> {
    this.#publish(null);
    const moved = await settle(this.#client.transfer(this.key, this.holder, fence, request.to, this.ttlMs));
    if (moved.ok) {
      request.resolve(moved.value);
    } else {
      if (!(moved.error instanceof LeaseError && moved.error.kind === "lost")) {
        await this.#release(fence);
      }
      request.reject(moved.error);
    }
    return "stopped";
  }

  /** Waits for `call`, or for a stop; hand-offs wait for the call's end. */
  async #whileRunning<T>(call: Promise<T>): Promise<T | "stopped"> {
    let result: { value: T } | null = null;
    const done = call.then((value) => {
      result = { value };
    });
    while (result === null) {
      if (this.#stopping) {
        return "stopped";
      }
      await Promise.race([done, this.#attention.next()]);
    }
    return (result as { value: T }).value;
  }

  /** {@link LeaseKeeper.#whileRunning}, cut short when the lease runs out at `until`. */
  async #whileEntitled<T>(call: Promise<T>, until: number): Promise<T | "stopped" | "ran out"> {
    const alarm = new Alarm(until - now());
    try {
      const outcome = await this.#whileRunning(Promise.race([call, alarm.rung.then(() => "ran out" as const)]));
      return outcome;
    } finally {
      alarm.cancel();
    }
  }

  /** Waits until `at` (monotonic ms) or until something asks for attention. */
  async #attentionOr(at: number): Promise<void> {
    const alarm = new Alarm(at - now());
    try {
      await Promise.race([alarm.rung, this.#attention.next()]);
    } finally {
      alarm.cancel();
    }
  }

  /**
   * Waits `waitFor` ms for the key to be freed or handed to us, refusing
   * hand-offs meanwhile (not the owner).
   */
  async #waitForKey(watch: KeyWatch, waitFor: number): Promise<Woken> {
    const deadline = now() + waitFor;
    for (;;) {
      if (this.#stopping) {
        return "stopped";
      }
      for (const request of this.#handOffs.splice(0)) {
        request.reject(notTheOwner());
      }
      if (watch.woken !== null) {
        return watch.woken;
      }
      if (this.#client.nc.isClosed()) {
        return "retry";
      }
      if (now() >= deadline) {
        return "retry";
      }
      await this.#attentionOr(deadline);
    }
  }

  /** Watches the key's change events; null subscription when NATS refuses (then the timers alone wake us). */
  #watchKey(): KeyWatch {
    const watch = new KeyWatch();
    try {
      watch.subscription = this.#client.nc.subscribe(changeSubject(this.key), {
        callback: (err, msg) => {
          const change = err === null ? readChange(msg) : null;
          if (change === null || watch.woken !== null) {
            return;
          }
          if (change.event === "released" || change.event === "expired") {
            watch.woken = "retry";
          } else if (change.event === "acquired" && change.holder === this.holder) {
            watch.woken = { transferredAt: change.revision };
          } else {
            return;
          }
          this.#attention.notify();
        },
      });
    } catch {
      watch.subscription = null;
    }
    return watch;
  }
}

/** A subscription to a key's changes, and what it saw that should wake a waiting keeper. */
class KeyWatch {
  subscription: Subscription | null = null;
  woken: { readonly transferredAt: number } | "retry" | null = null;

  close(): void {
    try {
      this.subscription?.unsubscribe();
    } catch {
      // The connection is closed: so is the subscription.
    }
    this.subscription = null;
  }
}
