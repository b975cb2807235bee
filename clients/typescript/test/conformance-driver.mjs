#!/usr/bin/env node
// The conformance driver of the TypeScript library: JSON lines on stdin
// and stdout, as clients/conformance/DRIVER.md defines them. A thin
// adapter: it decodes a line, calls the built package (imported by its
// name, as a user would), and encodes what the library returned. It holds
// no lease logic of its own.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

import { connect } from "@nats-io/transport-node";
import { FenceGate, LeaseClient, LeaseError, LeaseKeeper, StaleFence, serveInbox } from "dagnats-leases";

const version = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;

/** A failure the driver itself reports, with a driver-level kind. */
class DriverError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function write(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function errorOf(err) {
  if (err instanceof LeaseError) {
    return { kind: err.kind, message: err.message, holder: err.holder, revision: err.revision };
  }
  if (err instanceof StaleFence) {
    return { kind: "stale_fence", message: err.message, holder: null, revision: null };
  }
  if (err instanceof DriverError) {
    return { kind: err.kind, message: err.message, holder: null, revision: null };
  }
  if (err instanceof RangeError) {
    return { kind: "invalid", message: err.message, holder: null, revision: null };
  }
  return { kind: "internal", message: `${err?.name}: ${err?.message ?? String(err)}`, holder: null, revision: null };
}

// Replies are read back field by field from the library's typed values.
const lease = (l) => ({
  held: l.held,
  key: l.key,
  holder: l.holder,
  revision: l.revision,
  acquired_at: l.acquired_at,
  expires_at: l.expires_at,
  ttl_ms: l.ttl_ms,
});
const grant = (g) => ({ granted: g.granted, ...lease(g) });
const released = (r) => ({ released: r.released, held: r.held, key: r.key, holder: r.holder, revision: r.revision });
const owner = (o) => (o.held ? lease(o) : { held: o.held, key: o.key });
const list = (page) => ({ leases: page.leases.map(lease), next: page.next });

const nc = await connect({ servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222" });
const client = new LeaseClient(nc, { timeoutMs: Number(process.env.DRIVER_CALL_TIMEOUT_MS ?? 5000) });
const keepers = new Map();
const inboxes = new Map();
const gates = new Map();

function named(map, name, what) {
  const found = map.get(name);
  if (found === undefined) throw new DriverError("not_found", `no ${what} named ${JSON.stringify(name)}`);
  return found;
}

async function call(method, a) {
  switch (method) {
    case "acquire":
      return grant(await client.acquire(a.key, a.holder, a.ttl_ms));
    case "renew":
      return grant(await client.renew(a.key, a.holder, a.revision, a.ttl_ms));
    case "release":
      return released(await client.release(a.key, a.holder, a.revision));
    case "owner":
      return owner(await client.owner(a.key));
    case "transfer":
      return grant(await client.transfer(a.key, a.holder, a.revision, a.to, a.ttl_ms));
    case "list":
      return list(await client.list({ prefix: a.prefix, after: a.after, limit: a.limit }));
    case "forward": {
      const payload = new Uint8Array(Buffer.from(a.payload_b64 ?? "", "base64"));
      const reply =
        a.timeout_ms === null || a.timeout_ms === undefined
          ? await client.forward(a.key, payload)
          : await client.forward(a.key, payload, a.timeout_ms);
      return { payload_b64: Buffer.from(reply).toString("base64") };
    }
    default:
      throw new DriverError("bad_request", `unknown method ${JSON.stringify(method)}`);
  }
}

function startKeeper(r) {
  if (keepers.has(r.keeper)) throw new DriverError("bad_request", `keeper ${r.keeper} exists`);
  const keeper = LeaseKeeper.start(client, { key: r.key, holder: r.holder, ttlMs: r.ttl_ms, wait: r.wait });
  keepers.set(r.keeper, keeper);
  const changes = keeper.changes();
  void (async () => {
    for await (const o of changes) {
      write({ event: "ownership", keeper: r.keeper, owner: o.owner, fence: o.fence, tenure: o.tenure });
    }
  })();
  return {};
}

function tenureOf(tenures) {
  if (tenures?.keeper !== undefined) {
    const keeper = named(keepers, tenures.keeper, "keeper");
    return (key) => (key === keeper.key ? keeper.tenure() : null);
  }
  if (tenures?.fixed !== undefined) {
    const fixed = new Map(Object.entries(tenures.fixed));
    return (key) => fixed.get(key) ?? null;
  }
  throw new DriverError("bad_request", "tenures must be {keeper} or {fixed}");
}

const LARGE = new Uint8Array(1_000_000).fill("x".charCodeAt(0));

function handlerFor(name, mode) {
  const modes = {
    echo: (payload) => new Uint8Array([...new TextEncoder().encode("echo:"), ...payload]),
    hang: () => new Promise(() => {}),
    large: () => LARGE,
  };
  const reply = modes[mode];
  if (reply === undefined) throw new DriverError("bad_request", `unknown inbox mode ${JSON.stringify(mode)}`);
  return (request) => {
    write({
      event: "inbox",
      inbox: name,
      key: request.key,
      fence: request.fence,
      payload_b64: Buffer.from(request.payload).toString("base64"),
    });
    return reply(request.payload);
  };
}

async function serve(r) {
  if (inboxes.has(r.inbox)) throw new DriverError("bad_request", `inbox ${r.inbox} exists`);
  const inbox = await serveInbox(nc, r.holder, tenureOf(r.tenures), handlerFor(r.inbox, r.mode));
  inboxes.set(r.inbox, inbox);
  return {};
}

function admit(r) {
  let gate = gates.get(r.gate);
  if (gate === undefined) {
    gate = new FenceGate();
    gates.set(r.gate, gate);
  }
  gate.admit(r.fence);
  return {};
}

async function shutdown() {
  await Promise.allSettled([...keepers.values()].map((keeper) => keeper.stop()));
  await Promise.allSettled([...inboxes.values()].map((inbox) => inbox.stop()));
  await nc.close();
  process.exit(0);
}

async function handle(r) {
  switch (r.op) {
    case "call":
      return call(r.method, r.args ?? {});
    case "keeper.start":
      return startKeeper(r);
    case "keeper.state": {
      const keeper = named(keepers, r.keeper, "keeper");
      return { fence: keeper.fence(), tenure: keeper.tenure() };
    }
    case "keeper.wait_owner":
      return { fence: await named(keepers, r.keeper, "keeper").waitOwner(r.timeout_ms) };
    case "keeper.hand_off":
      return grant(await named(keepers, r.keeper, "keeper").handOff(r.to));
    case "keeper.stop":
      await named(keepers, r.keeper, "keeper").stop();
      return {};
    case "inbox.serve":
      return serve(r);
    case "inbox.stop":
      await named(inboxes, r.inbox, "inbox").stop();
      return {};
    case "gate.admit":
      return admit(r);
    default:
      throw new DriverError("bad_request", `unknown op ${JSON.stringify(r.op)}`);
  }
}

write({ ready: true, library: "typescript", version });

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() === "") return;
  let request;
  try {
    request = JSON.parse(line);
  } catch (err) {
    write({ id: null, error: errorOf(new DriverError("bad_request", `not JSON: ${err.message}`)) });
    return;
  }
  if (request.op === "exit") {
    write({ id: request.id, ok: {} });
    void shutdown();
    return;
  }
  void (async () => {
    try {
      write({ id: request.id, ok: await handle(request) });
    } catch (err) {
      write({ id: request.id, error: errorOf(err) });
    }
  })();
});
lines.on("close", () => void shutdown());
