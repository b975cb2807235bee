// The owner dashboard: who holds what, live, and who held what before.
// It reads only the public HTTP API (the same one curl uses). Plain ES
// modules, no framework and nothing loaded from elsewhere; each module
// is one panel or one source of data.

import { $ } from './format.js';
import * as changes from './changes.js';
import * as cluster from './cluster.js';
import * as detail from './detail.js';
import * as groups from './groups.js';
import * as live from './live.js';
import * as table from './table.js';
import * as timeline from './timeline.js';

const CLOCK_MS = 1000;

table.init();
timeline.init();
detail.init();

const rowAgain = (key) => () => document.querySelector(`#leases tr[data-key="${CSS.escape(key)}"]`);
table.onRowOpen((key) => detail.openKey(key, null, rowAgain(key)));
timeline.onSegmentOpen((key, fence) => detail.openKey(key, fence, () => {
  timeline.focusSegment(key, fence);
  return document.activeElement;
}));
timeline.onDrawn((tenures) => groups.render(tenures, timeline.during()));
live.onChange((event, entry) => detail.changed(entry.key));
live.onBack(timeline.reread);

$('filter').addEventListener('input', () => {
  table.setFilter($('filter').value.trim());
  timeline.draw();
});
$('sort').addEventListener('change', () => table.setSort($('sort').value));
$('hide-renewed').addEventListener('change', () => changes.hideRenewals($('hide-renewed').checked));

setInterval(table.tickAll, CLOCK_MS);
setInterval(timeline.draw, CLOCK_MS);

live.loadRecent();
live.stream();
cluster.start();
