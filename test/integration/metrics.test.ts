// SPEC section 7, observability: the Prometheus endpoint. Exact counts after a known workload, the
// latency histogram's shape, errors by kind, redirections, back-end connections; and a check that
// the config's Grafana dashboard only queries metrics the endpoint really exports. And nutcracker's
// stats JSON in cluster mode: the masters as its servers.

import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { client, startProxy } from '../helpers/proxy';
import { ProxyServer } from '../../proxy/server/server';
import { ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { freePort } from '../../cmd/sandbox/ports';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { parseConfig } from '../../config/load';
import { keySlot } from '../../sharding/slot';

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let server: ProxyServer | undefined;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await startProxy(cluster().seeds, { metrics: { listen: '127.0.0.1:0' } });
}, 30_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  killAllProxies();
  await server?.close(500);
});

function proxy(): ProxyServer {
  if (server === undefined) throw new Error('the proxy did not start');
  return server;
}

function connect(): Redis {
  const c = client(proxy());
  clients.push(c);
  return c;
}

function get(urlPath: string, port = proxy().metricsPort): Promise<{ status: number; type: string; body: string }> {
  if (port === null) throw new Error('no metrics endpoint');
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: urlPath }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
      })
      .on('error', reject);
  });
}

/** `name{labels} value` lines -> value; labels as Prometheus writes them. */
function parse(body: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of body.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

async function scrape(): Promise<Map<string, number>> {
  const r = await get('/metrics');
  expect(r.status).toBe(200);
  expect(r.type).toMatch(/^text\/plain/);
  return parse(r.body);
}

function value(m: Map<string, number>, key: string): number {
  const v = m.get(key);
  if (v === undefined) throw new Error(`metric ${key} missing; have ${[...m.keys()].filter((k) => k.startsWith('slotproxy_c')).join(', ')}`);
  return v;
}

test('counts commands by name, errors by kind, latency, clients and back-end connections', async () => {
  const before = await scrape();
  const c = connect();
  for (let i = 0; i < 50; i++) await c.set(`metrics:${i}`, String(i));
  const pipeline = c.pipeline();
  for (let i = 0; i < 30; i++) pipeline.get(`metrics:${i}`);
  await pipeline.exec();
  await expect(c.mget('metrics:a', 'metrics:b')).rejects.toThrow(/CROSSSLOT/);
  await expect(c.call('AUTH', 'someone', 'wrong')).rejects.toThrow(/WRONGPASS/);
  await expect(c.call('LPUSH', 'metrics:1', 'x')).rejects.toThrow(/WRONGTYPE/);

  const after = await scrape();
  const delta = (key: string): number => value(after, key) - (before.get(key) ?? 0);
  expect(delta('slotproxy_commands_total{command="set"}')).toBe(50);
  expect(delta('slotproxy_commands_total{command="get"}')).toBe(30);
  expect(delta('slotproxy_errors_total{kind="crossslot"}')).toBe(1);
  expect(delta('slotproxy_errors_total{kind="auth"}')).toBe(1);
  expect(delta('slotproxy_errors_total{kind="reply"}')).toBe(1);
  expect(value(after, 'slotproxy_errors_total{kind="protocol"}')).toBe(0);
  // 50 SET + 30 GET + LPUSH went to a node.
  expect(delta('slotproxy_command_duration_seconds_count')).toBe(81);
  expect(delta('slotproxy_command_duration_seconds_bucket{le="+Inf"}')).toBe(81);
  expect(value(after, 'slotproxy_command_duration_seconds_sum')).toBeGreaterThan(0);
  // Buckets are cumulative.
  const buckets = [...after.entries()].filter(([k]) => k.startsWith('slotproxy_command_duration_seconds_bucket')).map(([, v]) => v);
  expect(buckets.length).toBe(17);
  for (let i = 1; i < buckets.length; i++) expect(buckets[i]).toBeGreaterThanOrEqual(buckets[i - 1]);
  expect(value(after, 'slotproxy_connected_clients')).toBeGreaterThanOrEqual(1);
  expect(value(after, 'slotproxy_backend_connections')).toBeGreaterThanOrEqual(3);
  expect(value(after, 'slotproxy_redirections_total{type="moved"}')).toBeGreaterThanOrEqual(0);
  expect(value(after, 'slotproxy_process_resident_memory_bytes')).toBeGreaterThan(0);
  expect(value(after, 'slotproxy_migration_phase{phase="none"}')).toBe(1);
  expect(value(after, 'slotproxy_migration_phase{phase="double-write"}')).toBe(0);
});

test('anything but GET /metrics, /readyz, /healthz, /health/backends or the console is a 404', async () => {
  expect((await get('/')).status).toBe(200); // the console (console.test.ts)
  expect((await get('/metrics/x')).status).toBe(404);
  expect((await get('/readyz/x')).body).toBe('slotproxy: GET /metrics, /readyz, /healthz, /health/backends, or / for the console\n');
});

test('/healthz answers while the event loop does; /readyz once the slot map is loaded; /health/backends lists every master up', async () => {
  expect(await get('/healthz')).toMatchObject({ status: 200, body: 'ok\n' });
  expect(await get('/readyz')).toMatchObject({ status: 200, body: 'ready\n' });
  const backends = await get('/health/backends');
  expect(backends.status).toBe(200);
  const body = JSON.parse(backends.body) as { healthy: boolean; nodes: { addr: string; up: boolean }[]; slotsWithoutMaster: number };
  expect(body).toMatchObject({ healthy: true, slotsWithoutMaster: 0 });
  expect(body.nodes.map((n) => n.addr).sort()).toEqual([...cluster().seeds].sort());
});

test('in ring mode a killed server leaves /readyz at 200 while the others\' keys are served; /health/backends and /metrics name it, and turn healthy once it is back', async () => {
  const nodes = await StandaloneNodes.start(3);
  const ring = { hash: 'md5', nodes: nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) };
  const ringProxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring, metrics: { listen: '127.0.0.1:0' }, log: { level: 'silent' } }));
  const c = client(ringProxy);
  try {
    const port = ringProxy.metricsPort ?? 0;
    expect(await get('/readyz', port)).toMatchObject({ status: 200, body: 'ready\n' });
    const healthy = await get('/health/backends', port);
    expect(healthy.status).toBe(200);
    expect(JSON.parse(healthy.body)).toMatchObject({ healthy: true, down: [], slotsWithoutMaster: 0 });
    const keys = Array.from({ length: 60 }, (_, i) => `readyz:${i}`);
    for (const k of keys) await c.set(k, k);
    // Which keys the dead server held, asked of the servers themselves.
    const onDead = new Set((await nodes.nodes[1].command('KEYS', 'readyz:*')) as string[]);
    expect(onDead.size).toBeGreaterThan(0);
    expect(onDead.size).toBeLessThan(keys.length);
    nodes.nodes[1].kill('SIGKILL');
    await nodes.nodes[1].waitForExit();
    expect(await get('/readyz', port)).toMatchObject({ status: 200, body: 'ready\n' });
    for (const k of keys) {
      if (onDead.has(k)) await expect(c.get(k)).rejects.toThrow();
      else expect(await c.get(k)).toBe(k);
    }
    expect(await get('/readyz', port)).toMatchObject({ status: 200, body: 'ready\n' });
    const down = await get('/health/backends', port);
    expect(down.status).toBe(503);
    expect(down.type).toBe('application/json');
    const body = JSON.parse(down.body) as { healthy: boolean; down: string[]; nodes: { addr: string; up: boolean; error: string | null }[] };
    expect(body.healthy).toBe(false);
    expect(body.down).toEqual([nodes.addresses[1]]);
    expect(body.nodes.filter((n) => n.up).map((n) => n.addr).sort()).toEqual([nodes.addresses[0], nodes.addresses[2]].sort());
    expect(body.nodes.find((n) => !n.up)?.error).toEqual(expect.any(String));
    const m = parse((await get('/metrics', port)).body);
    expect(value(m, `slotproxy_backend_up{node="${nodes.addresses[1]}"}`)).toBe(0);
    expect(value(m, `slotproxy_backend_up{node="${nodes.addresses[0]}"}`)).toBe(1);
    expect(await get('/healthz', port)).toMatchObject({ status: 200, body: 'ok\n' });
    await nodes.nodes[1].restart();
    let again = await get('/health/backends', port);
    // The pool reconnects with backoff: the next answers turn to 200 within its bound.
    for (let i = 0; i < 100 && again.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await get('/health/backends', port);
    }
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toMatchObject({ healthy: true, down: [] });
  } finally {
    c.disconnect();
    await ringProxy.close(200);
    await nodes.stop();
  }
}, 30_000);

test('the Grafana dashboard queries only metrics the endpoint exports', async () => {
  const dashboard = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', 'config', 'grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const exported = new Set([...(await scrape()).keys()].map((k) => k.replace(/\{.*$/, '')));
  const used = new Set<string>();
  for (const panel of dashboard.panels) {
    for (const t of panel.targets ?? []) for (const m of t.expr.match(/slotproxy_[a-z0-9_]+/g) ?? []) used.add(m);
  }
  expect(used.size).toBeGreaterThan(5);
  expect([...used].filter((m) => !exported.has(m))).toEqual([]);
});

test('with --workers 2 the primary serves the sum of both workers\' metrics', async () => {
  const dir = tempDir('slotproxy-metrics-');
  try {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const file = path.join(dir, 'workers.yaml');
    fs.writeFileSync(
      file,
      `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds[0]}]\nmetrics:\n  listen: 127.0.0.1:${metricsPort}\nworkers: 2\n`,
    );
    const p = ProxyProcess.start(file);
    await p.waitForLog(/slotproxy is listening/, 15_000, 2);
    await p.waitForLog(/metrics endpoint is listening/, 15_000);
    // Enough connections that both workers get some (the primary hands them out in turn).
    const conns = Array.from({ length: 8 }, () => new Redis({ port, maxRetriesPerRequest: 0 }));
    clients.push(...conns);
    const pids = new Set<string>();
    for (const c of conns) {
      pids.add(/proxy_process_id:(\d+)/.exec(String(await c.call('INFO', 'proxy')))?.[1] ?? '');
      await c.set('metrics:workers', 'x');
    }
    expect(pids.size).toBe(2);
    const r = await get('/metrics', metricsPort);
    expect(r.status).toBe(200);
    const m = parse(r.body);
    expect(value(m, 'slotproxy_commands_total{command="set"}')).toBe(8);
    expect(value(m, 'slotproxy_connected_clients')).toBe(8);
    expect(value(m, 'slotproxy_command_duration_seconds_count')).toBe(8);
    // Summed where a sum means something; the phase is the same in every worker.
    expect(value(m, 'slotproxy_migration_phase{phase="none"}')).toBe(1);
    // Ready: both workers serve.
    expect(await get('/readyz', metricsPort)).toMatchObject({ status: 200, body: 'ready\n' });
    const exited = p.exitCode();
    p.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

test('a cluster-mode config\'s nutcracker stats (stats.listen) list the cluster\'s masters as servers, keyed host:port; a SET counts on its slot\'s master', async () => {
  const dir = tempDir('slotproxy-nc-stats-cluster-');
  try {
    const [port, statsPort] = [await freePort(), await freePort()];
    const file = path.join(dir, 'stats.yaml');
    fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds[0]}]\nstats:\n  listen: 127.0.0.1:${statsPort}\n  intervalMs: 100\n  pool: main\n`);
    const p = ProxyProcess.start(file);
    await p.waitForLog(/slotproxy is listening/, 15_000);
    // No ready check nor client info: the SET is this client's only request.
    const c = new Redis({ port, maxRetriesPerRequest: 0, enableReadyCheck: false, disableClientInfo: true });
    clients.push(c);
    expect(await c.set('nc-stats:key', 'x')).toBe('OK');
    const owner = (await cluster().masterFor(keySlot(Buffer.from('nc-stats:key')))).address;
    const read = (): Promise<Record<string, Record<string, Record<string, number>>>> => new Promise((resolve, reject) => {
      let text = '';
      net.connect(statsPort, '127.0.0.1').on('data', (d: Buffer) => (text += d.toString())).on('end', () => resolve(JSON.parse(text))).on('error', reject);
    });
    let stats = await read();
    for (let i = 0; i < 100 && (stats.main?.[owner]?.requests ?? 0) < 1; i++) stats = await new Promise((r) => setTimeout(() => r(read()), 50));
    const servers = Object.keys(stats.main).filter((k) => typeof stats.main[k] === 'object');
    expect(servers.sort()).toEqual(cluster().masters.map((m) => m.address).sort());
    expect(stats.main[owner].requests).toBe(1);
    expect(stats.main[owner].responses).toBe(1);
    const exited = p.exitCode();
    p.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
