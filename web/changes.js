// The changes this page has seen: the gateway's recent ones when it
// opened, then the live stream's. They make the event log and the live
// part of the timeline.

import { $, clock } from './format.js';
import * as table from './table.js';

const KEEP = 5000;
const LOG_MAX = 300;

// {event, key, revision, holder, previous, since, held, at}, oldest first.
export const seen = [];

function entryOf(event, data) {
  // A release names no start: the lease the page holds for the key does.
  const acquiredAt = data.acquired_at || data.lease?.acquired_at || table.lease(data.key)?.acquired_at;
  return {
    event, key: data.key, revision: data.revision,
    holder: data.holder || table.lease(data.key)?.holder || null,
    previous: data.previous_holder || null,
    since: acquiredAt ? Date.parse(acquiredAt) : null,
    held: table.lease(data.key)?.revision ?? null, // the revision the page showed until this change
    at: data.at ? Date.parse(data.at) : Date.now(),
  };
}

function trim() {
  if (seen.length > KEEP) seen.splice(0, seen.length - KEEP);
}

// A live change, logged at the top.
export function record(event, data) {
  const entry = entryOf(event, data);
  seen.push(entry);
  trim();
  logLine(entry, false);
  return entry;
}

// The gateway's recent changes (`/v1/events/recent`), older than any live
// one the stream may already have brought: they go before them, once.
export function recordRecent(events) {
  const known = new Set(seen.map((e) => `${e.key} ${e.revision} ${e.event}`));
  const older = events.map((e) => entryOf(e.event, e)).filter((e) => !known.has(`${e.key} ${e.revision} ${e.event}`));
  seen.unshift(...older);
  trim();
  for (const entry of older.reverse()) logLine(entry, true);
}

function logLine(entry, older) {
  const li = document.createElement('li');
  const kind = entry.previous ? 'transferred' : entry.event;
  li.className = 'ev-' + kind;
  li.dataset.event = kind;
  li.hidden = kind === 'renewed' && $('hide-renewed').checked;
  li.textContent = entry.previous
    ? `${clock(entry.at)} transfer ${entry.key}: ${entry.previous} → ${entry.holder} at fence ${entry.revision}`
    : `${clock(entry.at)} ${entry.event.padEnd(8)} ${entry.key} ` +
      (entry.holder ? `holder=${entry.holder} ` : '') + `fence=${entry.revision}`;
  const log = $('log');
  if (older) log.append(li); else log.prepend(li);
  while (log.childElementCount > LOG_MAX) log.lastElementChild.remove();
}

export function hideRenewals(hide) {
  for (const li of $('log').children) li.hidden = hide && li.dataset.event === 'renewed';
}
