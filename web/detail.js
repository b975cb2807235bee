// A key's detail, a modal dialog opened from its row or from one of its
// timeline segments (Escape closes it, and the focus goes back where it
// was): the lease as the gateway has it, the key's past tenures from the
// history with the live ones joined on, forward to the owner, revoke.

import { $, ago, stamp } from './format.js';
import { api } from './api.js';
import * as table from './table.js';
import { fetchHistory, join, liveTenures } from './tenures.js';

const TENURES_SHOWN = 100;

let key = null;
let highlight = null; // the fence of the tenure opened from the timeline
let history = { tenures: [], capped: false, error: null, loading: false };
let controller = null;
let opener = null; // () => the element to focus again on close

export function openKey(k, fence = null, back = null) {
  key = k;
  highlight = fence;
  opener = back;
  $('forward-reply').textContent = '';
  $('revoke-result').textContent = '';
  history = { tenures: [], capped: false, error: null, loading: true };
  render();
  if (!$('detail').open) {
    $('detail').showModal();
    // The title takes the focus, not the first button, which the Enter
    // that opened the dialog would otherwise go on to press.
    $('detail-title').focus();
  }
  load(k);
}

async function load(k) {
  if (controller) controller.abort();
  controller = new AbortController();
  const signal = controller.signal;
  try {
    const got = await fetchHistory({ key: k, max: TENURES_SHOWN }, signal);
    if (key === k) history = { ...got, error: null, loading: false };
  } catch (err) {
    if (signal.aborted) return;
    if (key === k) history = { tenures: [], capped: false, error: err.message, loading: false };
  }
  render();
}

// Redraws the open dialog when one of its key's changes arrives.
export function changed(k) {
  if (key === k && $('detail').open) render();
}

function ending(t, held) {
  if (t.end) return t.end;
  if (t.to === null) return held ? 'still held' : 'ended';
  return 'ended';
}

function render() {
  const now = Date.now();
  const lease = table.lease(key);
  $('detail-title').textContent = key;
  $('detail-lease').textContent = lease ? JSON.stringify(lease, null, 2) : 'Nobody holds this key.';
  const all = join(history.tenures, liveTenures((k) => k === key).get(key) || []).reverse();
  const body = $('detail-tenures').tBodies[0];
  const rows = all.slice(0, TENURES_SHOWN).map((t, i) => {
    const tr = document.createElement('tr');
    const open = t.to === null && i === 0 && Boolean(lease);
    const fence = t.tenure ?? t.latest;
    const cells = [
      t.holder, stamp(t.from), open ? 'now' : t.to === null ? '—' : stamp(t.to), ending(t, open),
      t.renewals ?? '—', `${fence}` + (t.endRevision ? ` → ${t.endRevision}` : ''), ago((t.to ?? now) - t.from),
    ];
    for (const [j, text] of cells.entries()) {
      const td = document.createElement(j === 0 ? 'th' : 'td');
      if (j === 0) td.scope = 'row';
      td.textContent = text;
      tr.append(td);
    }
    Object.assign(tr.dataset, { holder: t.holder, fence, end: t.end || (open ? 'held' : '') });
    if (highlight !== null && fence === highlight) {
      tr.className = 'current';
      tr.setAttribute('aria-current', 'true');
    }
    return tr;
  });
  body.replaceChildren(...rows);
  let note = '';
  if (history.loading) note = 'Loading the history of this key…';
  else if (history.error) note = `The history could not be read: ${history.error}. Shown: what this page saw live.`;
  else if (!all.length) note = 'No tenure of this key in the history.';
  else if (history.capped || all.length > TENURES_SHOWN) note = `The newest ${Math.min(all.length, TENURES_SHOWN)} tenures.`;
  $('detail-tenures-note').textContent = note;
  $('detail-tenures').setAttribute('aria-busy', String(history.loading));
  body.querySelector('tr.current')?.scrollIntoView({ block: 'nearest' });
}

function toBase64(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}
function fromBase64(b64) {
  const binary = atob(b64);
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

export function init() {
  $('forward').addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { payload: toBase64($('forward-payload').value), timeout_ms: Number($('forward-timeout').value) };
    const { status, data } = await api('POST', `/v1/leases/${encodeURIComponent(key)}/forward`, body);
    $('forward-reply').textContent = status === 200
      ? `${data.holder} (fence ${data.revision}) replied:\n${fromBase64(data.payload)}`
      : `${data.kind}: ${data.error}`;
  });
  $('revoke').addEventListener('click', async () => {
    if (!confirm(`Revoke the lease on ${key}? Its holder's fence becomes stale.`)) return;
    const { status, data } = await api('DELETE', `/v1/leases/${encodeURIComponent(key)}`);
    $('revoke-result').textContent = status === 200
      ? `Revoked: the key is free at fence ${data.revision}.`
      : `${data.kind}: ${data.error}`;
  });
  $('detail').addEventListener('close', () => {
    if (controller) controller.abort();
    key = null;
    const back = opener && opener();
    opener = null;
    if (back) back.focus();
  });
}
