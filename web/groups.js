// Shard groups, recognised from the keys alone (docs/protocol.md, Shard
// groups): each member of group G holds `G-member-<holder>`, and shard i
// of G is the lease on `G-<i>`. Per group: who owns which shards now, and
// the hand-overs over the timeline's window (a tenure ended and the next
// one of its shard taken by another holder), from the history joined
// with what the page saw live.

import { $, clock, fillTable } from './format.js';
import * as table from './table.js';

const MEMBER_INFIX = '-member-';
const HANDOVERS_SHOWN = 12;
const numerically = (a, b) => a - b;

let drawn = ''; // what the panel shows, so an unchanged redraw touches nothing

function groupOf(found, name) {
  if (!found.has(name)) found.set(name, { name, members: new Set(), owners: new Map(), seen: new Set(), handovers: [] });
  return found.get(name);
}

// The group name of a member key held (or once held) by `holder`.
function memberGroup(key, holder) {
  const suffix = MEMBER_INFIX + holder;
  return key.endsWith(suffix) && key.length > suffix.length ? key.slice(0, -suffix.length) : null;
}

// Every group with a member now or in the window, its owners now, the
// shards seen, and its hand-overs in the window, newest first.
function shardGroups(windowTenures) {
  const found = new Map();
  for (const lease of table.leases()) {
    const name = memberGroup(lease.key, lease.holder);
    if (name) groupOf(found, name).members.add(lease.holder);
  }
  for (const [key, segs] of windowTenures) {
    for (const s of segs) {
      const name = memberGroup(key, s.holder);
      if (name) groupOf(found, name);
    }
  }
  const shardOf = (key) => {
    const m = /^(.+)-(\d+)$/.exec(key);
    return m && found.has(m[1]) ? [found.get(m[1]), Number(m[2])] : [null];
  };
  for (const [key, segs] of windowTenures) {
    const [group, shard] = shardOf(key);
    if (!group) continue;
    group.seen.add(shard);
    for (let i = 1; i < segs.length; i++) {
      const [was, now] = [segs[i - 1], segs[i]];
      if (was.holder === now.holder) continue;
      group.handovers.push({
        shard, at: now.from, from: was.holder, to: now.holder,
        how: was.end || (now.previous === was.holder ? 'transferred' : 'ended'), fence: now.tenure ?? now.latest,
      });
    }
  }
  for (const lease of table.leases()) {
    const [group, shard] = shardOf(lease.key);
    if (!group) continue;
    group.seen.add(shard);
    if (!group.owners.has(lease.holder)) group.owners.set(lease.holder, []);
    group.owners.get(lease.holder).push(shard);
  }
  for (const group of found.values()) group.handovers.sort((a, b) => b.at - a.at || b.fence - a.fence);
  return [...found.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

function handoverList(group, during) {
  const section = document.createElement('div');
  section.className = 'handovers';
  const n = group.handovers.length;
  const title = document.createElement('p');
  title.textContent = `${n} hand-over${n === 1 ? '' : 's'} ${during}` + (n > HANDOVERS_SHOWN ? `, the newest ${HANDOVERS_SHOWN}:` : n ? ':' : '.');
  const list = document.createElement('ol');
  for (const h of group.handovers.slice(0, HANDOVERS_SHOWN)) {
    const li = document.createElement('li');
    Object.assign(li.dataset, { shard: h.shard, from: h.from, to: h.to, how: h.how, fence: h.fence });
    li.textContent = `${clock(h.at).slice(0, 8)} shard ${h.shard}: ${h.from} → ${h.to} (${h.how}, fence ${h.fence})`;
    list.append(li);
  }
  section.append(title, list);
  return section;
}

function groupView(group, during) {
  const owned = new Set([...group.owners.values()].flat());
  const free = [...group.seen].filter((shard) => !owned.has(shard)).sort(numerically);
  const holders = [...new Set([...group.members, ...group.owners.keys()])].sort();
  const div = document.createElement('div');
  div.className = 'group';
  div.dataset.group = group.name;
  const title = document.createElement('h3');
  title.textContent = `${group.name}: ${group.members.size} member${group.members.size === 1 ? '' : 's'}, ` +
    `${owned.size} shard${owned.size === 1 ? '' : 's'} owned` + (free.length ? `, ${free.length} with no owner` : '');
  const owners = document.createElement('table');
  owners.innerHTML = '<thead><tr><th scope="col">Member</th><th scope="col">Shards</th><th scope="col">Which</th></tr></thead><tbody></tbody>';
  const line = (who, shards, cls) => [[who, cls], [String(shards.length)], [shards.join(', ') || '—']];
  fillTable(owners, holders.map((holder) => {
    const shards = (group.owners.get(holder) || []).sort(numerically);
    return line(holder + (group.members.has(holder) ? '' : ' (not a member)'), shards);
  }).concat(free.length ? [line('no owner', free, 'warn')] : []));
  div.append(title, owners, handoverList(group, during));
  return div;
}

// Redrawn with the timeline; the page is touched only when what it shows
// changed.
export function render(windowTenures, during) {
  const groups = shardGroups(windowTenures);
  const signature = JSON.stringify([during, groups.map((g) => [g.name, [...g.members], [...g.owners], [...g.seen], g.handovers])]);
  if (signature === drawn) return;
  drawn = signature;
  $('groups').replaceChildren(...groups.map((g) => groupView(g, during)));
  $('no-groups').hidden = groups.length > 0;
}
