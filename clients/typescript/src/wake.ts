/**
 * The small waiting tools a keeper's loop is built from: a settled
 * promise, a cancellable alarm, and a pulse that wakes the loop to look
 * at its state again.
 *
 * @module
 */

/** A promise's outcome as a value, so an abandoned call never rejects unhandled. */
export type Settled<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** `promise`'s outcome, never rejecting. */
export function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  );
}

/** Rings once after `ms` milliseconds, unless cancelled first (then never). */
export class Alarm {
  /** Resolves when the alarm rings. */
  readonly rung: Promise<void>;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(ms: number) {
    this.rung = new Promise((resolve) => {
      this.#timer = setTimeout(resolve, Math.max(0, ms));
    });
  }

  /** Lets the process exit without waiting for the alarm. */
  cancel(): void {
    clearTimeout(this.#timer);
  }
}

/**
 * Wakes whoever waits on {@link Pulse.next}. A notify with nobody waiting
 * is kept for the next wait, so a waiter that checks its state, then
 * waits, misses nothing.
 */
export class Pulse {
  #waiting: Promise<void> | null = null;
  #wake: (() => void) | null = null;
  #pending = false;

  /** Resolves at the next notify (at once if one came while nobody waited). */
  next(): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    this.#waiting ??= new Promise((resolve) => {
      this.#wake = resolve;
    });
    return this.#waiting;
  }

  /** Wakes the waiters, or the next one to wait. */
  notify(): void {
    const wake = this.#wake;
    if (wake === null) {
      this.#pending = true;
      return;
    }
    this.#waiting = null;
    this.#wake = null;
    wake();
  }
}
