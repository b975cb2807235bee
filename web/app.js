// The owner dashboard: who holds what, live. It reads only the public HTTP
// API (the same one curl uses), keeps one streamed connection to
// /v1/events, and touches only the rows that changed, so thousands of
// leases stay cheap. No framework, nothing loaded from elsewhere.
'use strict';

const TOKEN_KEY = 'dagnats-leases-token';
const WINDOW_MS = 5 * 60 * 1000;
const MIN_WINDOW_MS = 10_000;
const HISTORY_MAX = 5000;
const LOG_MAX = 300;

const $ = (id) => document.getElementById(id);
const state = {
  rows: new Map(), // key -> {lease, tr, cells, anim}
  visible: new Set(), // rows on screen, the only ones the clock updates
  history: [], // {event, key, revision, holder, at}
  lastId: null,
  sortDirty: false,
  detailKey: null,
  groupsDirty: false,
  timelineFocus: null, // [key, fence] of the focused segment, kept across redraws
  redrawing: false,
};

// ---- auth: the read/write token lives in sessionStorage, never in a URL

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: 'Bearer ' + token } : {};
}

let tokenPrompt = null;
function askToken(why) {
  if (!tokenPrompt) {
    tokenPrompt = new Promise((resolve) => {
      $('token-why').textContent = why;
      $('token-dialog').showModal();
      $('token-form').onsubmit = (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, $('token').value);
        $('token').value = '';
        $('token-dialog').close();
        tokenPrompt = null;
        resolve();
      };
    });
  }
  return tokenPrompt;
}

async function api(method, path, body) {
  for (;;) {
    const headers = authHeaders();
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status === 401) {
      await askToken(method === 'GET' ? 'This gateway needs a read token.' : 'This action needs the write token.');
      continue;
    }
    const data = await res.json().catch(() => ({}));
    return { status: res.status, data };
  }
}

// ---- formatting

function ago(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
}
function left(ms) { return ms <= 0 ? 'expiring' : (ms / 1000).toFixed(1) + 's'; }
function clock(at) { return new Date(at).toISOString().slice(11, 23); }
// A stable colour per holder; FNV-1a spreads names that differ in one
// character (worker-1, worker-2) far apart on the wheel.
function colour(holder) {
  let h = 0x811c9dc5;
  for (const c of holder || '') h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return `hsl(${h % 360} 60% 45%)`;
}

// ---- the table

// Only rows on screen run a clock or an animation: off-screen rows are
// brought up to date when they scroll in.
const observer = new IntersectionObserver((entries) => {
  const now = Date.now();
  for (const e of entries) {
    const key = e.target.dataset.key;
    const row = state.rows.get(key);
    if (e.isIntersecting) {
      state.visible.add(key);
      if (row && row.lease) { startBar(row, now); tick(row, now); }
    } else {
      state.visible.delete(key);
      if (row && row.anim) { row.anim.cancel(); row.anim = null; }
    }
  }
}, { root: document.querySelector('.table-wrap') });

// The bar counts down on the compositor: no script runs per frame.
function startBar(row, now) {
  const { lease } = row;
  const remaining = Math.max(0, Date.parse(lease.expires_at) - now);
  const fraction = Math.min(1, remaining / lease.ttl_ms);
  if (row.anim) row.anim.cancel();
  row.anim = row.cells.bar.animate(
    [{ transform: `scaleX(${fraction})` }, { transform: 'scaleX(0)' }],
    { duration: remaining || 1, fill: 'forwards' });
}

function matches(lease) {
  const f = $('filter').value.trim();
  return !f || lease.key.startsWith(f) || lease.holder.includes(f);
}

function makeRow(key) {
  const tr = document.createElement('tr');
  tr.tabIndex = 0;
  tr.dataset.key = key;
  const cells = {};
  for (const name of ['key', 'holder', 'fence', 'held', 'left']) {
    const td = document.createElement('td');
    td.className = name;
    tr.appendChild(td);
    cells[name] = td;
  }
  cells.key.textContent = key;
  cells.left.innerHTML = '<div class="ttl"><div class="bar"><span></span></div><span class="secs"></span></div>';
  cells.bar = cells.left.querySelector('.bar > span');
  cells.secs = cells.left.querySelector('.secs');
  tr.addEventListener('click', () => openDetail(key));
  tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') openDetail(key); });
  observer.observe(tr);
  return { tr, cells, anim: null, lease: null };
}

function tick(row, now) {
  const { lease, cells } = row;
  const remaining = Date.parse(lease.expires_at) - now;
  cells.held.textContent = ago(now - Date.parse(lease.acquired_at));
  cells.secs.textContent = left(remaining);
  row.tr.classList.toggle('expiring', remaining < lease.ttl_ms / 3);
}

function upsert(lease, renewed) {
  let row = state.rows.get(lease.key);
  const isNew = !row;
  if (isNew) {
    row = makeRow(lease.key);
    state.rows.set(lease.key, row);
    $('leases').tBodies[0].appendChild(row.tr);
    state.sortDirty = true;
  }
  if (row.lease && row.lease.revision > lease.revision) return; // stale
  if (row.lease?.holder !== lease.holder) state.groupsDirty = true;
  row.lease = lease;
  row.cells.holder.textContent = lease.holder;
  row.cells.fence.textContent = lease.revision;
  row.tr.hidden = !matches(lease);
  if (state.visible.has(lease.key)) {
    const now = Date.now();
    startBar(row, now);
    tick(row, now);
  }
  if (renewed) flash(row);
  if ($('sort').value !== 'key') state.sortDirty = true;
  counts();
}

// Marks a renewal for a moment. A timer, not a restarted CSS animation:
// restarting one forces a synchronous layout of the whole table.
function flash(row) {
  row.tr.classList.add('flash');
  clearTimeout(row.flashTimer);
  row.flashTimer = setTimeout(() => row.tr.classList.remove('flash'), 800);
}

function remove(key) {
  const row = state.rows.get(key);
  if (!row) return;
  if (row.anim) row.anim.cancel();
  observer.unobserve(row.tr);
  row.tr.remove();
  state.rows.delete(key);
  state.visible.delete(key);
  state.groupsDirty = true;
  counts();
}

function counts() {
  $('count').textContent = state.rows.size + ' held';
  $('empty').hidden = state.rows.size > 0;
}

function resort() {
  if (!state.sortDirty) return;
  state.sortDirty = false;
  const by = $('sort').value;
  const now = Date.now();
  const key = {
    key: (r) => r.lease.key,
    holder: (r) => r.lease.holder + '\u0000' + r.lease.key,
    left: (r) => Date.parse(r.lease.expires_at) - now,
  }[by];
  const rows = [...state.rows.values()].sort((a, b) => {
    const x = key(a), y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
  const body = $('leases').tBodies[0];
  const fragment = document.createDocumentFragment();
  for (const r of rows) fragment.appendChild(r.tr);
  body.appendChild(fragment);
}

function applyFilter() {
  for (const row of state.rows.values()) row.tr.hidden = !matches(row.lease);
}

// ---- events

// `data` is an SSE event's data or a change from /v1/events/recent. A
// transfer's `acquired` names the holder it came from (`previous_holder`).
function record(event, data) {
  const acquiredAt = data.acquired_at || data.lease?.acquired_at;
  const entry = {
    event, key: data.key, revision: data.revision,
    holder: data.holder || (state.rows.get(data.key)?.lease.holder) || null,
    previous: data.previous_holder || null,
    since: acquiredAt ? Date.parse(acquiredAt) : null,
    at: data.at ? Date.parse(data.at) : Date.now(),
  };
  state.history.push(entry);
  if (state.history.length > HISTORY_MAX) state.history.splice(0, state.history.length - HISTORY_MAX);
  return entry;
}

function logLine(entry) {
  if (entry.event === 'renewed' && $('hide-renewed').checked) return;
  const li = document.createElement('li');
  const kind = entry.previous ? 'transferred' : entry.event;
  li.className = 'ev-' + kind;
  li.dataset.event = kind;
  li.textContent = entry.previous
    ? `${clock(entry.at)} transfer ${entry.key}: ${entry.previous} → ${entry.holder} at fence ${entry.revision}`
    : `${clock(entry.at)} ${entry.event.padEnd(8)} ${entry.key} ` +
      (entry.holder ? `holder=${entry.holder} ` : '') + `fence=${entry.revision}`;
  const log = $('log');
  log.prepend(li);
  while (log.childElementCount > LOG_MAX) log.lastElementChild.remove();
}

function apply(event, data) {
  const entry = record(event, data);
  if (event === 'acquired' || event === 'renewed') upsert(data, event === 'renewed');
  else if (event === 'released' || event === 'expired') remove(data.key);
  logLine(entry);
  if (state.detailKey === data.key) renderDetail();
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
  if (id) state.lastId = id;
  if (data) enqueue(event, JSON.parse(data));
}

// Changes are applied in slices of a few milliseconds, so a burst of
// thousands (every lease renewing at once) never freezes the page.
const queue = [];
let draining = false;
function enqueue(event, data) {
  queue.push([event, data]);
  if (!draining) {
    draining = true;
    setTimeout(drain, 0);
  }
}
function drain() {
  const until = performance.now() + 8;
  let done = 0;
  while (done < queue.length && performance.now() < until) {
    const [event, data] = queue[done++];
    apply(event, data);
  }
  queue.splice(0, done);
  renderGroups();
  if (queue.length) setTimeout(drain, 0);
  else draining = false;
}

function setStatus(up) {
  $('status').className = 'status ' + (up ? 'up' : 'down');
  $('status').textContent = up ? 'live' : 'reconnecting…';
}

async function loadLeases() {
  const { status, data } = await api('GET', '/v1/leases');
  if (status !== 200) return false;
  const seen = new Set();
  for (const lease of data.leases) { upsert(lease, false); seen.add(lease.key); }
  for (const key of [...state.rows.keys()]) if (!seen.has(key)) remove(key);
  state.sortDirty = true;
  renderGroups();
  return true;
}

async function loadHistory() {
  const { status, data } = await api('GET', '/v1/events/recent');
  if (status !== 200) return;
  for (const e of data.events) {
    const entry = record(e.event, e);
    logLine(entry);
  }
}

// One streamed request (fetch, so the token goes in a header, never the
// URL); on any drop, reconnect with Last-Event-ID and reload the table so
// what changed while away is right again.
async function stream() {
  for (;;) {
    try {
      const headers = authHeaders();
      if (state.lastId) headers['Last-Event-ID'] = state.lastId;
      const res = await fetch('/v1/events', { headers });
      if (res.status === 401) { await askToken('This gateway needs a read token.'); continue; }
      if (!res.ok || !res.body) throw new Error('events: ' + res.status);
      setStatus(true);
      await loadLeases();
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
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// ---- shard groups, recognised from the keys alone: each member of group
// G holds `G-member-<holder>`, and shard i of G is the lease on `G-<i>`

const MEMBER_INFIX = '-member-';

// Per group: its members, the shards each holder owns, and the shards the
// page has seen (held now or in the recent past) that nobody owns now.
function shardGroups() {
  const found = new Map(); // name -> {members: Set, owners: Map holder -> [shard], seen: Set}
  for (const [key, { lease }] of state.rows) {
    const suffix = MEMBER_INFIX + lease.holder;
    if (!key.endsWith(suffix) || key.length === suffix.length) continue;
    const name = key.slice(0, -suffix.length);
    if (!found.has(name)) found.set(name, { name, members: new Set(), owners: new Map(), seen: new Set() });
    found.get(name).members.add(lease.holder);
  }
  const shardOf = (key) => {
    const m = /^(.+)-(\d+)$/.exec(key);
    return m && found.has(m[1]) ? [found.get(m[1]), Number(m[2])] : [null];
  };
  for (const e of state.history) {
    const [group, shard] = shardOf(e.key);
    if (group) group.seen.add(shard);
  }
  for (const [key, { lease }] of state.rows) {
    const [group, shard] = shardOf(key);
    if (!group) continue;
    group.seen.add(shard);
    if (!group.owners.has(lease.holder)) group.owners.set(lease.holder, []);
    group.owners.get(lease.holder).push(shard);
  }
  return [...found.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

const numerically = (a, b) => a - b;

function groupView(group) {
  const owned = new Set([...group.owners.values()].flat());
  const free = [...group.seen].filter((shard) => !owned.has(shard)).sort(numerically);
  const holders = [...new Set([...group.members, ...group.owners.keys()])].sort();
  const div = document.createElement('div');
  div.className = 'group';
  div.dataset.group = group.name;
  const title = document.createElement('h3');
  title.textContent = `${group.name}: ${group.members.size} member${group.members.size === 1 ? '' : 's'}, ` +
    `${owned.size} shard${owned.size === 1 ? '' : 's'} owned` + (free.length ? `, ${free.length} with no owner` : '');
  const table = document.createElement('table');
  table.innerHTML = '<thead><tr><th scope="col">Member</th><th scope="col">Shards</th><th scope="col">Which</th></tr></thead><tbody></tbody>';
  const line = (who, shards, cls) => [[who, cls], [String(shards.length)], [shards.join(', ') || '—']];
  fillTable(table, holders.map((holder) => {
    const shards = (group.owners.get(holder) || []).sort(numerically);
    return line(holder + (group.members.has(holder) ? '' : ' (not a member)'), shards);
  }).concat(free.length ? [line('no owner', free, 'warn')] : []));
  div.append(title, table);
  return div;
}

// Redrawn after a batch of changes that moved a lease to another holder
// (or freed or took a key); renewals never redraw it.
function renderGroups() {
  if (!state.groupsDirty) return;
  state.groupsDirty = false;
  const groups = shardGroups();
  $('groups').replaceChildren(...groups.map(groupView));
  $('no-groups').hidden = groups.length > 0;
}

// ---- the timeline: one lane per key, a segment per tenure

const LANE_H = 22, AXIS_H = 20, LANE_LABEL_W = 120;
// A tenure is never drawn narrower than this, so a fresh one can be seen,
// pointed at and focused; the older ones before it in its lane give way.
const MIN_SEGMENT_PX = 10;
const TICK_STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300];
const TICK_SPACING_PX = 80;

// The window: the last 5 minutes, or less while the page has seen less
// (never under 10 s), so a fresh page is not a sliver at the right edge.
function windowStart(now) {
  const first = state.history.length ? state.history[0].at : now;
  return now - Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, now - first));
}

// Per key, its tenures overlapping the window, oldest first: holder,
// fence (the revision that began it), latest (its last renewal's fence),
// previous (the holder a transfer took it from), from, to, open.
function segments(now, start) {
  const lanes = new Map(); // key -> {open, done: []}
  const lane = (key) => {
    if (!lanes.has(key)) lanes.set(key, { open: null, done: [] });
    return lanes.get(key);
  };
  for (const e of state.history) {
    const l = lane(e.key);
    if (e.event === 'acquired' || (e.event === 'renewed' && !l.open)) {
      if (l.open) l.done.push({ ...l.open, to: e.at });
      l.open = {
        holder: e.holder, fence: e.revision, latest: e.revision, previous: e.previous,
        from: e.event === 'acquired' ? e.at : (e.since ?? start),
      };
    } else if (e.event === 'renewed') {
      l.open.latest = e.revision;
    } else if (e.event === 'released' || e.event === 'expired') {
      if (l.open) l.done.push({ ...l.open, to: e.at });
      l.open = null;
    }
  }
  for (const [key, { lease }] of state.rows) {
    const l = lane(key);
    if (!l.open) l.open = { holder: lease.holder, fence: lease.revision, previous: null, from: Date.parse(lease.acquired_at) };
    if (l.open.holder === lease.holder) l.open.latest = lease.revision;
  }
  const result = [];
  for (const [key, l] of lanes) {
    const segs = l.done.concat(l.open ? [{ ...l.open, to: now, open: true }] : []).filter((s) => s.to >= start);
    if (segs.length) result.push({ key, segs, last: Math.max(...segs.map((s) => s.to)) });
  }
  result.sort((a, b) => b.last - a.last || (a.key < b.key ? -1 : 1));
  return result.slice(0, 30).sort((a, b) => (a.key < b.key ? -1 : 1));
}

// Where each segment of a lane goes, right to left: at least
// MIN_SEGMENT_PX wide, never over the one after it.
function place(segs, x, left, right) {
  const placed = [];
  let limit = right;
  for (const s of [...segs].reverse()) {
    const x1 = Math.min(x(s.to), limit);
    const x0 = Math.max(left, Math.min(x(s.from), x1 - MIN_SEGMENT_PX));
    if (x1 > x0) placed.unshift({ s, x0, x1 });
    limit = x0;
  }
  return placed;
}

// Wall-clock ticks (UTC, as in the event log), about TICK_SPACING_PX apart.
function ticks(start, now, px) {
  const seconds = TICK_STEPS_S.find((s) => (now - start) / (s * 1000) <= px / TICK_SPACING_PX) ?? TICK_STEPS_S.at(-1);
  const step = seconds * 1000;
  const out = [];
  for (let t = Math.ceil(start / step) * step; t <= now; t += step) out.push(t);
  return out;
}

let measure = null;
function textWidth(text) {
  if (!measure) {
    measure = document.createElement('canvas').getContext('2d');
    const style = getComputedStyle($('timeline'));
    measure.font = `10px ${style.fontFamily}`;
  }
  return measure.measureText(text).width;
}

function segmentDetail(key, s) {
  const fence = s.latest !== s.fence ? `fence ${s.fence} (renewed to ${s.latest})` : `fence ${s.fence}`;
  return `${key}: ${s.holder || '?'} @ ${fence}` + (s.previous ? `, handed over from ${s.previous}` : '') +
    `, from ${clock(s.from)} to ${s.open ? 'now' : clock(s.to)}, held ${ago(s.to - s.from)}`;
}

function drawTimeline() {
  const now = Date.now();
  const start = windowStart(now);
  const lanes = segments(now, start);
  const width = Math.max(300, $('timeline').clientWidth);
  const left = LANE_LABEL_W, right = width - 2;
  const x = (t) => left + ((Math.max(t, start) - start) / (now - start)) * (right - left);
  const lanesH = lanes.length * LANE_H;
  const parts = [];
  for (const t of ticks(start, now, right - left)) {
    const anchor = x(t) > right - 25 ? 'end' : 'middle';
    parts.push(`<line class="grid" x1="${x(t)}" x2="${x(t)}" y1="0" y2="${lanesH}"></line>` +
      `<text class="tick" x="${x(t)}" y="${lanesH + 14}" text-anchor="${anchor}">${clock(t).slice(0, 8)}</text>`);
  }
  parts.push(`<text class="axis-unit" x="0" y="${lanesH + 14}">UTC</text>`);
  const marks = [];
  lanes.forEach((lane, i) => {
    const y = i * LANE_H;
    const key = escapeXml(lane.key);
    parts.push(`<text x="0" y="${y + 15}" class="lane">${key}</text>`);
    for (const { s, x0, x1 } of place(lane.segs, x, left, right)) {
      const holder = escapeXml(s.holder || '?');
      const label = `${s.holder || '?'} @ ${s.fence}`;
      const detail = escapeXml(segmentDetail(lane.key, s));
      parts.push(`<g class="segment" tabindex="0" data-key="${key}" data-holder="${escapeXml(s.holder || '')}" data-fence="${s.fence}" aria-label="${detail}">` +
        `<title>${detail}</title>` +
        `<rect x="${x0}" y="${y + 3}" width="${x1 - x0}" height="${LANE_H - 6}" fill="${colour(s.holder)}" rx="3"></rect>` +
        (textWidth(label) + 8 <= x1 - x0 ? `<text class="seg-label" x="${x0 + 4}" y="${y + 15}">${escapeXml(label)}</text>` : '') + '</g>');
      if (s.previous && s.from >= start) {
        const moved = escapeXml(`${lane.key}: ${s.previous} → ${s.holder} at fence ${s.fence}`);
        marks.push(`<g class="handover" data-key="${key}" data-from="${escapeXml(s.previous)}" data-to="${holder}"><title>${moved}</title>` +
          `<line x1="${x0}" x2="${x0}" y1="${y + 1}" y2="${y + LANE_H - 1}"></line>` +
          `<path d="M${x0 - 4} ${y} h8 l-4 5 z"></path></g>`);
      }
    }
  });
  const height = lanesH + AXIS_H;
  state.redrawing = true;
  $('timeline').innerHTML = lanes.length
    ? `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">${parts.join('')}${marks.join('')}</svg>`
    : '<p class="muted">Nothing changed in the last 5 minutes.</p>';
  if (state.timelineFocus) {
    const [key, fence] = state.timelineFocus;
    const g = $('timeline').querySelector(`g.segment[data-key="${CSS.escape(key)}"][data-fence="${fence}"]`);
    if (g) g.focus({ preventScroll: true });
    else state.timelineFocus = null;
  }
  state.redrawing = false;
  $('timeline-title').textContent = `Ownership, last ${ago(now - start)}`;
}

// A segment's detail shows on hover and on keyboard focus, and follows
// the focused segment across redraws (its duration grows while it lasts).
function showSegment(target) {
  const g = target.closest && target.closest('g.segment');
  if (g) $('timeline-detail').textContent = g.getAttribute('aria-label');
  return g;
}
$('timeline').addEventListener('mouseover', (e) => showSegment(e.target));
$('timeline').addEventListener('focusin', (e) => {
  const g = showSegment(e.target);
  if (g) state.timelineFocus = [g.dataset.key, g.dataset.fence];
});
$('timeline').addEventListener('focusout', () => {
  if (!state.redrawing) state.timelineFocus = null;
});

function escapeXml(s) {
  return String(s).replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&#39;' }[c]));
}

// ---- the detail view: lease, history, forward, revoke

function openDetail(key) {
  state.detailKey = key;
  $('forward-reply').textContent = '';
  $('revoke-result').textContent = '';
  renderDetail();
  if (!$('detail').open) $('detail').showModal();
}

function renderDetail() {
  const key = state.detailKey;
  const row = state.rows.get(key);
  $('detail-title').textContent = key;
  $('detail-lease').textContent = row ? JSON.stringify(row.lease, null, 2) : 'Nobody holds this key.';
  const list = $('detail-history');
  list.textContent = '';
  for (const e of state.history.filter((h) => h.key === key).slice(-20).reverse()) {
    const li = document.createElement('li');
    li.textContent = `${clock(e.at)} ${e.event} ${e.holder || ''} fence=${e.revision}` +
      (e.previous ? ` from ${e.previous}` : '');
    list.appendChild(li);
  }
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

$('forward').addEventListener('submit', async (e) => {
  e.preventDefault();
  const key = state.detailKey;
  const body = { payload: toBase64($('forward-payload').value), timeout_ms: Number($('forward-timeout').value) };
  const { status, data } = await api('POST', `/v1/leases/${encodeURIComponent(key)}/forward`, body);
  $('forward-reply').textContent = status === 200
    ? `${data.holder} (fence ${data.revision}) replied:\n${fromBase64(data.payload)}`
    : `${data.kind}: ${data.error}`;
});

$('revoke').addEventListener('click', async () => {
  const key = state.detailKey;
  if (!confirm(`Revoke the lease on ${key}? Its holder's fence becomes stale.`)) return;
  const { status, data } = await api('DELETE', `/v1/leases/${encodeURIComponent(key)}`);
  $('revoke-result').textContent = status === 200
    ? `Revoked: the key is free at fence ${data.revision}.`
    : `${data.kind}: ${data.error}`;
});

$('detail').addEventListener('close', () => { state.detailKey = null; });
$('filter').addEventListener('input', applyFilter);
$('sort').addEventListener('change', () => { state.sortDirty = true; resort(); });
$('hide-renewed').addEventListener('change', () => {
  for (const li of $('log').children) li.hidden = $('hide-renewed').checked && li.dataset.event === 'renewed';
});

// ---- the cluster: /v1/cluster every few seconds, rendered as text only

const CLUSTER_EVERY_MS = 5000;

function fillTable(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement('tr');
    for (const [text, cls] of cells) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    return tr;
  }));
}

async function loadCluster() {
  let reply;
  try {
    reply = await api('GET', '/v1/cluster');
  } catch {
    return; // the gateway is unreachable: the status light says so already
  }
  const { status, data } = reply;
  if (status !== 200) return;
  const stream = data.stream;
  $('cluster-leader').textContent = stream.leader
    ? `${stream.name} leader: ${stream.leader}`
    : `${stream.name} has no leader${stream.error ? ': ' + stream.error : ''}`;
  $('cluster-leader').className = stream.leader ? 'muted' : 'bad';
  fillTable($('cluster-replicas'), stream.replicas.map((r) => [
    [r.name],
    [r.leader ? 'leader' : 'follower'],
    r.offline ? ['offline', 'bad'] : r.current ? ['current', 'ok'] : ['catching up', 'warn'],
    [String(r.lag)],
  ]));
  fillTable($('cluster-nodes'), data.nodes.map((n) => [
    [n.url + (n.connected ? ' (connected)' : '')], [n.name || ''], [n.version || ''],
  ]));
  fillTable($('cluster-gateways'), data.gateways.map((g) => [
    [g.id + (g.id === data.gateway.id ? ' (this one)' : '')], [g.version],
  ]));
}

setInterval(() => {
  const now = Date.now();
  for (const key of state.visible) {
    const row = state.rows.get(key);
    if (row) tick(row, now);
  }
  if ($('sort').value === 'left') state.sortDirty = true;
  resort();
}, 1000);
setInterval(drawTimeline, 1000);

loadHistory().then(stream);
loadCluster();
setInterval(loadCluster, CLUSTER_EVERY_MS);
