/**
 * {@link FenceGate}: the downstream half of fencing (docs/protocol.md,
 * Holder rules and client libraries).
 *
 * "Have the downstream store reject any revision lower than the highest it
 * has seen": a paused process that wakes up believing it still owns the
 * lease carries an old fence, and only this check stops its writes. In a
 * database, the same check is one conditional statement (see the README's
 * "Fence your writes").
 *
 * @module
 */

/** A write refused because a write at a higher fence was already admitted. */
export class StaleFence extends Error {
  /** The refused fence. */
  readonly fence: number;
  /** The highest fence admitted so far. */
  readonly highest: number;

  /** A refusal of `fence`, below `highest`. */
  constructor(fence: number, highest: number) {
    super(`fence ${fence} is stale: a write at fence ${highest} was already accepted`);
    this.name = "StaleFence";
    this.fence = fence;
    this.highest = highest;
  }
}

/**
 * Admits a write only if its fence is at least the highest seen. One gate
 * per protected resource, in one process.
 *
 * @example
 * ```ts
 * const gate = new FenceGate();
 * gate.admit(42); // the owner at revision 42 writes
 * gate.admit(45); // it renewed: revision 45
 * gate.admit(50); // a new owner took over at 50
 * gate.admit(45); // the old owner wakes up: throws StaleFence { fence: 45, highest: 50 }
 * ```
 */
export class FenceGate {
  #highest = 0;

  /** The highest fence admitted so far (0 before any). */
  get highest(): number {
    return this.#highest;
  }

  /**
   * Admits a write at `fence`, or throws {@link StaleFence} if a higher
   * fence was admitted. A fence that is not a whole number from 0 to 2^53
   * is a `RangeError`: it could never be compared safely.
   */
  admit(fence: number): void {
    if (!Number.isSafeInteger(fence) || fence < 0) {
      throw new RangeError(`a fence is a whole number below 2^53, got ${String(fence)}`);
    }
    if (fence < this.#highest) {
      throw new StaleFence(fence, this.#highest);
    }
    this.#highest = fence;
  }
}
