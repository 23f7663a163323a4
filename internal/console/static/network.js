// The public Network view: the counts and history of GET /v1/network/stats, drawn as SVG by
// this page, and a table that pages through GET /nodes with its cursors rather than loading
// the table whole. No login. Every string a node chose (DID, region, capabilities) goes into
// the page as text: textContent and SVG attributes, never markup.

import { call } from './api.js';
import { LineChart } from './chart.js';
import { el } from './dom.js';
import * as keys from './keys.js';
import { ago, localTime, timeEl } from './time.js';

// The view refreshes this often while it is shown and the tab is visible.
export const REFRESH_MS = 5000;
// Rows per table page; a search scans the listing in pages of SCAN_PAGE, at most SCAN_PAGES
// of them per table page.
const PAGE = 20;
const SCAN_PAGE = 500;
const SCAN_PAGES = 10;

const $ = (id) => document.getElementById(id);

let stats = null;
let timer = 0;
let active = false;
// table is where the node table stands: the cursor each page began at (the first page's is
// ''), the page shown, the next page's cursor, and the sort.
const table = { cursors: [''], index: 0, next: '', rows: [], sortKey: '', sortDir: 1 };
// charts are made in setup, once their boxes are in the page.
let charts = null;

const WINDOW_NAMES = { 60: '1 minute', 300: '5 minutes', 600: '10 minutes', 3600: '1 hour', 86400: '24 hours' };

function windowName(s) {
  return WINDOW_NAMES[s] || `${s} s`;
}

// serverNow is the registry's clock as of the last answer, so that "online" and "ago" do
// not depend on this device's clock.
function serverNow() {
  return stats ? Date.parse(stats.at) : Date.now();
}

// bars lists a breakdown: a row per group with its nodes as a meter, online among them.
function bars(box, breakdown, unnamed) {
  const rows = breakdown.groups.map((g) => ({ name: g.name === '' ? unnamed : g.name, nodes: g.nodes, online: g.online, named: g.name !== '' }));
  if (breakdown.others.groups > 0) {
    rows.push({ name: `${breakdown.others.groups} more`, nodes: breakdown.others.nodes, online: breakdown.others.online, named: false });
  }
  const top = Math.max(1, ...rows.map((r) => r.nodes));
  const list = el('ul', { class: 'bars' });
  for (const r of rows) {
    const meter = el('meter', { min: 0, max: top, value: r.nodes });
    meter.setAttribute('aria-label', `${r.name}: ${r.nodes} nodes`);
    list.append(el('li', {},
      el('span', { class: r.named ? 'bar-name' : 'bar-name unnamed', textContent: r.name, title: r.name }),
      meter,
      el('span', { class: 'bar-count', textContent: `${r.nodes} (${r.online} online)` })));
  }
  if (!rows.length) list.append(el('li', { class: 'small', textContent: 'No nodes yet.' }));
  box.replaceChildren(list);
}

// ---- counts ----

function selectedWindow() {
  return Number($('net-window').value) || (stats ? stats.online_window : 600);
}

function renderStats() {
  $('stat-nodes').textContent = String(stats.nodes);
  const sel = $('net-window');
  if (sel.options.length !== stats.online.length) {
    const keep = sel.value || String(stats.online_window);
    sel.replaceChildren(...stats.online.map((o) => el('option', { value: String(o.window), textContent: windowName(o.window) })));
    sel.value = keep;
  }
  const w = selectedWindow();
  const o = stats.online.find((c) => c.window === w);
  $('stat-online').textContent = o ? String(o.nodes) : '–';
  $('stat-heartbeats').textContent = stats.heartbeats_per_minute === null ? '–' : String(stats.heartbeats_per_minute);
  const range = document.querySelector('#online-range [aria-pressed="true"]');
  const week = range && range.dataset.range === '7d';
  charts.online.set(week ? stats.online_7d : stats.online_24h, week ? 'Online nodes, 7 days' : 'Online nodes, 24 hours');
  charts.heartbeats.set(stats.heartbeats_24h, 'Heartbeats per minute, 24 hours');
  charts.registrations.set(stats.registrations_7d, 'New registrations per hour, 7 days');
  $('breakdown-note').textContent = `Node records by region, capability and reachability; online means seen within ${windowName(stats.online_window)}.`;
  bars($('bars-regions'), stats.regions, '(no region)');
  bars($('bars-capabilities'), stats.capabilities, '(none)');
  bars($('bars-reachability'), stats.reachability, '(none)');
  const region = $('table-region');
  const want = region.value;
  const names = stats.regions.groups.filter((g) => g.name !== '').map((g) => g.name);
  if (region.options.length !== names.length + 1 || names.some((n, i) => region.options[i + 1].value !== n)) {
    region.replaceChildren(el('option', { value: '', textContent: 'every region' }),
      ...names.map((n) => el('option', { value: n, textContent: n })));
    region.value = names.includes(want) ? want : '';
  }
}

// ---- the node table ----

function matches(n, term) {
  if (!term) return true;
  const t = term.toLowerCase();
  return [n.did, n.public_key, n.fingerprint, n.region || '', n.endpoint, ...n.capabilities].some((s) => s.toLowerCase().includes(t));
}

async function withFingerprints(nodes) {
  return Promise.all(nodes.map(async (n) => {
    const key = keys.hexDecode(n.public_key);
    return { ...n, fingerprint: key ? await keys.fingerprint(key) : '' };
  }));
}

// loadTable fetches the table page table.index: one listing page of PAGE rows, or, while a
// search is typed, listing pages scanned for matches until a table page is full.
let tableLoads = 0;

async function loadTable() {
  // Loads overlap (a refresh, a click): only the one started last may draw.
  const load = ++tableLoads;
  const term = $('node-search').value.trim();
  const q = new URLSearchParams();
  if ($('table-region').value) q.set('region', $('table-region').value);
  if ($('table-online').checked) q.set('online_within', String(selectedWindow()));
  q.set('limit', String(term ? SCAN_PAGE : PAGE));
  let cursor = table.cursors[table.index];
  let rows = [];
  let next = '';
  for (let i = 0; i < (term ? SCAN_PAGES : 1); i++) {
    if (cursor) q.set('cursor', cursor);
    else q.delete('cursor');
    const res = await call('GET', '/nodes?' + q.toString());
    if (load !== tableLoads) return;
    rows = rows.concat((await withFingerprints(res.nodes)).filter((n) => matches(n, term)));
    next = res.next || '';
    cursor = next;
    if (!next || rows.length >= PAGE) break;
  }
  if (load !== tableLoads) return;
  table.rows = rows;
  table.next = next;
  renderTable();
}

const COLUMNS = [
  ['did', 'DID'], ['fingerprint', 'Fingerprint'], ['region', 'Region'],
  ['capabilities', 'Capabilities'], ['last_seen', 'Last seen'], ['online', 'Online'],
];

function isOnline(n) {
  return (serverNow() - Date.parse(n.last_seen)) / 1000 <= selectedWindow();
}

function sortValue(n, key) {
  if (key === 'capabilities') return n.capabilities.join(',');
  if (key === 'online') return isOnline(n) ? 1 : 0;
  if (key === 'region') return n.region || '';
  return n[key];
}

// clipped holds a value shown on one line, cut with an ellipsis where the column is too
// narrow for it, and whole in its title.
function clipped(text) {
  return el('span', { class: 'clip', textContent: text, title: text });
}

function renderTable() {
  const rows = [...table.rows];
  if (table.sortKey) {
    rows.sort((a, b) => {
      const x = sortValue(a, table.sortKey), y = sortValue(b, table.sortKey);
      return (x < y ? -1 : x > y ? 1 : 0) * table.sortDir;
    });
  }
  for (const th of document.querySelectorAll('#node-table th')) {
    const key = th.dataset.key;
    if (key === table.sortKey) th.setAttribute('aria-sort', table.sortDir > 0 ? 'ascending' : 'descending');
    else th.removeAttribute('aria-sort');
  }
  const body = $('node-rows');
  body.replaceChildren(...rows.map((n) => {
    const on = isOnline(n);
    const cells = [
      el('td', { class: 'did' }, clipped(n.did)),
      el('td', { class: 'mono' }, clipped(n.fingerprint)),
      el('td', {}, clipped(n.region === null ? '(none)' : n.region)),
      el('td', { textContent: n.capabilities.length ? n.capabilities.join(', ') : '(none)' }),
      el('td', {}, timeEl(n.last_seen, ago(n.last_seen, serverNow()))),
      el('td', {}, el('span', { class: on ? 'badge online' : 'badge offline', textContent: on ? 'online' : 'offline' })),
    ];
    // The column's name, for the narrow layout, where each row is a card.
    cells.forEach((td, i) => { td.dataset.label = COLUMNS[i][1]; });
    return el('tr', {}, ...cells);
  }));
  if (!rows.length) body.append(el('tr', {}, el('td', { colSpan: COLUMNS.length, class: 'small', textContent: 'No nodes on this page.' })));
  const first = table.index * PAGE;
  $('page-info').textContent = $('node-search').value.trim()
    ? `Page ${table.index + 1}: ${rows.length} matching`
    : `Page ${table.index + 1}: nodes ${rows.length ? first + 1 : 0}–${first + rows.length}`;
  $('page-prev').disabled = table.index === 0;
  $('page-next').disabled = !table.next;
}

function restartTable() {
  table.cursors = [''];
  table.index = 0;
  return loadTable();
}

// ---- refreshing ----

const SERIES = ['online_24h', 'online_7d', 'heartbeats_24h', 'registrations_7d'];

// overlay lays part, a series answered to changed_since, over held: held moved on to part's
// end, and part's steps over its last. It is null when they do not fit: another step, an
// earlier end, or steps between them that part does not hold.
function overlay(held, part) {
  const n = held.values.length;
  const m = part.values.length;
  const shift = (Date.parse(part.end) - Date.parse(held.end)) / (part.step * 1000);
  if (part.step !== held.step || !Number.isInteger(shift) || shift < 0 || m > n || (m < n && shift >= m)) return null;
  const k = Math.min(shift, n);
  const values = held.values.slice(k).concat(new Array(k).fill(null));
  values.splice(n - m, m, ...part.values);
  return { step: part.step, end: part.end, values };
}

// fetchStats reads the whole answer once; after that, only what changed since the answer
// held (changed_since its at): the counts, and the last few steps of each series, which
// are laid over the series held. The history changes once a minute and the view refreshes
// every few seconds, so a refresh reads a few hundred bytes of history, not all of it.
async function fetchStats() {
  if (!stats) return call('GET', '/v1/network/stats');
  const part = await call('GET', '/v1/network/stats?changed_since=' + encodeURIComponent(stats.at));
  const next = { ...part };
  for (const name of SERIES) {
    next[name] = overlay(stats[name], part[name]);
    if (!next[name]) return call('GET', '/v1/network/stats');
  }
  return next;
}

async function refresh() {
  timer = 0;
  try {
    stats = await fetchStats();
    renderStats();
    await loadTable();
    $('net-status').replaceChildren('Updated at ', timeEl(stats.at, localTime(Date.parse(stats.at))),
      `; refreshes every ${REFRESH_MS / 1000} s while shown.`);
    $('view-network').dataset.updated = stats.at;
  } catch (e) {
    $('net-status').textContent = `Could not update: ${e.code || ''} ${e.message}`.trim();
  }
  schedule();
}

// schedule plans the next refresh while the view is shown and the tab visible; otherwise the
// view rests until it is both again.
function schedule() {
  if (timer) clearTimeout(timer);
  timer = 0;
  const paused = document.visibilityState === 'hidden';
  $('view-network').dataset.paused = paused ? 'yes' : 'no';
  if (paused && active) $('net-status').textContent = 'Paused while this tab is hidden.';
  if (active && !paused) timer = setTimeout(refresh, REFRESH_MS);
}

// shown tells the view whether it is on screen: it refreshes now when it comes back.
export function shown(on) {
  const was = active;
  active = on;
  if (on && !was) refresh();
  else schedule();
}

export function setup() {
  charts = {
    online: new LineChart($('chart-online'), 'online'),
    heartbeats: new LineChart($('chart-heartbeats'), 'heartbeats'),
    registrations: new LineChart($('chart-registrations'), 'registrations'),
  };
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && active) refresh();
    else schedule();
  });
  $('net-window').addEventListener('change', () => {
    if (stats) renderStats();
    if ($('table-online').checked) restartTable();
    else renderTable();
  });
  for (const b of document.querySelectorAll('#online-range button')) {
    b.addEventListener('click', () => {
      for (const o of document.querySelectorAll('#online-range button')) o.setAttribute('aria-pressed', String(o === b));
      if (stats) renderStats();
    });
  }
  $('table-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    restartTable();
  });
  let typing = 0;
  $('node-search').addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(restartTable, 300);
  });
  $('table-region').addEventListener('change', restartTable);
  $('table-online').addEventListener('change', restartTable);
  $('page-next').addEventListener('click', () => {
    if (!table.next) return;
    table.cursors = table.cursors.slice(0, table.index + 1).concat(table.next);
    table.index++;
    loadTable();
  });
  $('page-prev').addEventListener('click', () => {
    if (table.index === 0) return;
    table.index--;
    loadTable();
  });
  for (const [key, label] of COLUMNS) {
    const b = el('button', { type: 'button', class: 'sort', textContent: label });
    b.addEventListener('click', () => {
      table.sortDir = table.sortKey === key ? -table.sortDir : 1;
      table.sortKey = key;
      renderTable();
    });
    const th = el('th', { scope: 'col' }, b);
    th.dataset.key = key;
    $('node-head').append(th);
  }
}
