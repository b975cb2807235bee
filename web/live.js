// The live feed: the held leases (`GET /v1/leases`) and one streamed
// connection to `/v1/events`, whose changes are applied in slices of a
// few milliseconds, so a burst of thousands (every lease renewing at
// once) never freezes the page.

import { $ } from './format.js';
import { api, askToken, authHeaders } from './api.js';
import * as changes from './changes.js';
import * as table from './table.js';

const SLICE_MS = 8;
const RETRY_MS = 1000;

let lastId = null;
const queue = [];
let draining = false;
const listeners = [];

// Called with each change applied: (event, entry).
export function onChange(listener) { listeners.push(listener); }
// Called when the stream is back after a drop and the listing read again:
// the page may have missed changes while it was away.
const backListeners = [];
export function onBack(listener) { backListeners.push(listener); }
let dropped = false;

function apply(event, data) {
  const entry = changes.record(event, data);
  if (event === 'acquired' || event === 'renewed') table.upsert(data, event === 'renewed');
  else if (event === 'released' || event === 'expired') table.remove(data.key, data.revision);
  for (const listener of listeners) listener(event, entry);
}

function enqueue(event, data) {
  queue.push([event, data]);
  if (!draining) {
    draining = true;
    setTimeout(drain, 0);
  }
}

function drain() {
  const until = performance.now() + SLICE_MS;
  let done = 0;
  while (done < queue.length && performance.now() < until) {
    const [event, data] = queue[done++];
    apply(event, data);
  }
  queue.splice(0, done);
  if (queue.length) setTimeout(drain, 0);
  else draining = false;
}

function parseSse(chunk) {
  let event = 'message', data = '', id = null;
  for (const line of chunk.split('\n')) {
    if (!line || line.startsWith(':')) continue;
    const at = line.indexOf(':');
    const field = at < 0 ? line : line.slice(0, at);
    const value = at < 0 ? '' : line.slice(at + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'data') data += (data ? '\n' : '') + value;
    else if (field === 'id') id = value;
  }
  if (id) lastId = id;
  if (data) enqueue(event, JSON.parse(data));
}

function setStatus(up) {
  $('status').className = 'status ' + (up ? 'up' : 'down');
  $('status').textContent = up ? 'live' : 'reconnecting…';
}

// The listing, marked for the performance timeline: `dagnats:leases`
// once it is read, `dagnats:leases-shown` once its rows are on the page.
async function loadLeases() {
  const { status, data } = await api('GET', '/v1/leases');
  if (status !== 200) return;
  performance.mark('dagnats:leases');
  table.replaceAll(data.leases);
  await table.rendered();
  if (!performance.getEntriesByName('dagnats:leases-shown').length) performance.mark('dagnats:leases-shown');
}

// The gateway's recent changes, so a fresh page has a past to draw.
export async function loadRecent() {
  const { status, data } = await api('GET', '/v1/events/recent');
  if (status === 200) changes.recordRecent(data.events);
}

// One streamed request (fetch, so the token goes in a header, never the
// URL), subscribed before the listing is read so no change falls between
// them; on any drop, reconnect with Last-Event-ID and read the listing
// again so what changed while away is right again.
export async function stream() {
  for (;;) {
    try {
      const headers = authHeaders();
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch('/v1/events', { headers });
      if (res.status === 401) { await askToken('This gateway needs a read token.'); continue; }
      if (!res.ok || !res.body) throw new Error('events: ' + res.status);
      setStatus(true);
      await loadLeases();
      if (dropped) for (const listener of backListeners) listener();
      dropped = false;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, '\n');
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          parseSse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (err) {
      console.debug('event stream dropped', err);
    }
    setStatus(false);
    dropped = true;
    await new Promise((r) => setTimeout(r, RETRY_MS));
  }
}
