// The cluster panel: /v1/cluster every few seconds, rendered as text only.

import { $, fillTable } from './format.js';
import { api } from './api.js';

const EVERY_MS = 5000;

async function load() {
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

export function start() {
  load();
  setInterval(load, EVERY_MS);
}
