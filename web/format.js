// Formatting shared by the panels: durations, UTC clock times, a colour
// per holder, escaping for SVG markup, and small DOM helpers.

export const $ = (id) => document.getElementById(id);

export function ago(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
}

export function left(ms) { return ms <= 0 ? 'expiring' : (ms / 1000).toFixed(1) + 's'; }

// HH:MM:SS.mmm, UTC, as the event log and the axis show time.
export function clock(at) { return new Date(at).toISOString().slice(11, 23); }

// YYYY-MM-DD HH:MM:SS, UTC, for times that may be days ago.
export function stamp(at) { return new Date(at).toISOString().slice(0, 19).replace('T', ' '); }

// A stable colour per holder; FNV-1a spreads names that differ in one
// character (worker-1, worker-2) far apart on the wheel.
export function colour(holder) {
  let h = 0x811c9dc5;
  for (const c of holder || '') h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return `hsl(${h % 360} 60% 45%)`;
}

const ENTITIES = { '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&#39;' };
export function escapeXml(s) {
  return String(s).replace(/[<>&"']/g, (c) => ENTITIES[c]);
}

// Replaces a table's body with rows of [text, class?] cells, as text only.
export function fillTable(table, rows) {
  table.tBodies[0].replaceChildren(...rows.map((cells) => {
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

// Resolves after the next frame has been laid out and painted.
export function painted() {
  return new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
}
