/**
 * The README's examples and the example program, run as written (each
 * pointed at the test's nats-server) against the real gateway.
 */

import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import ts from "typescript";

import { withStack } from "./support/context.js";
import { Child, PACKAGE_ROOT, REPO_ROOT } from "./support/processes.js";
import { eventually } from "./support/wait.js";

/** The ```ts blocks of `readme` that are whole programs (they connect). */
function programs(readme: string): string[] {
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((match) => match[1]!)
    .filter((code) => code.includes("await connect("));
}

/**
 * Writes `code`, pointed at `natsUrl` and compiled from TypeScript, as a
 * module inside the package (so `dagnats-leases` resolves to the build).
 */
function runnable(code: string, natsUrl: string, name: string): string {
  const pointed = code.replaceAll('"127.0.0.1:4222"', JSON.stringify(natsUrl));
  assert.notEqual(pointed, code, `${name} does not connect to "127.0.0.1:4222"`);
  const js = ts.transpileModule(pointed, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const dir = join(PACKAGE_ROOT, "build/examples");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.mjs`);
  writeFileSync(path, js);
  return path;
}

describe("examples", () => {
  const context = withStack();

  test("the README's quick start acquires and releases", async () => {
    const [quickStart] = programs(readFileSync(join(PACKAGE_ROOT, "README.md"), "utf8"));
    assert.ok(quickStart !== undefined);
    const child = new Child(process.execPath, [runnable(quickStart, context.stack.nats.url, "quick-start")]);
    assert.equal(await child.exited, 0, child.output);
    assert.match(child.output, /^leading at fence \d+\n$/);
    assert.deepEqual(await context.leases.owner("notify-leader"), { held: false, key: "notify-leader" });
  });

  test("the README's keeper example leads, then releases at the end of its scope", async () => {
    const [, keeper] = programs(readFileSync(join(PACKAGE_ROOT, "README.md"), "utf8"));
    assert.ok(keeper !== undefined && keeper.includes("LeaseKeeper.start"));
    const child = new Child(process.execPath, [runnable(keeper, context.stack.nats.url, "keeper")]);
    assert.equal(await child.exited, 0, child.output);
    assert.match(child.output, /^leading at fence \d+\n$/);
    assert.deepEqual(await context.leases.owner("notify-leader"), { held: false, key: "notify-leader" });
  });

  test("the repository README's TypeScript example leads, then releases", async () => {
    const readme = readFileSync(join(REPO_ROOT, "README.md"), "utf8");
    const example = /TypeScript, \[`clients\/typescript`\][^\n]*\n\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(example !== undefined, "the repository README has no TypeScript example");
    assert.ok(example.trim().split("\n").length <= 5, "the repository README's example is five lines at most");
    const imports = 'import { connect } from "@nats-io/transport-node";\nimport { LeaseClient, LeaseKeeper } from "dagnats-leases";\n';
    const child = new Child(process.execPath, [runnable(imports + example, context.stack.nats.url, "repository-readme")]);
    assert.equal(await child.exited, 0, child.output);
    assert.match(child.output, /^leading at fence \d+\n$/);
    assert.deepEqual(await context.leases.owner("notify-leader"), { held: false, key: "notify-leader" });
  });

  test("the example program: one process leads and answers forwards, another takes over when it stops", async () => {
    const key = `example-${process.pid}`;
    const env = { ...process.env, NATS_URL: context.stack.nats.url, LEASE_KEY: key };
    const program = join(PACKAGE_ROOT, "examples/leader.mjs");
    const first = new Child(process.execPath, [program], { env });
    await waitForOutput(first, /^leader-\d+ leading /m);
    const second = new Child(process.execPath, [program], { env });
    try {
      await waitForOutput(second, /^leader-\d+ waiting /m);
      const reply = new TextDecoder().decode(await context.leases.forward(key, "hello", 2_000));
      assert.match(reply, new RegExp(`^leader-${first.process.pid} at fence \\d+: hello$`));
      await first.stop();
      const started = performance.now();
      await waitForOutput(second, /^leader-\d+ leading /m);
      assert.ok(performance.now() - started < 2_000, "the waiting process took over after the release, not the TTL");
    } finally {
      await first.stop();
      await second.stop();
    }
  });
});

async function waitForOutput(child: Child, pattern: RegExp): Promise<void> {
  await eventually(() => pattern.test(child.output), { timeoutMs: 10_000, what: () => `${pattern}: ${child.output}` });
}
