/**
 * Change events read as docs/protocol.md (Change events) tells them,
 * from real messages through a real nats-server: what wakes a waiting
 * keeper and what does not.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { headers, type Msg } from "@nats-io/nats-core";

// Internal: the decoding a keeper applies to each event.
import { readChange } from "../lib/changes.js";
import { withNats } from "./support/context.js";

describe("change events", () => {
  const context = withNats();

  /** The message a subscriber receives for `pairs` and `body`. */
  async function received(pairs: Record<string, string>, body = ""): Promise<Msg> {
    const sub = context.nc.subscribe("dagnats.lease.changed.k", { max: 1 });
    const h = headers();
    for (const [name, value] of Object.entries(pairs)) h.set(name, value);
    context.nc.publish("dagnats.lease.changed.k", body, { headers: h });
    for await (const msg of sub) return msg;
    throw new Error("no message");
  }

  const record = (holder: string) => JSON.stringify({ v: 1, holder, ttl_ms: 3000 });

  test("a release, a revoke and a KV delete free the key, whichever header says so", async () => {
    for (const pairs of [
      { "Nats-Sequence": "9", "Dagnats-Lease-Event": "released" },
      { "Nats-Sequence": "9", "Dagnats-Lease-Event": "released", "KV-Operation": "PURGE" },
      { "Nats-Sequence": "9", "KV-Operation": "DEL" },
    ]) {
      assert.deepEqual(readChange(await received(pairs)), { event: "released", revision: 9, holder: null }, JSON.stringify(pairs));
    }
  });

  test("an expiry marker is expired", async () => {
    const msg = await received({ "Nats-Sequence": "10", "Nats-Marker-Reason": "MaxAge" });
    assert.deepEqual(readChange(msg), { event: "expired", revision: 10, holder: null });
  });

  test("acquired and renewed name the holder their record names", async () => {
    assert.deepEqual(readChange(await received({ "Nats-Sequence": "11", "Dagnats-Lease-Event": "acquired" }, record("b"))), {
      event: "acquired",
      revision: 11,
      holder: "b",
    });
    assert.deepEqual(readChange(await received({ "Nats-Sequence": "12", "Dagnats-Lease-Event": "renewed" }, record("b"))), {
      event: "renewed",
      revision: 12,
      holder: "b",
    });
  });

  test("a message without a whole revision, without an event, or with an unreadable record is not a change", async () => {
    for (const [pairs, body] of [
      [{ "Dagnats-Lease-Event": "released" }, ""],
      [{ "Nats-Sequence": "x", "Dagnats-Lease-Event": "released" }, ""],
      [{ "Nats-Sequence": "9007199254740993", "Dagnats-Lease-Event": "released" }, ""],
      [{ "Nats-Sequence": "9" }, record("b")],
      [{ "Nats-Sequence": "9", "Dagnats-Lease-Event": "acquired" }, "not json"],
      [{ "Nats-Sequence": "9", "Dagnats-Lease-Event": "acquired" }, "{}"],
    ] as const) {
      assert.equal(readChange(await received(pairs, body)), null, JSON.stringify([pairs, body]));
    }
  });
});
