/**
 * Holder A of the PostgreSQL fencing test, a process of its own so the
 * test can pause it: it keeps the lease with a LeaseKeeper, takes the
 * fence once, and writes through the README's conditional statement with
 * that fence each time it reads `{"write": DATA}` on stdin, printing what
 * the database answered. Like a process paused between its ownership
 * check and its write, it never checks again: only the database stands
 * between its stale fence and the row.
 *
 * Environment: NATS_URL, LEASE_KEY, LEASE_HOLDER, LEASE_TTL_MS,
 * PG_CONFIG (JSON), FENCED_UPDATE (the statement), ROW_ID.
 */

import { createInterface } from "node:readline";

import { connect } from "@nats-io/transport-node";
import { LeaseClient, LeaseKeeper } from "dagnats-leases";
import pg from "pg";

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

function say(line: object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const nc = await connect({ servers: env("NATS_URL") });
const keeper = LeaseKeeper.start(new LeaseClient(nc), {
  key: env("LEASE_KEY"),
  holder: env("LEASE_HOLDER"),
  ttlMs: Number(env("LEASE_TTL_MS")),
});
const fence = await keeper.waitOwner(10_000);
const db = new pg.Client(JSON.parse(env("PG_CONFIG")) as pg.ClientConfig);
await db.connect();
say({ event: "owner", fence });

const lines = createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const { write } = JSON.parse(line) as { write: string };
  void db.query(env("FENCED_UPDATE"), [write, fence, env("ROW_ID")]).then((result) => {
    say({ event: "wrote", data: write, fence, rows: result.rowCount, fenceNow: keeper.fence() });
  });
});
lines.on("close", () => {
  void (async () => {
    await keeper.stop();
    await db.end();
    await nc.close();
  })();
});
