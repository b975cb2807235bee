/**
 * The package as a user gets it: `npm pack`, the tarball installed into a
 * project of its own, then imported from there, at run time and by the
 * TypeScript compiler.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { withStack } from "./support/context.js";
import { PACKAGE_ROOT } from "./support/processes.js";

const npm = (args: string[], cwd: string): string =>
  execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

/** The version of a package this one's lock file pins. */
function locked(name: string): string {
  const lock = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version: string }>;
  };
  return lock.packages[`node_modules/${name}`]!.version;
}

const CONSUMER_JS = `
import * as everything from "dagnats-leases";
import { LeaseClient } from "dagnats-leases";
import { connect } from "@nats-io/transport-node";

const deep = await import("dagnats-leases/lib/keeper.js").then(() => "importable", (err) => err.code);
const nc = await connect({ servers: process.env.NATS_URL });
const grant = await new LeaseClient(nc).acquire("packaged", "consumer", 1000);
await nc.close();
console.log(JSON.stringify({ names: Object.keys(everything).sort(), deep, granted: grant.granted, holder: grant.holder }));
`;

const CONSUMER_TS = `
import { LeaseClient, LeaseError, LeaseKeeper, serveInbox, type Grant, type Ownership } from "dagnats-leases";
// @ts-expect-error no default export
import leases from "dagnats-leases";
import { connect } from "@nats-io/transport-node";

const nc = await connect({ servers: "127.0.0.1:4222" });
const client = new LeaseClient(nc, { timeoutMs: 2_000 });
const grant: Grant = await client.acquire("k", "h", 15_000);
const fence: number = grant.revision;
const expires: string = grant.expires_at;
// @ts-expect-error replies carry the wire's field names
grant.expiresAt;
await using keeper = LeaseKeeper.start(client, { key: "k", holder: "h", ttlMs: 15_000, wait: true });
const now: number | null = keeper.fence();
// @ts-expect-error fence() may be null
const sure: number = keeper.fence();
for await (const ownership of keeper.changes()) {
  const o: Ownership = ownership;
  if (o.owner) o.fence.toFixed();
}
const inbox = await serveInbox(nc, "h", (key) => (key === keeper.key ? keeper.tenure() : null), (r) => r.payload);
await inbox.stop();
try {
  await client.forward("k", new Uint8Array([1]));
} catch (err) {
  if (err instanceof LeaseError) console.log(err.kind, err.holder, err.revision);
}
void [fence, expires, now, sure, leases];
`;

describe("packaging", () => {
  const context = withStack();
  let project: string;
  let tarball: string;
  let packedFiles: string[] = [];

  before(() => {
    project = mkdtempSync(join(tmpdir(), "dagnats-ts-consumer-"));
    const [packed] = JSON.parse(npm(["pack", "--ignore-scripts", "--json", "--pack-destination", project], PACKAGE_ROOT)) as {
      filename: string;
      files: { path: string }[];
    }[];
    tarball = join(project, packed!.filename);
    packedFiles = packed!.files.map((file) => file.path).sort();
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    npm(
      [
        "install",
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        tarball,
        `@nats-io/transport-node@${locked("@nats-io/transport-node")}`,
        `@types/node@${locked("@types/node")}`,
      ],
      project,
    );
  });

  after(() => {
    rmSync(project, { recursive: true, force: true });
  });

  test("the tarball holds the built library, its declarations, sources and README, and no tests", () => {
    for (const file of ["package.json", "README.md", "lib/mod.js", "lib/mod.d.ts", "lib/keeper.js", "src/keeper.ts"]) {
      assert.ok(packedFiles.includes(file), `${file} is not packed: ${packedFiles.join(", ")}`);
    }
    for (const file of packedFiles) {
      assert.ok(/^(package\.json|README\.md|lib\/|src\/)/.test(file), `${file} is packed`);
    }
  });

  test("the installed package imports by name, exports exactly its public names, and works", () => {
    writeFileSync(join(project, "consumer.mjs"), CONSUMER_JS);
    const output = execFileSync(process.execPath, ["consumer.mjs"], {
      cwd: project,
      encoding: "utf8",
      env: { ...process.env, NATS_URL: context.stack.nats.url },
    });
    assert.deepEqual(JSON.parse(output), {
      names: ["FenceGate", "LeaseClient", "LeaseError", "LeaseKeeper", "StaleFence", "serveInbox"],
      deep: "ERR_PACKAGE_PATH_NOT_EXPORTED",
      granted: true,
      holder: "consumer",
    });
  });

  test("the installed declarations type-check a user's program under strict NodeNext", () => {
    writeFileSync(join(project, "consumer.ts"), CONSUMER_TS);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022", "ESNext.Disposable"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          noEmit: true,
          types: ["node"],
          skipLibCheck: true,
        },
        files: ["consumer.ts"],
      }),
    );
    const tsc = join(PACKAGE_ROOT, "node_modules/typescript/bin/tsc");
    try {
      execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: project, encoding: "utf8", stdio: "pipe" });
    } catch (err) {
      const { stdout } = err as { stdout: string };
      assert.fail(`the consumer does not type-check:\n${stdout}`);
    }
  });
});
