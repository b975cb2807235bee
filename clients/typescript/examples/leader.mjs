#!/usr/bin/env node
// Leader election with dagnats-leases: every process that runs this
// competes for one lease; the leader answers forwarded requests (send one
// with `LeaseClient.forward(key, payload)` from anywhere), and the others
// wait, woken by the key's change events. SIGINT or SIGTERM releases the
// lease, so a waiting process takes over at once.
//
//   NATS_URL=nats://127.0.0.1:4222 LEASE_KEY=example-leader node examples/leader.mjs

import { connect } from "@nats-io/transport-node";
import { LeaseClient, LeaseKeeper, serveInbox } from "dagnats-leases";

const key = process.env.LEASE_KEY ?? "example-leader";
const holder = `leader-${process.pid}`; // unique per process
const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });

const keeper = LeaseKeeper.start(new LeaseClient(nc), { key, holder, ttlMs: 5_000, wait: true });
const inbox = await serveInbox(
  nc,
  holder,
  (k) => (k === key ? keeper.tenure() : null),
  (request) => `${holder} at fence ${request.fence}: ${new TextDecoder().decode(request.payload)}`,
);
console.log(`${holder} waiting for ${key}`);

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    await inbox.stop();
    await keeper.stop(); // releases: a waiting process takes over now, not after the TTL
    await nc.close();
  });
}

for await (const ownership of keeper.changes()) {
  if (ownership.owner && ownership.fence === ownership.tenure) {
    console.log(`${holder} leading ${key} at fence ${ownership.fence}`);
  } else if (!ownership.owner) {
    console.log(`${holder} not leading ${key}`);
  }
}
