/**
 * Real processes for the tests: nats-server and the dagnats-leases
 * gateway, each on a free loopback port with a temp store, stopped after.
 * A missing binary fails the test with the variable that names it; no
 * test is ever skipped for it.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { eventually } from "./wait.js";

/** The package's folder (this file is built into build/support/). */
export const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** The repository's root. */
export const REPO_ROOT = resolve(PACKAGE_ROOT, "../..");

/** `path`, or a failure saying what to do when it does not exist. */
export function required(path: string, hint: string): string {
  if (!existsSync(path)) {
    throw new Error(`${path} does not exist: ${hint}`);
  }
  return path;
}

/** The binary `variable` names, or the repository's default; throws when it is not there. */
export function binary(variable: string, fallback: string): string {
  const path = process.env[variable] ?? resolve(REPO_ROOT, fallback);
  return required(path, `set ${variable} to the binary (scripts/clients/typescript prepare installs it)`);
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address !== null ? done(address.port) : fail(new Error("no port"))));
    });
  });
}

async function accepts(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = new Socket();
    socket.once("connect", () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(false));
    socket.connect(port, "127.0.0.1");
  });
}

const running = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** A child process of the test, with its output kept for failure reports. */
export class Child {
  readonly process: ChildProcess;
  output = "";
  readonly exited: Promise<number | null>;
  #stdout = "";
  #read = 0;
  readonly #unread: unknown[] = [];

  constructor(command: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) {
    this.process = spawn(command, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ["pipe", "pipe", "pipe"],
    });
    running.add(this.process);
    this.process.stdout?.on("data", (chunk: Buffer) => {
      this.output += chunk.toString();
      this.#stdout += chunk.toString();
    });
    this.process.stderr?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((done) => {
      this.process.once("exit", (code) => {
        running.delete(this.process);
        done(code);
      });
      this.process.once("error", (err) => {
        this.output += String(err);
        running.delete(this.process);
        done(null);
      });
    });
  }

  /**
   * The first JSON line on stdout that `matches` and no earlier call took,
   * waited for up to `timeoutMs`; lines that do not match stay for later calls.
   */
  async nextJson<T>(matches: (line: T) => boolean, timeoutMs: number, what: string): Promise<T> {
    return eventually(
      () => {
        const lines = this.#stdout.split("\n");
        for (; this.#read < lines.length - 1; this.#read++) {
          try {
            this.#unread.push(JSON.parse(lines[this.#read]!));
          } catch {
            // not a JSON line: a log line of the child
          }
        }
        const found = this.#unread.findIndex((line) => matches(line as T));
        return found < 0 ? null : { line: this.#unread.splice(found, 1)[0] as T };
      },
      { timeoutMs, what: () => `${what}: ${this.output}` },
    ).then(({ line }) => line);
  }

  /** Writes one line to the child's stdin. */
  send(line: object): void {
    this.process.stdin?.write(`${JSON.stringify(line)}\n`);
  }

  /** SIGSTOP: the process freezes, timers and all. */
  pause(): void {
    this.process.kill("SIGSTOP");
  }

  /** SIGCONT. */
  resume(): void {
    this.process.kill("SIGCONT");
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 3_000): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return;
    this.process.kill("SIGCONT");
    this.process.kill("SIGTERM");
    const timer = setTimeout(() => this.process.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** A nats-server with JetStream on a free loopback port and a temp store. */
export class NatsServer {
  readonly url: string;
  readonly child: Child;
  readonly #dir: string;

  private constructor(url: string, child: Child, dir: string) {
    this.url = url;
    this.child = child;
    this.#dir = dir;
  }

  /** Starts one, ready when its port accepts connections. */
  static async start(): Promise<NatsServer> {
    const bin = binary("NATS_SERVER_BIN", ".tools/nats/bin/nats-server");
    const dir = mkdtempSync(join(tmpdir(), "dagnats-ts-nats-"));
    const port = await freePort();
    const child = new Child(bin, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", dir]);
    const server = new NatsServer(`nats://127.0.0.1:${port}`, child, dir);
    await eventually(() => accepts(port), { timeoutMs: 10_000, what: () => `nats-server on ${port}: ${child.output}` });
    return server;
  }

  /** Stops it and removes its store. */
  async stop(): Promise<void> {
    await this.child.stop();
    rmSync(this.#dir, { recursive: true, force: true });
  }
}

/** The dagnats-leases gateway on a NATS server, its HTTP front on a free loopback port. */
export class Gateway {
  readonly child: Child;
  readonly httpUrl: string;

  private constructor(child: Child, httpUrl: string) {
    this.child = child;
    this.httpUrl = httpUrl;
  }

  /** Starts one on `natsUrl`, ready when `/readyz` answers 200 (the bucket is ready). */
  static async start(natsUrl: string): Promise<Gateway> {
    const bin = binary("DAGNATS_LEASES_BIN", "target/debug/dagnats-leases");
    const child = new Child(bin, ["serve", "--nats-url", natsUrl, "--http-addr", "127.0.0.1:0"], {
      env: { ...process.env, DAGNATS_LOG: "info", DAGNATS_LOG_FORMAT: "text", DAGNATS_SHUTDOWN_GRACE_MS: "1000" },
    });
    const address = await eventually(
      () => /HTTP listening on (127\.0\.0\.1:\d+)/.exec(child.output)?.[1] ?? null,
      { timeoutMs: 10_000, what: () => `the gateway's HTTP address: ${child.output}` },
    );
    const gateway = new Gateway(child, `http://${address}`);
    await eventually(
      async () => {
        const reply = await fetch(`${gateway.httpUrl}/readyz`).catch(() => null);
        return reply?.status === 200;
      },
      { timeoutMs: 20_000, what: () => `the gateway's /readyz: ${child.output}` },
    );
    return gateway;
  }

  /** Stops it. */
  async stop(): Promise<void> {
    await this.child.stop();
  }
}

/** nats-server and a gateway on it: what most tests run against. */
export interface Stack {
  readonly nats: NatsServer;
  readonly gateway: Gateway;
  stop(): Promise<void>;
}

/** Starts nats-server, then the gateway on it. */
export async function startStack(): Promise<Stack> {
  const nats = await NatsServer.start();
  try {
    const gateway = await Gateway.start(nats.url);
    return {
      nats,
      gateway,
      stop: async () => {
        await gateway.stop();
        await nats.stop();
      },
    };
  } catch (err) {
    await nats.stop();
    throw err;
  }
}
