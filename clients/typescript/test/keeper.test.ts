/**
 * LeaseKeeper against a real nats-server and the real gateway: what is
 * particular to TypeScript (promises, async iteration, AbortSignal,
 * `await using`) and the holder rules it keeps.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { headers as natsHeaders } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import { LeaseClient, LeaseKeeper, type Ownership } from "dagnats-leases";

import { assertKind, rejection, withStack } from "./support/context.js";
import { clockAt, eventually, uniqueKey, within } from "./support/wait.js";

const TTL = 3_000;

describe("LeaseKeeper", () => {
  const context = withStack();

  test("start refuses out-of-bounds options with kind invalid at once", () => {
    for (const options of [
      { key: "a.b", holder: "h", ttlMs: TTL },
      { key: "k", holder: "", ttlMs: TTL },
      { key: "k", holder: "h", ttlMs: 1_500 },
    ]) {
      assert.throws(() => LeaseKeeper.start(context.leases, options), (err: unknown) => {
        assertKind(err, "invalid");
        return true;
      });
    }
  });

  test("a keeper acquires a free key, reports its fence and tenure, and renews about every ttl/3", async (t) => {
    const key = uniqueKey("renews");
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      const changes = keeper.changes();
      const seen: { at: number; ownership: Ownership }[] = [];
      for await (const ownership of changes) {
        seen.push({ at: performance.now(), ownership });
        if (seen.length === 3) break;
      }
      const [first, second, third] = seen.map((s) => s.ownership);
      assert.ok(first?.owner && second?.owner && third?.owner, JSON.stringify(seen));
      assert.equal(second.tenure, first.tenure);
      assert.equal(third.tenure, first.tenure);
      assert.ok(first.fence < second.fence && second.fence < third.fence);
      const gaps = [seen[1]!.at - seen[0]!.at, seen[2]!.at - seen[1]!.at];
      t.diagnostic(`renewed after ${gaps.map((gap) => gap.toFixed(0)).join(" and ")} ms (ttl ${TTL} ms)`);
      for (const gap of gaps) {
        assert.ok(gap > 900 && gap < 1_400, `renewed ${gap} ms after the last grant (ttl/3 is 1000)`);
      }
      assert.equal(keeper.tenure(), first.tenure);
      assert.ok((keeper.fence() ?? 0) >= third.fence);
      const owner = await context.leases.owner(key);
      assert.ok(owner.held && owner.holder === "keeper-a");
    } finally {
      await keeper.stop();
    }
  });

  test("stop releases the lease, reports not-owner and ends changes()", async () => {
    const key = uniqueKey("stop");
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    const fence = await keeper.waitOwner(5_000);
    const changes = keeper.changes();
    await keeper.stop();
    assert.deepEqual(await changes.next(), { value: { owner: false, fence: null, tenure: null }, done: false });
    assert.deepEqual(await changes.next(), { value: undefined, done: true });
    assert.equal(keeper.fence(), null);
    assert.equal(keeper.tenure(), null);
    assert.deepEqual(await context.leases.owner(key), { held: false, key });
    assertKind(await rejection(context.leases.renew(key, "keeper-a", fence, TTL)), "lost");
    await keeper.stop();
  });

  test("await using stops the keeper and releases at the end of the scope", async () => {
    const key = uniqueKey("using");
    {
      await using keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
      await keeper.waitOwner(5_000);
      const owner = await context.leases.owner(key);
      assert.ok(owner.held && owner.holder === "keeper-a");
    }
    assert.deepEqual(await context.leases.owner(key), { held: false, key });
  });

  test("an exception thrown in an await using scope still stops the keeper and releases", async () => {
    const key = uniqueKey("throwing");
    const boom = new Error("boom");
    const thrown = await rejection(
      (async () => {
        await using keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
        await keeper.waitOwner(5_000);
        throw boom;
      })(),
    );
    assert.equal(thrown, boom);
    assert.deepEqual(await context.leases.owner(key), { held: false, key });
  });

  test("waitOwner rejects with kind timeout when the key stays held by another", async () => {
    const key = uniqueKey("held");
    await context.leases.acquire(key, "holder-x", TTL);
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      const started = performance.now();
      assertKind(await rejection(keeper.waitOwner(300)), "timeout");
      const took = performance.now() - started;
      assert.ok(took >= 290 && took < 1_000, `timed out after ${took} ms`);
      assert.equal(keeper.fence(), null);
    } finally {
      await keeper.stop();
    }
  });

  test("waitOwner rejects with the signal's reason when it is aborted", async () => {
    const key = uniqueKey("abort");
    await context.leases.acquire(key, "holder-x", TTL);
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      const controller = new AbortController();
      const waiting = rejection(keeper.waitOwner(null, { signal: controller.signal }));
      const reason = new Error("shutting down");
      controller.abort(reason);
      assert.equal(await within(1_000, "the aborted wait", waiting), reason);
      assert.equal(await rejection(keeper.waitOwner(null, { signal: controller.signal })), reason);
    } finally {
      await keeper.stop();
    }
  });

  test("waitOwner rejects with kind lost when the keeper is stopped first", async () => {
    const key = uniqueKey("stopped");
    await context.leases.acquire(key, "holder-x", TTL);
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    const waiting = rejection(keeper.waitOwner());
    await keeper.stop();
    assertKind(await within(1_000, "the wait of a stopped keeper", waiting), "lost");
  });

  test("a keeper without wait ends when the key is held, naming the holder", async () => {
    const key = uniqueKey("nowait");
    const grant = await context.leases.acquire(key, "holder-x", TTL);
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL, wait: false });
    const err = await within(5_000, "the keeper's end", rejection(keeper.waitOwner()));
    assertKind(err, "lost");
    assert.equal(err.holder, "holder-x");
    assert.equal(err.revision, grant.revision);
    const owner = await context.leases.owner(key);
    assert.ok(owner.held && owner.holder === "holder-x");
  });

  test("a keeper whose connection closes for good ends, and waitOwner rejects with kind unavailable", async () => {
    const key = uniqueKey("closed");
    await context.leases.acquire(key, "holder-x", TTL);
    const nc = await connect({ servers: context.stack.nats.url });
    const keeper = LeaseKeeper.start(new LeaseClient(nc), { key, holder: "keeper-a", ttlMs: TTL });
    const waiting = rejection(keeper.waitOwner());
    await nc.close();
    assertKind(await within(2_000, "the keeper's end", waiting), "unavailable");
    await within(1_000, "the stop of an ended keeper", keeper.stop());
  });

  test("a waiting keeper takes the key over within 1 s of its release", async (t) => {
    const key = uniqueKey("takeover");
    const grant = await context.leases.acquire(key, "holder-x", 10_000);
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      // The keeper's refused acquire is in: its watch is subscribed.
      await eventually(async () => keeper.fence() === null && (await context.leases.owner(key)).held, {
        timeoutMs: 2_000,
        what: () => "the keeper's first acquire",
      });
      const started = performance.now();
      const released = await context.leases.release(key, "holder-x", grant.revision);
      const fence = await keeper.waitOwner(1_000);
      assert.ok(fence > released.revision, `took over at ${fence}, released at ${released.revision}`);
      const took = performance.now() - started;
      t.diagnostic(`took over ${took.toFixed(0)} ms after the release`);
      assert.ok(took < 1_000);
    } finally {
      await keeper.stop();
    }
  });

  test("a waiting keeper tries again on each event that frees the key: released, expired, deleted", async () => {
    const key = uniqueKey("events");
    await context.leases.acquire(key, "holder-x", 30_000);
    const acquires: number[] = [];
    const spy = context.nc.subscribe("api.leases.acquire", {
      callback: (_err, msg) => {
        if (msg.json<{ key: string }>().key === key) acquires.push(performance.now());
      },
    });
    await context.nc.flush();
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      await eventually(() => acquires.length === 1, { timeoutMs: 2_000, what: () => "the keeper's first acquire" });
      for (const [n, wake] of [
        { "Nats-Sequence": "9", "Dagnats-Lease-Event": "released" },
        { "Nats-Sequence": "10", "Nats-Marker-Reason": "MaxAge" },
        { "Nats-Sequence": "11", "KV-Operation": "DEL" },
      ].entries()) {
        const h = natsHeaders();
        for (const [name, value] of Object.entries(wake)) h.set(name, value);
        context.nc.publish(`dagnats.lease.changed.${key}`, "", { headers: h });
        await eventually(() => acquires.length === n + 2, {
          timeoutMs: 1_000,
          what: () => `an acquire after ${JSON.stringify(wake)}`,
        });
      }
    } finally {
      spy.unsubscribe();
      await keeper.stop();
    }
  });

  test("fence() turns null by the deadline when the gateway stops answering", async (t) => {
    const key = uniqueKey("deadline");
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    const changes = keeper.changes();
    try {
      await keeper.waitOwner(5_000);
      context.stack.gateway.child.pause();
      const paused = performance.now();
      // The last granting request started at most ttl/3 (and a renew's
      // round trip) before the pause, and at the latest at the pause: the
      // deadline is between the two, and fence() reads the clock.
      await clockAt(paused + TTL - TTL / 3 - 300);
      assert.notEqual(keeper.fence(), null, "the owner before its deadline");
      await clockAt(paused + TTL);
      assert.equal(keeper.fence(), null, "fence() from the deadline on");
      assert.equal(keeper.tenure(), null, "tenure() from the deadline on");
      // The change to not-owner follows on the keeper's timer.
      for await (const ownership of changes) {
        if (!ownership.owner) break;
      }
      const after = performance.now() - paused;
      t.diagnostic(`not-owner reported ${after.toFixed(0)} ms after the gateway stopped (ttl ${TTL} ms)`);
      assert.ok(after < TTL + 250, `not-owner reported ${after} ms after the gateway stopped`);
    } finally {
      context.stack.gateway.child.resume();
      await keeper.stop();
    }
  });

  test("a stop while the acquire is in flight releases what the acquire granted", async () => {
    const key = uniqueKey("inflight");
    // The gateway answers the acquire only after the stop: a keeper that
    // did not wait for it would leave the key held until its TTL.
    context.stack.gateway.child.pause();
    let stopping: Promise<void>;
    try {
      const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
      stopping = keeper.stop();
    } finally {
      context.stack.gateway.child.resume();
    }
    await within(6_000, "the stop", stopping);
    assert.deepEqual(await context.leases.owner(key), { held: false, key });
  });

  test("handOff to an invalid holder is refused with kind invalid and the keeper keeps the lease", async () => {
    const key = uniqueKey("badhandoff");
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    try {
      const fence = await keeper.waitOwner(5_000);
      assertKind(await rejection(keeper.handOff("not.a.holder")), "invalid");
      assertKind(await rejection(keeper.handOff("keeper-a")), "invalid");
      assert.ok((keeper.fence() ?? 0) >= fence);
    } finally {
      await keeper.stop();
    }
  });

  test("handOff transfers the lease and ends the keeper; a second is lost", async () => {
    const key = uniqueKey("handoff");
    const keeper = LeaseKeeper.start(context.leases, { key, holder: "keeper-a", ttlMs: TTL });
    const fence = await keeper.waitOwner(5_000);
    const grant = await keeper.handOff("keeper-b");
    assert.equal(grant.granted, true);
    assert.equal(grant.holder, "keeper-b");
    assert.ok(grant.revision > fence);
    assert.equal(keeper.fence(), null);
    const owner = await context.leases.owner(key);
    assert.ok(owner.held && owner.holder === "keeper-b" && owner.revision === grant.revision);
    assertKind(await rejection(keeper.handOff("keeper-c")), "lost");
  });
});
