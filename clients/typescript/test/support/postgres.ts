/**
 * A real PostgreSQL for the fencing test: Debian's binaries, `initdb` into
 * a temp dir, `postgres` on a free loopback port with its socket in that
 * dir and trust authentication, stopped and removed after. PostgreSQL
 * refuses to run as root, so as root it runs as `nobody` (setpriv), its
 * dir handed over to that user.
 */

import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import pg from "pg";

import { Child, freePort, required } from "./processes.js";
import { eventually } from "./wait.js";

const NOBODY = 65534;

/** Runs `command` as `nobody` when this process is root, else as itself. */
function unprivileged(command: string, args: string[]): [string, string[]] {
  if (process.getuid?.() !== 0) return [command, args];
  return ["setpriv", ["--reuid", String(NOBODY), "--regid", String(NOBODY), "--clear-groups", command, ...args]];
}

/** A PostgreSQL server of the test's own. */
export class Postgres {
  readonly port: number;
  readonly #child: Child;
  readonly #dir: string;

  private constructor(port: number, child: Child, dir: string) {
    this.port = port;
    this.#child = child;
    this.#dir = dir;
  }

  /** Initialises a cluster in a temp dir and starts it; ready once it accepts a query. */
  static async start(): Promise<Postgres> {
    const bin = process.env["PG_BIN_DIR"] ?? "/usr/lib/postgresql/15/bin";
    const initdb = required(join(bin, "initdb"), "install Debian's postgresql-15 (scripts/test does), or set PG_BIN_DIR");
    const dir = mkdtempSync(join(tmpdir(), "dagnats-ts-pg-"));
    if (process.getuid?.() === 0) {
      chownSync(dir, NOBODY, NOBODY);
      chmodSync(dir, 0o700);
    }
    const data = join(dir, "data");
    const [init, initArgs] = unprivileged(initdb, ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
    execFileSync(init, initArgs, { stdio: "pipe" });
    const port = await freePort();
    const [postgres, args] = unprivileged(join(bin, "postgres"), [
      "-D", data,
      "-p", String(port),
      "-k", dir,
      "-c", "listen_addresses=127.0.0.1",
      "-c", "fsync=off",
    ]);
    const child = new Child(postgres, args);
    const server = new Postgres(port, child, dir);
    await eventually(
      async () => {
        const client = server.client();
        try {
          await client.connect();
          await client.query("SELECT 1");
          return true;
        } catch {
          return false;
        } finally {
          await client.end().catch(() => {});
        }
      },
      { timeoutMs: 20_000, what: () => `PostgreSQL on ${port}: ${child.output}` },
    );
    return server;
  }

  /** The connection settings of a client (the `pg` module's). */
  get config(): pg.ClientConfig {
    return { host: "127.0.0.1", port: this.port, user: "postgres", database: "postgres" };
  }

  /** A new, unconnected client. */
  client(): pg.Client {
    return new pg.Client(this.config);
  }

  /** Fast shutdown (SIGINT), then the temp dir goes. */
  async stop(): Promise<void> {
    this.#child.process.kill("SIGINT");
    const timer = setTimeout(() => this.#child.process.kill("SIGKILL"), 10_000);
    await this.#child.exited;
    clearTimeout(timer);
    rmSync(this.#dir, { recursive: true, force: true });
  }
}
