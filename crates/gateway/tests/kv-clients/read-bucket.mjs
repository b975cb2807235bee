// Reads the `leases` bucket as a user of the official KV client would:
// its keys, a watch of every key's current value, and a get of each key
// seen and of the barrier keys earlier gateways wrote. Prints one JSON
// object: {"keys": [...], "watched": [{"key", "operation"}], "gets": {key:
// operation or null}}. Usage: node read-bucket.mjs NATS_URL
import { connect } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";

const nc = await connect({ servers: process.argv[2] });
const kv = await new Kvm(nc).open("leases");

const keys = [];
for await (const key of await kv.keys()) {
  keys.push(key);
}

// The watch first delivers every key's current value; `delta` counts the
// ones still to come.
const watched = [];
for await (const entry of await kv.watch()) {
  watched.push({ key: entry.key, operation: entry.operation });
  if (entry.delta === 0) {
    break;
  }
}

const gets = {};
const asked = [...keys, ...watched.map((e) => e.key), "_dagnats.read", "_dagnats.list"];
for (const key of new Set(asked)) {
  gets[key] = (await kv.get(key))?.operation ?? null;
}

console.log(JSON.stringify({ keys, watched, gets }));
await nc.close();
