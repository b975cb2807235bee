/**
 * LeaseClient against a real nats-server and the real gateway: every call
 * with its exact reply fields, and every client-side error kind.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { connect } from "@nats-io/transport-node";
import { LeaseClient, LeaseError, type Grant } from "dagnats-leases";

import { failsWith, withNats, withStack } from "./support/context.js";
import { uniqueKey } from "./support/wait.js";

const TTL = 3_000;

function assertLease(grant: Grant, key: string, holder: string, granted: boolean): void {
  assert.deepEqual(Object.keys(grant).sort(), [
    "acquired_at",
    "expires_at",
    "granted",
    "held",
    "holder",
    "key",
    "revision",
    "ttl_ms",
  ]);
  assert.equal(grant.granted, granted);
  assert.equal(grant.held, true);
  assert.equal(grant.key, key);
  assert.equal(grant.holder, holder);
  assert.ok(Number.isSafeInteger(grant.revision) && grant.revision >= 1, `revision ${grant.revision}`);
  assert.equal(grant.ttl_ms, TTL);
  assert.match(grant.acquired_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  assert.match(grant.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
}

describe("LeaseClient", () => {
  const context = withStack();

  test("acquire grants a free key and answers granted false naming the holder of a held one", async () => {
    const key = uniqueKey("acquire");
    const grant = await context.leases.acquire(key, "holder-a", TTL);
    assertLease(grant, key, "holder-a", true);
    const refused = await context.leases.acquire(key, "holder-b", TTL);
    assertLease(refused, key, "holder-a", false);
    assert.equal(refused.revision, grant.revision);
  });

  test("acquire by the holder again returns its lease at the same revision", async () => {
    const key = uniqueKey("again");
    const first = await context.leases.acquire(key, "holder-a", TTL);
    const again = await context.leases.acquire(key, "holder-a", TTL);
    assert.deepEqual(again, first);
  });

  test("renew raises the fence and keeps the tenure's acquired_at", async () => {
    const key = uniqueKey("renew");
    const grant = await context.leases.acquire(key, "holder-a", TTL);
    const renewed = await context.leases.renew(key, "holder-a", grant.revision, TTL);
    assertLease(renewed, key, "holder-a", true);
    assert.ok(renewed.revision > grant.revision);
    assert.equal(renewed.acquired_at, grant.acquired_at);
  });

  test("release frees the key and owner then answers held false", async () => {
    const key = uniqueKey("release");
    const grant = await context.leases.acquire(key, "holder-a", TTL);
    assert.deepEqual(await context.leases.owner(key), {
      held: true,
      key,
      holder: "holder-a",
      revision: grant.revision,
      acquired_at: grant.acquired_at,
      expires_at: grant.expires_at,
      ttl_ms: TTL,
    });
    const released = await context.leases.release(key, "holder-a", grant.revision);
    assert.equal(released.released, true);
    assert.equal(released.held, false);
    assert.equal(released.key, key);
    assert.equal(released.holder, "holder-a");
    assert.ok(released.revision > grant.revision);
    assert.deepEqual(await context.leases.owner(key), { held: false, key });
  });

  test("renew and release at a stale fence are lost, with no holder or revision", async () => {
    const key = uniqueKey("stale");
    const grant = await context.leases.acquire(key, "holder-a", TTL);
    // A renew retried at the fence it replaced answers the same (a lost
    // reply is safe to retry); once a later write moved on, it is lost.
    const renewed = await context.leases.renew(key, "holder-a", grant.revision, TTL);
    const again = await context.leases.renew(key, "holder-a", renewed.revision, TTL);
    const lost = await failsWith("lost", context.leases.renew(key, "holder-a", grant.revision, TTL));
    assert.equal(lost.holder, null);
    assert.equal(lost.revision, null);
    await failsWith("lost", context.leases.release(key, "holder-b", again.revision));
  });

  test("transfer makes the successor the holder at a higher fence, a new tenure", async () => {
    const key = uniqueKey("transfer");
    const grant = await context.leases.acquire(key, "holder-a", TTL);
    const moved = await context.leases.transfer(key, "holder-a", grant.revision, "holder-b", TTL);
    assertLease(moved, key, "holder-b", true);
    assert.ok(moved.revision > grant.revision);
    await failsWith("lost", context.leases.renew(key, "holder-a", grant.revision, TTL));
  });

  test("list answers a page of leases ordered by key, and next until the last page", async () => {
    const prefix = uniqueKey("list");
    const keys = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
    for (const key of keys) await context.leases.acquire(key, "holder-a", TTL);
    const first = await context.leases.list({ prefix, limit: 2 });
    assert.deepEqual(
      first.leases.map((lease) => [lease.key, lease.holder, lease.held]),
      [
        [keys[0], "holder-a", true],
        [keys[1], "holder-a", true],
      ],
    );
    assert.equal(first.next, keys[1]);
    const last = await context.leases.list({ prefix, after: first.next });
    assert.deepEqual(
      last.leases.map((lease) => lease.key),
      [keys[2]],
    );
    assert.equal(last.next, null);
  });

  test("forward to a key nobody holds carries the gateway's kind not_held", async () => {
    await failsWith("not_held", context.leases.forward(uniqueKey("free"), "ping", 1_000));
  });

  test("out-of-bounds input is refused with kind invalid and nothing is sent", async () => {
    const spy = context.nc.subscribe("api.leases.>");
    let seen = 0;
    void (async () => {
      for await (const _ of spy) seen += 1;
    })();
    await context.nc.flush();
    const bad: [string, () => Promise<unknown>][] = [
      ["a key with a dot", () => context.leases.acquire("a.b", "h", TTL)],
      ["an empty key", () => context.leases.owner("")],
      ["a key of 129 bytes", () => context.leases.owner("k".repeat(129))],
      ["a holder with a space", () => context.leases.acquire("k", "a b", TTL)],
      ["ttl_ms not whole seconds", () => context.leases.acquire("k", "h", 1_500)],
      ["ttl_ms below a second", () => context.leases.acquire("k", "h", 0)],
      ["ttl_ms above ten minutes", () => context.leases.renew("k", "h", 3, 601_000)],
      ["revision 0", () => context.leases.renew("k", "h", 0, TTL)],
      ["a fractional revision", () => context.leases.release("k", "h", 1.5)],
      ["a revision beyond 2^53", () => context.leases.release("k", "h", 2 ** 53)],
      ["a transfer to the holder itself", () => context.leases.transfer("k", "h", 3, "h", TTL)],
      ["a list limit of 0", () => context.leases.list({ limit: 0 })],
      ["a list limit of 5001", () => context.leases.list({ limit: 5_001 })],
      ["a list after that is not a key", () => context.leases.list({ after: "a.b" })],
      ["a list prefix that is not a key", () => context.leases.list({ prefix: "a*" })],
      ["a forward timeout of 99 ms", () => context.leases.forward("k", "x", 99)],
      ["a forward timeout of 30001 ms", () => context.leases.forward("k", "x", 30_001)],
    ];
    for (const [what, call] of bad) {
      const err = await call().then(
        () => assert.fail(`${what} was accepted`),
        (err: unknown) => err,
      );
      assert.ok(err instanceof LeaseError && err.kind === "invalid", `${what}: ${String(err)}`);
    }
    await context.nc.flush();
    spy.unsubscribe();
    assert.equal(seen, 0, "a refused call reached the lease subjects");
  });

  test("a call to a stopped gateway gets kind timeout after the client's timeout", async () => {
    const quick = new LeaseClient(context.nc, { timeoutMs: 1_000 });
    context.stack.gateway.child.pause();
    try {
      const started = performance.now();
      await failsWith("timeout", quick.owner(uniqueKey("paused")));
      const took = performance.now() - started;
      assert.ok(took >= 990 && took < 2_500, `timed out after ${took} ms`);
    } finally {
      context.stack.gateway.child.resume();
    }
  });
});

describe("LeaseClient without a gateway", () => {
  const context = withNats();

  test("no gateway on the subject is kind unavailable", async () => {
    const leases = new LeaseClient(context.nc);
    const started = performance.now();
    await failsWith("unavailable", leases.acquire(uniqueKey("nobody"), "holder-a", TTL));
    assert.ok(performance.now() - started < 1_000, "no responders is known at once, not after the timeout");
  });

  test("a forward too large for max_payload is kind payload_too_large and nothing is sent", async () => {
    const subjects: string[] = [];
    const spy = context.nc.subscribe("api.leases.>", {
      callback: (_err, msg) => {
        subjects.push(msg.subject);
      },
    });
    await context.nc.flush();
    // Base64 in the request makes it a third larger than max_payload.
    const payload = new Uint8Array(Math.floor((context.nc.info!.max_payload * 3) / 4) + 1);
    const err = await failsWith("payload_too_large", new LeaseClient(context.nc).forward("k", payload, 1_000));
    assert.deepEqual([err.holder, err.revision], [null, null]);
    // A last message on the same connection: had the forward left, it came first.
    context.nc.publish("api.leases.sentinel");
    await context.nc.flush();
    spy.unsubscribe();
    assert.deepEqual(subjects, ["api.leases.sentinel"]);
  });

  test("a closed connection is kind unavailable", async () => {
    const closed = await connect({ servers: context.nats.url });
    await closed.close();
    await failsWith("unavailable", new LeaseClient(closed).owner("k"));
  });

  test("a reply that cannot be read is kind internal, a revision beyond 2^53 included", async () => {
    const lease = `"held":true,"key":"k","holder":"h","acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000`;
    const replies = [
      "not json",
      "[1,2]",
      `{"granted":true,${lease}}`,
      `{"granted":true,${lease},"revision":9007199254740993}`,
      `{"granted":true,${lease},"revision":"42"}`,
      `{"granted":true,${lease},"revision":-1}`,
      `{"granted":"yes",${lease},"revision":42}`,
    ];
    const responder = context.nc.subscribe("api.leases.acquire", {
      callback: (_err, msg) => {
        msg.respond(replies[msg.json<{ ttl_ms: number }>().ttl_ms / 1_000 - 1]);
      },
    });
    await context.nc.flush();
    const leases = new LeaseClient(context.nc);
    for (const [i, reply] of replies.entries()) {
      const err = await failsWith("internal", leases.acquire("k", "h", (i + 1) * 1_000));
      assert.match(err.message, /unreadable reply/, reply);
    }
    responder.unsubscribe();
  });

  test("every reply whose revision is not a safe integer is kind internal, one up to 2^53 - 1 is read", async () => {
    for (const rev of ["9007199254740991", "9007199254740992", "18446744073709551615"]) {
      const lease = `"held":true,"key":"k","holder":"h","revision":${rev},"acquired_at":"2026-10-18T12:00:00Z","expires_at":"2026-10-18T12:00:03Z","ttl_ms":3000`;
      const replies: Record<string, string> = {
        acquire: `{"granted":true,${lease}}`,
        renew: `{"granted":true,${lease}}`,
        transfer: `{"granted":true,${lease}}`,
        release: `{"released":true,"held":false,"key":"k","holder":"h","revision":${rev}}`,
        owner: `{${lease}}`,
        list: `{"leases":[{${lease}}],"next":null}`,
        forward: `{"error":"the owner did not answer","kind":"owner_timeout","holder":"h","revision":${rev}}`,
      };
      const responder = context.nc.subscribe("api.leases.*", {
        callback: (_err, msg) => {
          msg.respond(replies[msg.subject.split(".")[2]!]);
        },
      });
      await context.nc.flush();
      const leases = new LeaseClient(context.nc);
      const calls: Record<string, () => Promise<unknown>> = {
        acquire: () => leases.acquire("k", "h", 3_000),
        renew: () => leases.renew("k", "h", 1, 3_000),
        transfer: () => leases.transfer("k", "h", 1, "g", 3_000),
        release: () => leases.release("k", "h", 1),
        owner: () => leases.owner("k"),
        list: () => leases.list(),
        forward: () => leases.forward("k", "x", 1_000),
      };
      for (const [method, call] of Object.entries(calls)) {
        const kind = await call().then(
          () => null,
          (err: unknown) => (err instanceof LeaseError ? err.kind : String(err)),
        );
        // Up to 2^53 - 1 the replies are read; forward's is an error reply.
        const want = rev !== "9007199254740991" ? "internal" : method === "forward" ? "owner_timeout" : null;
        assert.equal(kind, want, `revision ${rev}: ${method}`);
      }
      responder.unsubscribe();
    }
  });

  test("a gateway error carries its kind, holder and revision", async () => {
    const responder = context.nc.subscribe("api.leases.forward", {
      callback: (_err, msg) => {
        msg.respond(`{"error":"the owner did not answer","kind":"owner_timeout","holder":"h-1","revision":41}`);
      },
    });
    await context.nc.flush();
    const err = await failsWith("owner_timeout", new LeaseClient(context.nc).forward("k", "x", 1_000));
    assert.equal(err.message, "the owner did not answer");
    assert.equal(err.holder, "h-1");
    assert.equal(err.revision, 41);
    responder.unsubscribe();
  });

  test("a call whose reply is late is sent again at half its timeout, saying how long it is still waited for", async () => {
    const seen: { at: number; waitMs: string | null }[] = [];
    const started = performance.now();
    const responder = context.nc.subscribe("api.leases.owner", {
      callback: (_err, msg) => {
        seen.push({ at: performance.now() - started, waitMs: msg.headers?.get("Dagnats-Lease-Wait-Ms") ?? null });
        if (seen.length === 2) msg.respond(`{"held":false,"key":"k"}`);
      },
    });
    await context.nc.flush();
    const owner = await new LeaseClient(context.nc, { timeoutMs: 2_000 }).owner("k");
    assert.deepEqual(owner, { held: false, key: "k" });
    assert.equal(seen.length, 2);
    assert.ok(seen[1]!.at >= 990 && seen[1]!.at < 1_500, `the copy left at ${seen[1]!.at} ms`);
    const waits = seen.map((s) => Number(s.waitMs));
    assert.ok(waits[0]! > 1_900 && waits[0]! <= 2_000, `first copy waits ${waits[0]} ms`);
    assert.ok(waits[1]! > 900 && waits[1]! <= 1_010, `second copy waits ${waits[1]} ms`);
    responder.unsubscribe();
  });

  test("a forward is never sent twice", async () => {
    let seen = 0;
    const responder = context.nc.subscribe("api.leases.forward", {
      callback: () => {
        seen += 1;
      },
    });
    await context.nc.flush();
    await failsWith("timeout", new LeaseClient(context.nc).forward("k", "x", 100));
    assert.equal(seen, 1);
    responder.unsubscribe();
  });
});
