// The held-leases table, virtualised: the model keeps every lease, the
// page only the rows in view and a few either side. Opening it with tens
// of thousands of leases costs a screenful of rows, a filter is one pass
// over an array, and only rows on screen run a clock or an animation.

import { $, ago, left } from './format.js';

const OVERSCAN = 12;
const FLASH_MS = 800;

const entries = new Map(); // key -> {lease, expires, since}
let order = []; // every key, in the sort's order
let orderDirty = false; // order must be sorted again before use
let view = order; // the keys the filter lets through, in order
let viewDirty = false;
let filter = '';
let sortBy = 'key';
const shown = new Map(); // key -> row on the page: {tr, cells, anim, flashTimer}
let rowHeight = 0;
let scheduled = false;
let onOpen = () => {};
const afterRender = [];

const wrap = () => document.querySelector('.table-wrap');
const body = () => $('leases').tBodies[0];

export function matches(key, holder, text = filter) {
  return !text || key.startsWith(text) || (holder || '').includes(text);
}

export function filterText() { return filter; }
// When the page last read the full listing (null before it has).
let listed = null;
export function listedAt() { return listed; }
export function lease(key) { return entries.get(key)?.lease; }
export function size() { return entries.size; }
export function* leases() { for (const e of entries.values()) yield e.lease; }

// Called with a key when its row is opened (click or Enter).
export function onRowOpen(open) { onOpen = open; }

// Resolves once the next render has reached the page.
export function rendered() {
  return new Promise((resolve) => { afterRender.push(resolve); schedule(); });
}

function comparator(now) {
  const byKey = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  if (sortBy === 'holder') {
    return (a, b) => {
      const x = entries.get(a).lease.holder, y = entries.get(b).lease.holder;
      return x < y ? -1 : x > y ? 1 : byKey(a, b);
    };
  }
  if (sortBy === 'left') return (a, b) => (entries.get(a).expires - now) - (entries.get(b).expires - now) || byKey(a, b);
  return byKey;
}

// Where `key` goes in `order` (binary search), for the sorts that do not
// move with the clock.
function position(key) {
  const cmp = comparator(0);
  let lo = 0, hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (cmp(order[mid], key) < 0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function place(key) {
  if (sortBy === 'left' || orderDirty) { order.push(key); orderDirty = true; } else order.splice(position(key), 0, key);
}

function unplace(key) {
  let at = -1;
  if (sortBy !== 'left' && !orderDirty) {
    at = position(key);
    if (order[at] !== key) at = -1;
  }
  if (at < 0) at = order.indexOf(key);
  if (at >= 0) order.splice(at, 1);
}

function entry(lease) {
  return { lease, expires: Date.parse(lease.expires_at), since: Date.parse(lease.acquired_at) };
}

// A held lease, new or newer; an older revision than the one shown is
// ignored. Returns whether its holder changed.
export function upsert(next, renewed) {
  const old = entries.get(next.key);
  if (old && old.lease.revision > next.revision) return false;
  const moved = old?.lease.holder !== next.holder;
  if (old && moved && sortBy === 'holder') unplace(next.key);
  entries.set(next.key, entry(next));
  if (!old || (moved && sortBy === 'holder')) place(next.key);
  if (!old || (moved && (filter || sortBy === 'holder'))) viewDirty = true;
  const row = shown.get(next.key);
  if (row) {
    fill(row, next.key, Date.now());
    if (renewed) flash(row);
  }
  schedule();
  return moved;
}

// The key is free at `revision`; a removal older than the lease shown
// (the key was taken again since) is ignored. Returns whether it went.
export function remove(key, revision) {
  const old = entries.get(key);
  if (!old || (revision !== undefined && old.lease.revision > revision)) return false;
  unplace(key);
  entries.delete(key);
  viewDirty = true;
  schedule();
  return true;
}

// A full listing: every lease in it, unless the page already has a newer
// revision of it, and nothing that is not in it.
export function replaceAll(list) {
  listed = Date.now();
  const fresh = new Map();
  for (const next of list) {
    const old = entries.get(next.key);
    fresh.set(next.key, old && old.lease.revision > next.revision ? old : entry(next));
  }
  entries.clear();
  for (const [key, e] of fresh) entries.set(key, e);
  order = [...entries.keys()];
  orderDirty = true;
  viewDirty = true;
  for (const [key, row] of shown) if (entries.has(key)) fill(row, key, Date.now());
  schedule();
}

export function setFilter(text) {
  if (text === filter) return;
  filter = text;
  viewDirty = true;
  wrap().scrollTop = 0;
  render();
}

export function setSort(by) {
  sortBy = by;
  orderDirty = true;
  render();
}

// The clock: rows on screen count down; a sort by time left is redone.
export function tickAll() {
  const now = Date.now();
  for (const [key, row] of shown) tick(row, entries.get(key), now);
  if (sortBy === 'left') { orderDirty = true; schedule(); }
}

function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(render);
}

function makeRow(key) {
  const tr = document.createElement('tr');
  tr.tabIndex = 0;
  tr.dataset.key = key;
  tr.innerHTML = '<td class="key"></td><td class="holder"></td><td class="fence"></td><td class="held"></td>' +
    '<td class="left"><div class="ttl"><div class="bar"><span></span></div><span class="secs"></span></div></td>';
  const [k, holder, fence, held] = tr.cells;
  k.textContent = key;
  const cells = { holder, fence, held, bar: tr.querySelector('.bar > span'), secs: tr.querySelector('.secs') };
  return { tr, cells, anim: null, flashTimer: null };
}

function fill(row, key, now) {
  const e = entries.get(key);
  row.cells.holder.textContent = e.lease.holder;
  row.cells.fence.textContent = e.lease.revision;
  startBar(row, e, now);
  tick(row, e, now);
}

// The bar counts down on the compositor: no script runs per frame.
function startBar(row, e, now) {
  const remaining = Math.max(0, e.expires - now);
  const fraction = Math.min(1, remaining / e.lease.ttl_ms);
  if (row.anim) row.anim.cancel();
  row.anim = row.cells.bar.animate(
    [{ transform: `scaleX(${fraction})` }, { transform: 'scaleX(0)' }],
    { duration: remaining || 1, fill: 'forwards' });
}

function tick(row, e, now) {
  const remaining = e.expires - now;
  row.cells.held.textContent = ago(now - e.since);
  row.cells.secs.textContent = left(remaining);
  row.tr.classList.toggle('expiring', remaining < e.lease.ttl_ms / 3);
}

// Marks a renewal for a moment. A timer, not a restarted CSS animation:
// restarting one forces a synchronous layout of the whole table.
function flash(row) {
  row.tr.classList.add('flash');
  clearTimeout(row.flashTimer);
  row.flashTimer = setTimeout(() => row.tr.classList.remove('flash'), FLASH_MS);
}

function spacer() {
  const tr = document.createElement('tr');
  tr.className = 'spacer';
  tr.setAttribute('aria-hidden', 'true');
  return tr;
}
const top = spacer(), bottom = spacer();

function current() {
  if (orderDirty) {
    order.sort(comparator(Date.now()));
    orderDirty = false;
    viewDirty = true;
  }
  if (viewDirty) {
    view = filter ? order.filter((key) => matches(key, entries.get(key).lease.holder)) : order;
    viewDirty = false;
  }
  return view;
}

// Draws the rows in view: rows that stay keep their element (and their
// animation), rows that come in are made, rows that leave are dropped.
function render() {
  scheduled = false;
  const keys = current();
  const scroller = wrap();
  const headerHeight = $('leases').tHead.offsetHeight;
  const estimate = rowHeight || 30;
  const first = Math.max(0, Math.floor((scroller.scrollTop - headerHeight) / estimate) - OVERSCAN);
  const last = Math.min(keys.length, first + Math.ceil(scroller.clientHeight / estimate) + 2 * OVERSCAN);
  const now = Date.now();
  const rows = [];
  const keep = new Set();
  for (let i = first; i < last; i++) {
    const key = keys[i];
    keep.add(key);
    let row = shown.get(key);
    if (!row) {
      row = makeRow(key);
      shown.set(key, row);
      fill(row, key, now);
    }
    row.tr.setAttribute('aria-rowindex', String(i + 2));
    rows.push(row.tr);
  }
  for (const [key, row] of shown) {
    if (keep.has(key)) continue;
    if (row.anim) row.anim.cancel();
    clearTimeout(row.flashTimer);
    shown.delete(key);
  }
  top.style.height = first * estimate + 'px';
  bottom.style.height = (keys.length - last) * estimate + 'px';
  arrange(body(), rows);
  $('leases').setAttribute('aria-rowcount', String(keys.length + 1));
  if (!rowHeight && rows.length) {
    rowHeight = rows[0].getBoundingClientRect().height;
    if (Math.abs(rowHeight - estimate) > 0.5) schedule();
  }
  $('count').textContent = entries.size + ' held' + (filter ? `, ${keys.length} shown` : '');
  $('empty').hidden = keys.length > 0;
  $('empty').textContent = entries.size ? 'No held lease matches the filter.' : 'No lease is held.';
  for (const resolve of afterRender.splice(0)) resolve();
}

// Puts `rows` between the spacers, leaving in place the rows that stay (a
// row taken out of the page, even for a moment, loses the focus); a row
// that had the focus and had to move gets it back.
function arrange(tbody, rows) {
  const focused = tbody.contains(document.activeElement) ? document.activeElement : null;
  const wanted = new Set(rows);
  for (const tr of [...tbody.children]) if (tr !== top && tr !== bottom && !wanted.has(tr)) tr.remove();
  if (tbody.firstChild !== top) tbody.prepend(top);
  let cursor = top.nextSibling;
  for (const tr of rows) {
    if (cursor === tr) cursor = cursor.nextSibling;
    else tbody.insertBefore(tr, cursor);
  }
  if (tbody.lastChild !== bottom) tbody.append(bottom);
  if (focused && focused.isConnected && document.activeElement !== focused) focused.focus({ preventScroll: true });
}

// Brings the row at `index` of the view into the scrolled area.
function reveal(index) {
  const scroller = wrap();
  const headerHeight = $('leases').tHead.offsetHeight;
  const y = headerHeight + index * (rowHeight || 30);
  if (y < scroller.scrollTop + headerHeight) scroller.scrollTop = y - headerHeight;
  else if (y + rowHeight > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = y + rowHeight - scroller.clientHeight;
  render();
}

function rowKey(target) { return target.closest?.('tr[data-key]')?.dataset.key; }

export function init() {
  wrap().addEventListener('scroll', schedule, { passive: true });
  new ResizeObserver(schedule).observe(wrap());
  const tbody = body();
  tbody.addEventListener('click', (e) => { const key = rowKey(e.target); if (key) onOpen(key); });
  // Enter opens a row; the arrows move along the whole list, not only
  // the rows on the page.
  tbody.addEventListener('keydown', (e) => {
    const key = rowKey(e.target);
    if (!key) return;
    if (e.key === 'Enter') { onOpen(key); return; }
    const step = { ArrowDown: 1, ArrowUp: -1 }[e.key];
    if (!step) return;
    e.preventDefault();
    const keys = current();
    const next = keys.indexOf(key) + step;
    if (next < 0 || next >= keys.length) return;
    reveal(next);
    shown.get(keys[next])?.tr.focus();
  });
  schedule();
}
