// The console: polls /console.json once a second and draws it. Read-only: it sends nothing but GETs,
// and where it suggests an action it shows the command to run. Everything it writes into the page
// goes through textContent (never innerHTML), so names from the proxy's state cannot become markup.
import { drawChart } from './chart.js';

const POLL_MS = 1000;
const PALETTE = ['#2f6fd6', '#d9822b', '#2e9d5b', '#b5449b', '#7a5cd6', '#c9a227', '#d1495b', '#3aa6a6'];
const PHASES = ['double-write', 'read-new', 'done'];
const CREDENTIALS = 'slotproxy-console-credentials';

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'style') Object.assign(e.style, v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function table(id, headers, rows) {
  $(id).replaceChildren(el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', {}, h)))), el('tbody', {}, ...rows));
}

const number = (n, digits = 0) => (n === null || n === undefined ? '–' : n.toLocaleString('en-US', { maximumFractionDigits: digits }));
const ms = (v) => (v === null || v === undefined ? '–' : v < 1 ? `${(v * 1000).toFixed(0)} µs` : `${v.toFixed(1)} ms`);
const time = (at) => new Date(at).toLocaleTimeString('en-GB');
function duration(seconds) {
  if (seconds === null || seconds === undefined) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const h = Math.floor(s / 3600);
  return h < 48 ? `${h} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(h / 24)} days`;
}

function facts(id, pairs) {
  $(id).replaceChildren(...pairs.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

function renderProxy(s) {
  const p = s.proxy;
  $('summary').textContent = `${p.version} · ${p.mode} mode · ${p.address} · up ${duration(p.uptimeSeconds)}`;
  facts('proxy-facts', [
    ['version', p.version],
    ['mode', p.mode],
    ['pid', p.pid],
    ['up for', duration(p.uptimeSeconds)],
    ['listen', `${p.listen}${p.tls ? ' (TLS)' : ''}`],
    ['console and /metrics', p.metricsListen ?? '–'],
    ['config file', p.configFile ?? '(not started from a file)'],
    ['last reload', p.lastReload === null ? 'never' : time(p.lastReload)],
  ]);
}

function renderNodes(s) {
  const rows = s.nodes.map((n) =>
    el(
      'tr',
      { 'data-addr': n.addr, 'data-health': n.health, class: n.health },
      el('td', {}, el('span', { class: `dot ${n.health}`, title: n.error ?? n.health }), n.health),
      el('td', {}, n.addr),
      el('td', {}, n.name ?? ''),
      el('td', {}, n.role),
      el('td', {}, n.side),
      el('td', { class: 'num' }, number(n.connections)),
      el('td', { class: 'num' }, number(n.requestsPerSecond)),
      el('td', { class: 'num' }, `${number(n.errorsPerSecond, 1)}/s (${number(n.errors)})`),
      el('td', { class: 'num' }, ms(n.pingMs)),
    ),
  );
  table('node-table', ['health', 'address', 'name', 'role', 'side', 'conns', 'req/s', 'errors', 'ping'], rows);
}

/** A bar of colored segments: [start, end) as fractions of the whole, with a legend. */
function bar(title, segments, legend) {
  return el(
    'div',
    { class: 'placement' },
    el('h3', {}, title),
    el('div', { class: 'bar' }, ...segments.map((g) => el('span', { title: g.title, style: { left: `${g.from * 100}%`, width: `${Math.max((g.to - g.from) * 100, 0.2)}%`, background: g.color } }))),
    el('ul', { class: 'legend' }, ...legend.map((l) => el('li', {}, el('span', { class: 'swatch', style: { background: l.color } }), l.text))),
  );
}

function placementView(title, view) {
  if (view === null) return el('div');
  if (view.kind === 'ring') {
    let at = 0;
    const segments = view.nodes.map((n, i) => {
      const g = { from: at, to: at + n.share, color: PALETTE[i % PALETTE.length], title: `${n.name} ${n.addr}` };
      at += n.share;
      return g;
    });
    const legend = view.nodes.map((n, i) => ({ color: PALETTE[i % PALETTE.length], text: `${n.name} ${n.addr}: ${(n.share * 100).toFixed(1)}% of keys (weight ${n.weight})` }));
    return bar(`${title}: ring (${view.hash}, ${view.distribution})`, segments, legend);
  }
  const segments = view.masters.flatMap((m, i) =>
    m.ranges.map(([a, b]) => ({ from: a / 16384, to: (b + 1) / 16384, color: PALETTE[i % PALETTE.length], title: `${m.addr}: slots ${a}-${b}` })),
  );
  const legend = view.masters.map((m, i) => ({ color: PALETTE[i % PALETTE.length], text: `${m.addr}: ${m.slots} slots (${m.ranges.map(([a, b]) => (a === b ? a : `${a}-${b}`)).join(', ')})` }));
  if (view.unservedSlots > 0) legend.push({ color: 'transparent', text: `${view.unservedSlots} slots served by no master` });
  return bar(`${title}: cluster slot map`, segments, legend);
}

function renderPlacement(s) {
  const migrating = s.placement.b !== null;
  $('placement-a').replaceChildren(placementView(migrating ? 'Side A' : 'Keys', s.placement.a));
  $('placement-b').replaceChildren(placementView('Side B', s.placement.b));
}

function renderClients(s) {
  const c = s.clients;
  facts('client-facts', [
    ['connected', number(c.connected)],
    ['requests/s', number(c.requestsPerSecond)],
    ['accepted since start', number(c.totalConnections)],
    ['refused (maxClients)', number(c.rejected)],
  ]);
  const users = Object.entries(c.byUser).sort((a, b) => b[1] - a[1]);
  table('users', ['user', 'clients'], users.map(([u, n]) => el('tr', {}, el('td', {}, u), el('td', { class: 'num' }, number(n)))));
}

function renderSentinel(s) {
  $('sentinel').hidden = s.sentinel.length === 0;
  table(
    'sentinel-table',
    ['master', 'now at', 'last failover'],
    s.sentinel.map((m) => el('tr', {}, el('td', {}, m.name), el('td', {}, m.addr ?? 'unknown'), el('td', {}, m.lastFailover === null ? 'none seen' : time(m.lastFailover)))),
  );
}

/** The replication carry's history copy: each node of side A's full sync, run by the proxy that follows it. */
function fullSyncText(c, pct, finished) {
  const of = c.total ?? c.keysOnA;
  if (finished) return `History copy (full syncs) done: ${number(c.scanned)} keys of side A read, ${number(c.copied)} restored on side B (${c.nodes} of ${c.nodes} nodes of side A synced).`;
  if (c.scanned === 0 && c.copied === 0 && c.nodesDone === 0) return `History copy (full syncs): starting; the proxies sync each node of side A as they follow it (slotproxy migrate copy shows it, --restart runs a new one). Side A holds ${number(c.keysOnA)} keys.`;
  return (
    `History copy (full syncs) ${pct}%: ${number(c.scanned)} of ${number(of)} keys of side A read, ${number(c.copied)} restored on side B; ` +
    `${number(c.scanRate)} keys/s read, ${number(c.copyRate)} restored/s; time left ${duration(c.secondsLeft)}; ${c.nodesDone} of ${c.nodes} nodes done.`
  );
}

function renderMigration(s) {
  const m = s.migration;
  $('migration').hidden = m === null;
  if (m === null) return;
  $('phase-steps').replaceChildren(
    ...PHASES.map((p) => el('span', { class: p === m.phase ? 'step current' : PHASES.indexOf(p) < PHASES.indexOf(m.phase) ? 'step past' : 'step', 'data-phase': p }, p)),
  );
  $('migration').dataset.phase = m.phase;
  const c = m.copy;
  if (c === null) $('copy').replaceChildren(el('p', {}, 'History copy: unknown (side A did not answer).'));
  else {
    const pct = (c.fraction * 100).toFixed(1);
    const finished = c.nodes > 0 && c.nodesDone === c.nodes;
    $('copy').replaceChildren(
      el('div', { class: 'progress', role: 'progressbar', 'aria-valuenow': pct, 'aria-valuemin': 0, 'aria-valuemax': 100 }, el('span', { style: { width: `${pct}%` } })),
      el(
        'p',
        { id: 'copy-text', 'data-copied': c.copied, 'data-done': finished },
        c.carry === 'replication'
          ? fullSyncText(c, pct, finished)
          : finished
          ? `History copy done: ${number(c.copied)} keys copied to side B (${c.nodes} of ${c.nodes} nodes of side A walked).`
          : c.scanned === 0 && c.nodesDone === 0
            ? `History copy not started: run slotproxy migrate copy. Side A holds ${number(c.keysOnA)} keys.`
            : `History copy ${pct}%: ${number(c.scanned)} of ${number(c.keysOnA)} keys of side A read, ${number(c.copied)} copied to side B; ` +
              `${number(c.scanRate)} keys/s read, ${number(c.copyRate)} copied/s; time left ${duration(c.secondsLeft)}; ${c.nodesDone} of ${c.nodes} nodes done.`,
      ),
    );
  }
  const v = m.verify;
  const verify = $('verify');
  if (v === null) {
    verify.removeAttribute('data-differing');
    verify.replaceChildren('No verify result known: ', el('code', {}, 'slotproxy migrate verify -c FILE'), ' compares every moved key (it saves its result here).');
  } else {
    verify.dataset.differing = v.differing;
    verify.className = v.differing === 0 ? '' : 'error';
    verify.textContent =
      `Last verify, ${time(v.at)}: ${number(v.compared)} moved keys compared, ${number(v.differing)} differ` +
      (v.inFlight > 0 ? ` (${number(v.inFlight)} were being written and kept reaching B)` : '') + '.';
  }
  $('fleet-error').textContent = m.fleetError === null ? '' : `cannot read the fleet: ${m.fleetError}`;
  table(
    'fleet',
    ['proxy', 'address', 'phase', 'feeds', 'refused (B\'s rules)'],
    (m.fleet ?? []).map((r) => el('tr', { 'data-phase': r.phase }, el('td', { title: `pid ${r.pid}, version ${r.version}` }, r.id), el('td', {}, r.addr), el('td', {}, r.phase), el('td', {}, r.feeds), el('td', {}, r.targetRefused === '-' ? 'nothing' : r.targetRefused))),
  );
  const f = m.feeds;
  table('feeds', ['node of side A', 'state', 'copied by'], (f?.nodes ?? []).map((n) => el('tr', { class: n.state === 'live' ? 'up' : 'down' }, el('td', {}, n.addr), el('td', {}, n.state), el('td', {}, n.copier))));
  $('feed-counts').textContent =
    f === null
      ? ''
      : `Carried: ${number(f.copied)} keys copied, ${number(f.unchanged)} already there, ${number(f.copyFailures)} failed copies (retried). ` +
        `${number(f.gaps)} gaps, ${number(f.rewalks)} re-walks${f.uncovered.length > 0 ? `; not covered: ${f.uncovered.join('; ')}` : '; every change covered'}.` +
        (f.missedAfterFence > 0 ? ` ${number(f.missedAfterFence)} changes missed after the fence.` : '');
  $('next').replaceChildren(...(m.next === null ? [] : ['Next: ', el('code', {}, m.next)]));
}

function renderEvents(s) {
  $('event-list').replaceChildren(
    ...s.events
      .slice()
      .reverse()
      .map((e) => el('li', { class: e.kind, 'data-kind': e.kind }, el('time', {}, time(e.at)), ' ', el('span', { class: 'kind' }, e.kind), ' ', e.text)),
  );
}

function renderCharts(s) {
  const times = s.series.map((x) => x.at);
  drawChart($('chart-requests'), times, [
    { label: 'requests/s', color: PALETTE[0], values: s.series.map((x) => x.requests) },
    { label: 'errors/s', color: PALETTE[6], values: s.series.map((x) => x.errors) },
  ], (v) => number(v));
  drawChart($('chart-latency'), times, [
    { label: 'mean', color: PALETTE[2], values: s.series.map((x) => x.latencyMs) },
    { label: 'p99 (bucket bound)', color: PALETTE[1], values: s.series.map((x) => x.p99Ms) },
  ], (v) => (v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(2)));
}

function render(s) {
  renderProxy(s);
  renderMigration(s);
  renderNodes(s);
  renderPlacement(s);
  renderClients(s);
  renderSentinel(s);
  renderEvents(s);
  renderCharts(s);
}

function showLogin(message) {
  $('main').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message;
  $('status').textContent = 'signed out';
}

async function poll() {
  const credentials = sessionStorage.getItem(CREDENTIALS);
  let res;
  try {
    res = await fetch('/console.json', { headers: credentials === null ? {} : { authorization: `Basic ${credentials}` }, cache: 'no-store' });
  } catch (err) {
    $('status').textContent = `proxy unreachable (${err.message}); retrying`;
    $('status').className = 'stale';
    return;
  }
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (res.status === 401 || res.status === 403) {
    if (credentials !== null) sessionStorage.removeItem(CREDENTIALS);
    return showLogin(credentials === null && res.status === 401 ? '' : body.error);
  }
  if (!res.ok) {
    $('status').textContent = `error: ${body.error}`;
    $('status').className = 'stale';
    return;
  }
  $('login').hidden = true;
  $('main').hidden = false;
  render(body);
  $('status').textContent = `live · ${time(body.at)}`;
  $('status').className = 'live';
}

let timer = null;
async function loop() {
  await poll();
  timer = setTimeout(loop, POLL_MS);
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  const form = new FormData($('login'));
  const bytes = new TextEncoder().encode(`${form.get('user')}:${form.get('password')}`);
  sessionStorage.setItem(CREDENTIALS, btoa(String.fromCharCode(...bytes)));
  clearTimeout(timer);
  void loop();
});

void loop();
