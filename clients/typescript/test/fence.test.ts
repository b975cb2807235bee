/**
 * FenceGate: pure logic, no server needed.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { FenceGate, StaleFence } from "dagnats-leases";

describe("FenceGate", () => {
  test("equal fences are admitted and lower ones refused with StaleFence", () => {
    const gate = new FenceGate();
    assert.equal(gate.highest, 0);
    gate.admit(7);
    gate.admit(7);
    assert.throws(
      () => gate.admit(6),
      (err: unknown) => {
        assert.ok(err instanceof StaleFence);
        assert.equal(err.name, "StaleFence");
        assert.equal(err.fence, 6);
        assert.equal(err.highest, 7);
        return true;
      },
    );
    assert.equal(gate.highest, 7);
  });

  test("fences compare as numbers, not as strings", () => {
    const gate = new FenceGate();
    gate.admit(9);
    gate.admit(10);
    assert.throws(() => gate.admit(9), StaleFence);
    gate.admit(1_796_452_747_382_824);
    assert.throws(() => gate.admit(999_999_999_999_999), StaleFence);
  });

  test("a fence that is not a whole number below 2^53 is a RangeError and changes nothing", () => {
    const gate = new FenceGate();
    gate.admit(5);
    for (const bad of [NaN, 5.5, -1, 2 ** 53, Infinity, "6" as unknown as number]) {
      assert.throws(() => gate.admit(bad), RangeError, String(bad));
    }
    assert.equal(gate.highest, 5);
  });
});
