/**
 * What the test files run against: a nats-server, the gateway on it, a
 * connection and a LeaseClient (or a bare nats-server), started before the
 * file's tests and stopped after them; and the assertions on failures
 * they share.
 */

import assert from "node:assert/strict";
import { after, before } from "node:test";

import { connect } from "@nats-io/transport-node";
import { type NatsConnection } from "@nats-io/nats-core";
import { LeaseClient, LeaseError } from "dagnats-leases";

import { NatsServer, startStack, type Stack } from "./processes.js";

/** The servers and the client of one test file. */
export interface StackContext {
  stack: Stack;
  nc: NatsConnection;
  leases: LeaseClient;
}

/** Registers the file's `before` and `after`; the context is filled in once `before` has run. */
export function withStack(): StackContext {
  const context = {} as StackContext;
  before(async () => {
    context.stack = await startStack();
    context.nc = await connect({ servers: context.stack.nats.url });
    context.leases = new LeaseClient(context.nc);
  });
  after(async () => {
    await context.nc?.close();
    await context.stack?.stop();
  });
  return context;
}

/** A bare nats-server (no gateway) and a connection to it. */
export interface NatsContext {
  nats: NatsServer;
  nc: NatsConnection;
}

/** Registers the file's `before` and `after` for a bare nats-server; filled in once `before` has run. */
export function withNats(): NatsContext {
  const context = {} as NatsContext;
  before(async () => {
    context.nats = await NatsServer.start();
    context.nc = await connect({ servers: context.nats.url });
  });
  after(async () => {
    await context.nc?.close();
    await context.nats?.stop();
  });
  return context;
}

/** What `promise` rejected with; fails the test if it resolved. */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (err: unknown) => err,
  );
}

/** Asserts that `err` is a LeaseError of `kind`. */
export function assertKind(err: unknown, kind: string): asserts err is LeaseError {
  assert.ok(err instanceof LeaseError, `expected a LeaseError, got ${String(err)}`);
  assert.equal(err.kind, kind, err.message);
}

/** Asserts that `call` rejects with a LeaseError of `kind`, and returns it. */
export async function failsWith(kind: string, call: Promise<unknown>): Promise<LeaseError> {
  const err = await rejection(call);
  assertKind(err, kind);
  return err;
}
