/**
 * The conformance driver speaks clients/conformance/DRIVER.md: its ready
 * line, answers matched by id, the library's kinds and the driver's own,
 * unsolicited events, concurrency, and a clean exit. The scenarios
 * themselves are the conformance runner's.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";

import { withStack } from "./support/context.js";
import { Child, PACKAGE_ROOT } from "./support/processes.js";
import { uniqueKey } from "./support/wait.js";

interface Line {
  id?: number;
  ok?: Record<string, unknown>;
  error?: { kind: string; message: string; holder: string | null; revision: number | null };
  event?: string;
  ready?: boolean;
  [field: string]: unknown;
}

describe("conformance driver", () => {
  const context = withStack();

  test("the driver answers each request by id, with the library's kinds, events and a clean exit", async () => {
    const driver = new Child(process.execPath, [join(PACKAGE_ROOT, "test/conformance-driver.mjs")], {
      env: { ...process.env, NATS_URL: context.stack.nats.url, DRIVER_CALL_TIMEOUT_MS: "2000" },
    });
    let next = 0;
    const ask = async (request: Record<string, unknown>): Promise<Line> => {
      const id = ++next;
      driver.send({ id, ...request });
      return driver.nextJson<Line>((line) => line.id === id, 10_000, `the answer to ${JSON.stringify(request)}`);
    };
    try {
      const ready = await driver.nextJson<Line>((line) => line.ready === true, 10_000, "the ready line");
      assert.deepEqual(ready, { ready: true, library: "typescript", version: "0.1.0" });
      const key = uniqueKey("driver");

      // A wait_owner in flight does not hold up later requests.
      await context.leases.acquire(key, "holder-x", 3_000);
      assert.deepEqual(await ask({ op: "keeper.start", keeper: "k1", key, holder: "holder-k", ttl_ms: 3_000, wait: true }), {
        id: next,
        ok: {},
      });
      const waitId = ++next;
      driver.send({ id: waitId, op: "keeper.wait_owner", keeper: "k1", timeout_ms: 10_000 });
      const invalid = await ask({ op: "call", method: "acquire", args: { key: "a.b", holder: "h", ttl_ms: 1_500 } });
      assert.equal(invalid.error?.kind, "invalid");
      assert.deepEqual(await ask({ op: "keeper.state", keeper: "k1" }), { id: next, ok: { fence: null, tenure: null } });

      const owned = await driver.nextJson<Line>((line) => line.id === waitId, 10_000, "the wait_owner answer");
      const fence = owned.ok?.["fence"];
      assert.ok(typeof fence === "number");
      const event = await driver.nextJson<Line>((line) => line.event === "ownership", 1_000, "the ownership event");
      assert.deepEqual(event, { event: "ownership", keeper: "k1", owner: true, fence, tenure: fence });

      const lost = await ask({ op: "call", method: "renew", args: { key, holder: "holder-x", revision: 1, ttl_ms: 3_000 } });
      assert.deepEqual(lost.error && { kind: lost.error.kind, holder: lost.error.holder, revision: lost.error.revision }, {
        kind: "lost",
        holder: null,
        revision: null,
      });
      const owner = await ask({ op: "call", method: "owner", args: { key } });
      assert.deepEqual(Object.keys(owner.ok ?? {}).sort(), ["acquired_at", "expires_at", "held", "holder", "key", "revision", "ttl_ms"]);

      assert.equal((await ask({ op: "gate.admit", gate: "g", fence: 5 })).ok !== undefined, true);
      assert.equal((await ask({ op: "gate.admit", gate: "g", fence: 4 })).error?.kind, "stale_fence");
      assert.equal((await ask({ op: "keeper.state", keeper: "nope" })).error?.kind, "not_found");
      assert.equal((await ask({ op: "no.such.op" })).error?.kind, "bad_request");

      driver.send({ id: ++next, op: "exit" });
      assert.equal(await driver.exited, 0, driver.output);
      assert.deepEqual(await context.leases.owner(key), { held: false, key }, "exit stops every keeper, releasing");
    } finally {
      await driver.stop();
    }
  });
});
