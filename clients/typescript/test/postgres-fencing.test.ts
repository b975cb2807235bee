/**
 * The README's "Fence your writes" recipe against a real PostgreSQL: a
 * holder paused past its TTL wakes up and writes with the fence it had,
 * and the database refuses it, leaving the new owner's data in place.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { LeaseKeeper } from "dagnats-leases";

import { withStack } from "./support/context.js";
import { Postgres } from "./support/postgres.js";
import { Child, PACKAGE_ROOT } from "./support/processes.js";
import { uniqueKey } from "./support/wait.js";

const TTL = 2_000;

/** The recipe as the README states it: its table, and its one conditional statement. */
function recipe(): { table: string; update: string } {
  const readme = readFileSync(join(PACKAGE_ROOT, "README.md"), "utf8");
  const table = /```sql\n(CREATE TABLE documents[\s\S]*?)```/.exec(readme)?.[1];
  const update = /"(UPDATE documents SET [^"]*)"/.exec(readme)?.[1];
  assert.ok(table !== undefined && update !== undefined, "the README's recipe is gone");
  return { table, update };
}

interface Wrote {
  event: "wrote";
  data: string;
  fence: number;
  rows: number;
  fenceNow: number | null;
}

describe("Fence your writes (PostgreSQL)", () => {
  const context = withStack();
  let postgres: Postgres;

  before(async () => {
    postgres = await Postgres.start();
  });

  after(async () => {
    await postgres?.stop();
  });

  test("a holder paused past its TTL writes with its old fence and the database refuses it", async () => {
    const { table, update } = recipe();
    const db = postgres.client();
    await db.connect();
    try {
      await db.query(table);
      await db.query("INSERT INTO documents (id, data) VALUES ('doc-1', 'initial')");
      const key = uniqueKey("fenced");
      const holderA = new Child(process.execPath, [join(PACKAGE_ROOT, "build/support/fenced-holder.js")], {
        env: {
          ...process.env,
          NATS_URL: context.stack.nats.url,
          LEASE_KEY: key,
          LEASE_HOLDER: "holder-a",
          LEASE_TTL_MS: String(TTL),
          PG_CONFIG: JSON.stringify(postgres.config),
          FENCED_UPDATE: update,
          ROW_ID: "doc-1",
        },
      });
      try {
        const { fence: fenceA } = await holderA.nextJson<{ event: string; fence: number }>(
          (line) => line.event === "owner",
          10_000,
          "holder A owns the lease",
        );
        holderA.send({ write: "a-1" });
        const first = await holderA.nextJson<Wrote>((line) => line.event === "wrote", 5_000, "A's first write");
        assert.equal(first.rows, 1);

        holderA.pause();
        await using holderB = LeaseKeeper.start(context.leases, { key, holder: "holder-b", ttlMs: TTL });
        const fenceB = await holderB.waitOwner(TTL + 3_000);
        assert.ok(fenceB > fenceA, `B took over at ${fenceB}, A had ${fenceA}`);
        const wroteB = await db.query(update, ["b-1", holderB.fence(), "doc-1"]);
        assert.equal(wroteB.rowCount, 1);

        holderA.resume();
        holderA.send({ write: "a-2" });
        const zombie = await holderA.nextJson<Wrote>((line) => line.event === "wrote", 5_000, "A's write after the pause");
        assert.deepEqual(
          { data: zombie.data, fence: zombie.fence, rows: zombie.rows },
          { data: "a-2", fence: fenceA, rows: 0 },
          "the database refused the write at the old fence",
        );
        assert.equal(zombie.fenceNow, null, "and A's keeper no longer calls it the owner");

        const row = await db.query<{ data: string; fence: string }>("SELECT data, fence FROM documents WHERE id = 'doc-1'");
        assert.deepEqual(row.rows, [{ data: "b-1", fence: String(fenceB) }]);
      } finally {
        holderA.process.stdin?.end();
        await holderA.stop();
      }
    } finally {
      await db.end();
    }
  });
});
