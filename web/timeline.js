// The timeline: one lane per key, a segment per tenure, over a window the
// user picks: live (what this page has seen, up to 5 minutes), the last
// 10 minutes, hour or 24 hours, or a range. A past window is read from the
// history API a page at a time, drawn as each page comes, with the live
// changes joined on; the table's filter picks the lanes.

import { $, ago, clock, colour, escapeXml, stamp } from './format.js';
import { seen } from './changes.js';
import * as table from './table.js';
import { CAP, fetchHistory, joinAll, liveTenures } from './tenures.js';

const LIVE_MS = 5 * 60 * 1000;
const MIN_LIVE_MS = 10_000;
const MAX_LANES = 30;
// A key whose holder changed more times than this in the window flaps, as
// the gateway's `dagnats_key_flapping` counts (docs/protocol.md, Tenure history).
const FLAP_CHANGES = 5;
const LANE_H = 22, AXIS_H = 20, LANE_LABEL_W = 120;
// A tenure is never drawn narrower than this, so a fresh one can be seen,
// pointed at and focused; the older ones before it in its lane give way.
const MIN_SEGMENT_PX = 10;
const TICK_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
const TICK_SPACING_PX = 80;
// A relative window's history is read again when it is older than this.
const FRESH_MS = 60_000;
const NAMES = { 600_000: '10 minutes', 3_600_000: 'hour', 86_400_000: '24 hours' };

// {kind: 'live'} | {kind: 'last', ms} | {kind: 'range', from, to}
let choice = { kind: 'live' };
// The history of the chosen window: tenures newest first, as read.
let loaded = { id: 'live', tenures: [], byKey: null, capped: false, loading: false, error: null };
const cache = new Map(); // window id -> {tenures, capped, at}
let controller = null;
let focus = null; // [key, fence] of the focused segment, kept across redraws
let redrawing = false;
let onOpen = () => {};
const listeners = [];

const idOf = (c) => (c.kind === 'live' ? 'live' : c.kind === 'last' ? `last ${c.ms}` : `range ${c.from} ${c.to}`);

// Called with (key, fence) when a segment is opened.
export function onSegmentOpen(open) { onOpen = open; }
// Called after each redraw with the window's tenures.
export function onDrawn(listener) { listeners.push(listener); }

// [start, end] of the window now.
export function bounds(now = Date.now()) {
  if (choice.kind === 'last') return [now - choice.ms, now];
  if (choice.kind === 'range') return [choice.from, choice.to];
  const first = seen.length ? seen[0].at : now;
  return [now - Math.min(LIVE_MS, Math.max(MIN_LIVE_MS, now - first)), now];
}

// How the window is named: "last 10 minutes", "2026-12-05 07:00:00 to …".
export function describe(now = Date.now()) {
  const [start, end] = bounds(now);
  if (choice.kind === 'last') return `last ${NAMES[choice.ms] || ago(choice.ms)}`;
  if (choice.kind === 'range') return `${stamp(start)} to ${stamp(end)} UTC`;
  return `last ${ago(end - start)}`;
}

// The window as the end of a sentence: "in the last hour", "from … to …
// UTC", "seen live".
export function during(now = Date.now()) {
  if (choice.kind === 'live') return 'seen live';
  return choice.kind === 'range' ? `from ${describe(now)}` : `in the ${describe(now)}`;
}

// Every key's tenures in the window, history joined with live, oldest
// first; `wanted` picks the keys.
export function tenures(wanted = () => true) {
  const [start, end] = bounds();
  if (!loaded.byKey) {
    loaded.byKey = new Map();
    for (const t of loaded.tenures) {
      if (!loaded.byKey.has(t.key)) loaded.byKey.set(t.key, []);
      loaded.byKey.get(t.key).push(t);
    }
  }
  const history = [];
  for (const [key, list] of loaded.byKey) if (wanted(key)) history.push(...list);
  const all = joinAll(history, liveTenures(wanted));
  const out = new Map();
  for (const [key, list] of all) {
    const inside = list.filter((t) => (t.to ?? Infinity) >= start && (t.from ?? start) <= end);
    if (inside.length) out.set(key, inside);
  }
  return out;
}

export function choose(next) {
  choice = next;
  const id = idOf(next);
  if (controller) controller.abort();
  controller = null;
  const hit = cache.get(id);
  const fresh = hit && (next.kind === 'range' || Date.now() - hit.at < FRESH_MS);
  loaded = { id, tenures: hit ? hit.tenures : [], byKey: null, capped: hit?.capped ?? false, loading: false, error: null };
  if (next.kind !== 'live' && !fresh) load(next, id);
  draw();
}

async function load(c, id) {
  controller = new AbortController();
  const signal = controller.signal;
  loaded.loading = true;
  const [since, until] = bounds();
  try {
    const { tenures: got, capped } = await fetchHistory(
      { since, until: c.kind === 'range' ? until : undefined }, signal,
      (sofar) => { if (loaded.id === id) { loaded.tenures = sofar.slice(); loaded.byKey = null; draw(); } });
    cache.set(id, { tenures: got, capped, at: Date.now() });
    if (loaded.id === id) Object.assign(loaded, { tenures: got, byKey: null, capped, loading: false });
  } catch (err) {
    if (signal.aborted) return;
    if (loaded.id === id) Object.assign(loaded, { loading: false, error: err.message });
  }
  draw();
}

// The history read so far is stale once the page may have missed changes
// (its stream dropped): the window shown is read again, any other when
// chosen.
export function reread() {
  cache.clear();
  if (choice.kind !== 'live') choose(choice);
}

function status() {
  if (loaded.error) return `The history could not be read: ${loaded.error}.`;
  const n = loaded.tenures.length.toLocaleString('en');
  if (loaded.loading) return `Loading the history of the ${describe()}… ${n} tenures so far.`;
  if (loaded.capped) return `Showing the newest ${CAP.toLocaleString('en')} tenures of this window: older ones are not drawn.`;
  return '';
}

// Where each segment of a lane goes, right to left: at least
// MIN_SEGMENT_PX wide, never over the one after it.
function place(segs, x, left, right, end) {
  const placed = [];
  let limit = right;
  for (const s of [...segs].reverse()) {
    const x1 = Math.min(x(Math.min(s.to ?? end, end)), limit);
    const x0 = Math.max(left, Math.min(x(s.from), x1 - MIN_SEGMENT_PX));
    if (x1 > x0) placed.unshift({ s, x0, x1 });
    limit = x0;
  }
  return placed;
}

// Wall-clock ticks (UTC, as in the event log), about TICK_SPACING_PX apart.
function ticks(start, end, px) {
  const seconds = TICK_STEPS_S.find((s) => (end - start) / (s * 1000) <= px / TICK_SPACING_PX) ?? TICK_STEPS_S.at(-1);
  const step = seconds * 1000;
  const out = [];
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) out.push(t);
  return out;
}

function tickLabel(t, span) {
  return span > 86_400_000 * 1.01 ? stamp(t).slice(5, 16) : clock(t).slice(0, 8);
}

let measure = null;
function textWidth(text) {
  if (!measure) {
    measure = document.createElement('canvas').getContext('2d');
    measure.font = `10px ${getComputedStyle($('timeline')).fontFamily}`;
  }
  return measure.measureText(text).width;
}

const fenceOf = (s) => s.tenure ?? s.latest;

export function segmentDetail(key, s, now) {
  const fence = fenceOf(s);
  const fenced = s.latest !== fence ? `fence ${fence} (renewed to ${s.latest})` : `fence ${fence}`;
  const to = s.to ?? now;
  return `${key}: ${s.holder || '?'} @ ${fenced}` + (s.previous ? `, handed over from ${s.previous}` : '') +
    `, from ${clock(s.from)} to ${s.to === null ? 'now' : clock(s.to)}, held ${ago(to - s.from)}` +
    (s.end ? `, ${s.end}` : '');
}

// Times the holder changed from one tenure to the next within the window.
function changes(segs, start) {
  let n = 0;
  for (let i = 1; i < segs.length; i++) if (segs[i].from >= start && segs[i].holder !== segs[i - 1].holder) n += 1;
  return n;
}

// The lanes to draw: keys the filter lets through (by key or by any of
// their holders), flapping ones first, then the most recently active, at
// most MAX_LANES, by key.
function lanes(all, now, start) {
  const filter = table.filterText();
  const picked = [];
  for (const [key, segs] of all) {
    if (filter && !table.matches(key, '') && !segs.some((s) => table.matches(key, s.holder || ''))) continue;
    const changed = changes(segs, start);
    picked.push({ key, segs, changed, flapping: changed > FLAP_CHANGES, last: Math.max(...segs.map((s) => s.to ?? now)) });
  }
  picked.sort((a, b) => b.flapping - a.flapping || b.last - a.last || (a.key < b.key ? -1 : 1));
  const flapping = picked.filter((l) => l.flapping);
  return { total: picked.length, flapping, shown: picked.slice(0, MAX_LANES).sort((a, b) => (a.key < b.key ? -1 : 1)) };
}

export function draw() {
  const now = Date.now();
  const [start, end] = bounds(now);
  const all = tenures();
  const { total, flapping, shown } = lanes(all, now, start);
  const width = Math.max(300, $('timeline').clientWidth);
  const left = LANE_LABEL_W, right = width - 2;
  const x = (t) => left + ((Math.min(Math.max(t, start), end) - start) / (end - start)) * (right - left);
  const lanesH = shown.length * LANE_H;
  const parts = [];
  for (const t of ticks(start, end, right - left)) {
    const anchor = x(t) > right - 25 ? 'end' : 'middle';
    parts.push(`<line class="grid" x1="${x(t)}" x2="${x(t)}" y1="0" y2="${lanesH}"></line>` +
      `<text class="tick" x="${x(t)}" y="${lanesH + 14}" text-anchor="${anchor}">${tickLabel(t, end - start)}</text>`);
  }
  parts.push(`<text class="axis-unit" x="0" y="${lanesH + 14}">UTC</text>`);
  const marks = [];
  shown.forEach((lane, i) => {
    const y = i * LANE_H;
    const key = escapeXml(lane.key);
    const label = `<text x="0" y="${y + 15}" class="lane">${key}</text>`;
    parts.push(lane.flapping
      ? `<g class="flapping" data-key="${key}" data-changes="${lane.changed}"><title>${key}: its holder changed ${lane.changed} times in this window</title>` +
        `${label}<text class="flap-mark" x="${textWidth(lane.key) + 3}" y="${y + 15}">⚠</text></g>`
      : label);
    for (const { s, x0, x1 } of place(lane.segs, x, left, right, Math.min(end, now))) {
      const label = `${s.holder || '?'} @ ${fenceOf(s)}`;
      const detail = escapeXml(segmentDetail(lane.key, s, now));
      parts.push(`<g class="segment" tabindex="0" role="button" data-key="${key}" data-holder="${escapeXml(s.holder || '')}" data-fence="${fenceOf(s)}" data-end="${s.end || ''}" aria-label="${detail}">` +
        `<title>${detail}</title>` +
        `<rect x="${x0}" y="${y + 3}" width="${x1 - x0}" height="${LANE_H - 6}" fill="${colour(s.holder)}" rx="3"></rect>` +
        (textWidth(label) + 8 <= x1 - x0 ? `<text class="seg-label" x="${x0 + 4}" y="${y + 15}">${escapeXml(label)}</text>` : '') + '</g>');
      if (s.previous && s.from >= start) {
        const moved = escapeXml(`${lane.key}: ${s.previous} → ${s.holder} at fence ${fenceOf(s)}`);
        marks.push(`<g class="handover" data-key="${key}" data-from="${escapeXml(s.previous)}" data-to="${escapeXml(s.holder || '')}"><title>${moved}</title>` +
          `<line x1="${x0}" x2="${x0}" y1="${y + 1}" y2="${y + LANE_H - 1}"></line>` +
          `<path d="M${x0 - 4} ${y} h8 l-4 5 z"></path></g>`);
      }
    }
  });
  const height = lanesH + AXIS_H;
  const box = $('timeline');
  const hadFocus = box.contains(document.activeElement);
  redrawing = true;
  box.innerHTML = shown.length
    ? `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">${parts.join('')}${marks.join('')}</svg>`
    : `<p class="muted">${table.filterText() ? 'No key matching the filter changed in this window.' : 'Nothing changed in this window.'}</p>`;
  // The focused segment keeps the focus across redraws, but never takes
  // it back from a dialog or another part of the page.
  if (focus && (hadFocus || document.activeElement === document.body)) {
    const [key, fence] = focus;
    const g = box.querySelector(`g.segment[data-key="${CSS.escape(key)}"][data-fence="${fence}"]`);
    if (g) g.focus({ preventScroll: true });
    else if (hadFocus) focus = null;
  }
  redrawing = false;
  box.setAttribute('aria-busy', String(loaded.loading));
  $('timeline-title').textContent = `Ownership, ${describe(now)}`;
  $('timeline-status').textContent = status();
  $('timeline-flapping').textContent = flapping.length
    ? `Flapping (holder changed more than ${FLAP_CHANGES} times in this window): ` +
      flapping.map((l) => `${l.key} (${l.changed})`).join(', ') + '.'
    : '';
  $('timeline-lanes').textContent = total > shown.length
    ? `${shown.length} of ${total} keys drawn (the most recently active); the filter narrows them.` : '';
  for (const listener of listeners) listener(all, [start, end]);
}

// Focuses the segment of `key` at `fence`, if drawn.
export function focusSegment(key, fence) {
  const g = $('timeline').querySelector(`g.segment[data-key="${CSS.escape(key)}"][data-fence="${fence}"]`);
  if (g) g.focus({ preventScroll: true });
}

// A segment's detail shows on hover and on keyboard focus, and follows
// the focused segment across redraws (its duration grows while it lasts).
function showSegment(target) {
  const g = target.closest && target.closest('g.segment');
  if (g) $('timeline-detail').textContent = g.getAttribute('aria-label');
  return g;
}

function openSegment(target) {
  const g = target.closest && target.closest('g.segment');
  if (g) onOpen(g.dataset.key, Number(g.dataset.fence));
}

function chooseFromForm() {
  const picked = document.querySelector('input[name="window"]:checked').value;
  $('range').hidden = picked !== 'custom';
  if (picked === 'live') choose({ kind: 'live' });
  else if (picked !== 'custom') choose({ kind: 'last', ms: Number(picked) * 1000 });
}

export function init() {
  const box = $('timeline');
  box.addEventListener('mouseover', (e) => showSegment(e.target));
  box.addEventListener('focusin', (e) => {
    const g = showSegment(e.target);
    if (g) focus = [g.dataset.key, g.dataset.fence];
  });
  box.addEventListener('focusout', () => { if (!redrawing) focus = null; });
  box.addEventListener('click', (e) => openSegment(e.target));
  box.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openSegment(e.target); }
  });
  $('window').addEventListener('change', chooseFromForm);
  $('range').addEventListener('submit', (e) => {
    e.preventDefault();
    const from = Date.parse($('range-from').value + 'Z'), to = Date.parse($('range-to').value + 'Z');
    if (!(from < to)) {
      $('timeline-status').textContent = 'The range needs a start before its end.';
      return;
    }
    choose({ kind: 'range', from, to });
  });
  const hour = Date.now() - 3_600_000;
  $('range-from').value = new Date(hour).toISOString().slice(0, 19);
  $('range-to').value = new Date().toISOString().slice(0, 19);
}
