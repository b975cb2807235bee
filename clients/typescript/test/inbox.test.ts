/**
 * serveInbox against a real nats-server and the real gateway: the
 * protocol's three rejections and one acceptance, stop and `await using`.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { headers } from "@nats-io/nats-core";
import { LeaseKeeper, serveInbox, type InboxRequest } from "dagnats-leases";

import { failsWith, withStack } from "./support/context.js";
import { uniqueKey } from "./support/wait.js";

const TTL = 3_000;

describe("serveInbox", () => {
  const context = withStack();

  test("a forward reaches the owner's handler, at its fence, and returns its bytes", async () => {
    const key = uniqueKey("forward");
    await using keeper = LeaseKeeper.start(context.leases, { key, holder: "owner-a", ttlMs: TTL });
    const tenure = await keeper.waitOwner(5_000);
    const received: InboxRequest[] = [];
    await using _inbox = await serveInbox(
      context.nc,
      "owner-a",
      (k) => (k === keeper.key ? keeper.tenure() : null),
      (request) => {
        received.push(request);
        return new Uint8Array([...new TextEncoder().encode("echo:"), ...request.payload]);
      },
    );
    const reply = await context.leases.forward(key, new Uint8Array([0, 1, 2, 255]), 2_000);
    assert.deepEqual([...reply], [...new TextEncoder().encode("echo:"), 0, 1, 2, 255]);
    assert.equal(received.length, 1);
    assert.equal(received[0]!.key, key);
    assert.ok(received[0]!.fence >= tenure);
    assert.deepEqual([...received[0]!.payload], [0, 1, 2, 255]);
  });

  test("a request is rejected stale when not the owner, without a whole fence, or below the tenure; the handler never sees it", async () => {
    const seen: InboxRequest[] = [];
    const inbox = await serveInbox(
      context.nc,
      "owner-b",
      (key) => (key === "mine" ? 40 : null),
      (request) => {
        seen.push(request);
        return "accepted";
      },
    );
    const send = async (key: string, fence: string | null) => {
      const h = headers();
      if (fence !== null) h.set("Dagnats-Lease-Fence", fence);
      return context.nc.request(`dagnats.lease.inbox.owner-b.${key}`, "body", { timeout: 2_000, headers: h });
    };
    for (const [key, fence] of [
      ["other", "41"],
      ["mine", null],
      ["mine", ""],
      ["mine", "-1"],
      ["mine", "4.5"],
      ["mine", "x"],
      ["mine", "9007199254740993"],
      ["mine", "39"],
    ] as const) {
      const reply = await send(key, fence);
      assert.equal(reply.headers?.get("Dagnats-Lease-Reject"), "stale", `${key} at ${fence}`);
      assert.equal(reply.data.length, 0);
    }
    assert.equal(seen.length, 0);
    for (const fence of ["40", "41"]) {
      const reply = await send("mine", fence);
      assert.equal(reply.string(), "accepted");
      assert.equal(reply.headers?.get("Dagnats-Lease-Reject") ?? "", "");
    }
    assert.deepEqual(
      seen.map((r) => [r.key, r.fence, new TextDecoder().decode(r.payload)]),
      [
        ["mine", 40, "body"],
        ["mine", 41, "body"],
      ],
    );
    await inbox.stop();
  });

  test("the fence header is read whatever the case of its name", async () => {
    await using _inbox = await serveInbox(
      context.nc,
      "owner-c",
      () => 7,
      (request) => String(request.fence),
    );
    const h = headers();
    h.set("dagnats-lease-fence", "8");
    const reply = await context.nc.request("dagnats.lease.inbox.owner-c.k", "", { timeout: 2_000, headers: h });
    assert.equal(reply.string(), "8");
  });

  test("a stopped inbox no longer answers: the subject has no responders", async () => {
    const inbox = await serveInbox(context.nc, "owner-d", () => 1, () => "here");
    const h = headers();
    h.set("Dagnats-Lease-Fence", "1");
    assert.equal((await context.nc.request("dagnats.lease.inbox.owner-d.k", "", { timeout: 2_000, headers: h })).string(), "here");
    await inbox.stop();
    await inbox.stop();
    const err = await context.nc.request("dagnats.lease.inbox.owner-d.k", "", { timeout: 2_000, headers: h }).then(
      () => assert.fail("a stopped inbox answered"),
      (err: unknown) => err,
    );
    assert.ok(err instanceof Error && err.cause instanceof Error && err.cause.name === "NoResponders", String(err));
  });

  test("a handler that throws sends no reply and its error goes to onError", async () => {
    const key = uniqueKey("throws");
    const grant = await context.leases.acquire(key, "owner-e", TTL);
    const errors: unknown[] = [];
    const boom = new Error("boom");
    await using _inbox = await serveInbox(
      context.nc,
      "owner-e",
      () => grant.revision,
      () => {
        throw boom;
      },
      { onError: (err) => errors.push(err) },
    );
    await failsWith("owner_timeout", context.leases.forward(key, "x", 500));
    assert.deepEqual(errors, [boom]);
  });

  test("serveInbox refuses a holder that is not one subject token with kind invalid", async () => {
    await failsWith("invalid", serveInbox(context.nc, "a.b", () => 1, () => ""));
  });
});
