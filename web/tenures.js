// Tenures: one holder's hold of a key, from the acquire or transfer that
// gave it the key to its end (docs/protocol.md, Tenure history). The
// timeline, the shard groups and the detail view all draw them, from two
// sources joined: the gateway's history (GET /v1/history) for a past
// window, and the changes this page has seen live, so a tenure still open
// goes on growing and one that starts after the history was read appears.
//
// A tenure here: {key, holder, tenure, latest, from, to, end, endRevision,
// renewals, previous}; `to` and `end` are null while it lasts, `previous`
// is the holder a transfer took it from when known, `renewals` null when
// unknown.

import { api } from './api.js';
import { seen } from './changes.js';
import * as table from './table.js';

const PAGE = 1000;
// What one window may fetch; past it the newest are kept and the page says
// so. `?history-cap=N` in the page's address lowers or raises it (a slow
// machine, a deep look back).
const DEFAULT_CAP = 10_000;
const asked = Number(new URLSearchParams(location.search).get('history-cap'));
export const CAP = Number.isInteger(asked) && asked >= 1 && asked <= 100_000 ? asked : DEFAULT_CAP;

export function fromRecord(r) {
  return {
    key: r.key, holder: r.holder, tenure: r.tenure, latest: r.end_revision ?? r.tenure,
    from: Date.parse(r.acquired_at), to: r.ended_at ? Date.parse(r.ended_at) : null,
    end: r.end, endRevision: r.end_revision, renewals: r.renewals, previous: null,
  };
}

// Pages of `/v1/history` (or one key's) for [since, until], newest first,
// until the last page or `max`; `onPage` sees the tenures so far.
export async function fetchHistory({ key, since, until, max = CAP }, signal, onPage) {
  const tenures = [];
  let before = null;
  do {
    const query = new URLSearchParams({ limit: String(Math.min(PAGE, max - tenures.length)) });
    if (since !== undefined) query.set('since', new Date(since).toISOString());
    if (until !== undefined) query.set('until', new Date(until).toISOString());
    if (before) query.set('before', before);
    const path = key === undefined ? '/v1/history' : `/v1/leases/${encodeURIComponent(key)}/history`;
    const { status, data } = await api('GET', `${path}?${query}`, undefined, signal);
    if (status !== 200) throw new Error(`${data.kind || status}: ${data.error || 'no history'}`);
    tenures.push(...data.tenures.map(fromRecord));
    before = data.next;
    if (onPage) onPage(tenures);
  } while (before && tenures.length < max);
  return { tenures, capped: Boolean(before) };
}

// The end of a tenure that began before the page opened; its start is
// known when the page held the lease.
const ENDS_ONLY = { tenure: null, latest: null, from: null, renewals: null, previous: null, endsOnly: true };

// What the page has seen live, per key, oldest first: the seen changes,
// then the held leases for keys whose tenure began before the page saw it.
export function liveTenures(wanted = () => true) {
  const lanes = new Map(); // key -> {open, done: []}
  const lane = (key) => {
    let l = lanes.get(key);
    if (!l) lanes.set(key, (l = { open: null, done: [] }));
    return l;
  };
  const close = (l, at, end, endRevision) => {
    if (l.open) l.done.push({ ...l.open, to: at, end, endRevision });
    l.open = null;
  };
  for (const e of seen) {
    if (!wanted(e.key)) continue;
    const l = lane(e.key);
    if (e.event === 'acquired' || (e.event === 'renewed' && !l.open)) {
      // An acquire over an open tenure: a transfer, or an end not seen.
      close(l, e.at, e.previous ? 'transferred' : null, e.previous ? e.revision : null);
      const acquired = e.event === 'acquired';
      l.open = {
        key: e.key, holder: e.holder, tenure: acquired ? e.revision : null, latest: e.revision,
        from: acquired ? e.since ?? e.at : e.since, to: null, end: null, endRevision: null,
        renewals: acquired ? 0 : null, previous: e.previous,
      };
    } else if (e.event === 'renewed') {
      l.open.latest = e.revision;
      if (l.open.renewals !== null) l.open.renewals += 1;
    } else if (e.event === 'released' || e.event === 'expired') {
      // An end whose start the page never saw ends a tenure of the history.
      if (!l.open) l.done.push({ ...ENDS_ONLY, key: e.key, holder: e.holder, latest: e.held, from: e.since, to: e.at, end: e.event, endRevision: e.revision });
      close(l, e.at, e.event, e.revision);
    }
  }
  for (const lease of table.leases()) {
    if (!wanted(lease.key)) continue;
    const l = lane(lease.key);
    const since = Date.parse(lease.acquired_at);
    if (!l.open) {
      l.open = {
        key: lease.key, holder: lease.holder, tenure: null, latest: lease.revision, from: since,
        to: null, end: null, endRevision: null, renewals: null, previous: null,
      };
    }
    if (l.open.holder === lease.holder) {
      l.open.latest = Math.max(l.open.latest, lease.revision);
      if (l.open.from === null) l.open.from = since;
    }
  }
  const out = new Map();
  for (const [key, l] of lanes) out.set(key, l.open ? l.done.concat([l.open]) : l.done);
  return out;
}

// One tenure as both sources know it: the same tenure number, or the
// same holder since the same moment.
function same(a, b) {
  return (a.tenure !== null && a.tenure === b.tenure) || (a.holder === b.holder && a.from === b.from);
}

// The history's tenures of a key with the live ones joined on, oldest
// first. The history knows the start, the renewals and how a tenure
// ended; the page knows what happened since the history was read.
export function join(history, live) {
  const out = history.map((t) => ({ ...t }));
  for (const t of live) {
    if (t.endsOnly) {
      const open = out.find((h) => (t.from !== null && same(h, t)) ||
        (h.to === null && h.from <= t.to && (!t.holder || h.holder === t.holder)));
      if (open && open.to === null) Object.assign(open, { to: t.to, end: t.end, endRevision: t.endRevision });
      // Its start is known from the lease the page held: drawn whole.
      else if (!open && t.from !== null) out.push({ ...t, endsOnly: false });
      continue;
    }
    const known = out.find((h) => same(h, t));
    if (!known) { out.push({ ...t }); continue; }
    known.latest = Math.max(known.latest ?? 0, t.latest ?? 0);
    if (known.previous === null) known.previous = t.previous;
    if (known.to === null && t.to !== null) {
      Object.assign(known, { to: t.to, end: t.end, endRevision: t.endRevision ?? known.endRevision });
    }
  }
  out.sort((a, b) => (a.from ?? 0) - (b.from ?? 0) || (a.tenure ?? 0) - (b.tenure ?? 0));
  // A tenure whose end the history has not written yet ends where the
  // next one of the key begins.
  for (let i = 0; i + 1 < out.length; i++) {
    if (out[i].to === null) out[i].to = out[i + 1].from;
    if (out[i + 1].previous === null && out[i].end === 'transferred') out[i + 1].previous = out[i].holder;
  }
  return out;
}

// A tenure the history has open but the listing the page read since does
// not hold (the history's writer is behind, or the page missed the end
// while its stream was down) has ended by the time of that listing.
function endUnheld(key, list) {
  const last = list.at(-1);
  const listed = table.listedAt();
  if (!last || last.to !== null || last.tenure === null || listed === null || listed <= last.from) return;
  const lease = table.lease(key);
  if (lease && lease.holder === last.holder && Date.parse(lease.acquired_at) === last.from) return;
  last.to = listed;
}

// Per key, history joined with live: the tenures the page knows of.
export function joinAll(history, live) {
  const byKey = new Map();
  for (const t of history) {
    if (!byKey.has(t.key)) byKey.set(t.key, []);
    byKey.get(t.key).push(t);
  }
  const out = new Map();
  for (const key of new Set([...byKey.keys(), ...live.keys()])) {
    const list = join(byKey.get(key) || [], live.get(key) || []);
    endUnheld(key, list);
    out.set(key, list);
  }
  return out;
}
