/**
 * Waiting with a deadline: every wait in the tests goes through here, and
 * none is a fixed sleep used for synchronisation.
 */

/** Options of {@link eventually}. */
export interface EventuallyOptions {
  /** How long to keep trying. */
  timeoutMs: number;
  /** What was awaited, for the failure message. */
  what: () => string;
  /** Pause between tries (default 25 ms). */
  everyMs?: number;
}

/**
 * The first truthy result of `probe`, tried until the deadline; throws
 * naming `what` when it runs out.
 */
export async function eventually<T>(
  probe: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  options: EventuallyOptions,
): Promise<T> {
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined && value !== false) {
      return value;
    }
    if (performance.now() >= deadline) {
      throw new Error(`not within ${options.timeoutMs} ms: ${options.what()}`);
    }
    await new Promise((done) => setTimeout(done, options.everyMs ?? 25));
  }
}

/** `promise`, or a failure naming `what` after `timeoutMs`. */
export async function within<T>(timeoutMs: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, fail) => {
    timer = setTimeout(() => fail(new Error(`not within ${timeoutMs} ms: ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves once the monotonic clock reads `at` (ms, as `performance.now()`). */
export async function clockAt(at: number): Promise<void> {
  await eventually(() => performance.now() >= at, {
    timeoutMs: Math.max(0, at - performance.now()) + 1_000,
    what: () => `the clock at ${at}`,
    everyMs: 1,
  });
}

/** A key no other test uses. */
export function uniqueKey(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}
