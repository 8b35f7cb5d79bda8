// The HTTP listener's protection (docs/configuration.md `metrics`, docs/security.md): HTTP Basic as
// the proxy's users allowed INFO, or a password of its own, for /metrics and /console.json; TLS of
// its own with the test CA's certificate. And under --workers 2: the primary serves one console for
// the process group (both workers' clients summed, one migration state), checking credentials as
// the workers' users say, over HTTPS.

import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import Redis from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import type { ConsoleState } from '../../proxy/console/state';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freePort } from '../../cmd/sandbox/ports';
import { ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { TestCerts, makeTestCerts } from '../helpers/certs';

jest.setTimeout(60_000);

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** GET over HTTPS (`ca` trusted) or plain HTTP (`ca` null). */
function get(port: number, urlPath: string, ca: string | null, authorization?: string): Promise<Answer> {
  const headers = authorization === undefined ? {} : { authorization };
  return new Promise((resolve, reject) => {
    const onResponse = (res: http.IncomingMessage): void => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    };
    const req = ca === null
      ? http.get({ host: '127.0.0.1', port, path: urlPath, headers, agent: false }, onResponse)
      : https.get({ host: '127.0.0.1', port, path: urlPath, headers, agent: false, ca: fs.readFileSync(ca) }, onResponse);
    req.on('error', reject);
  });
}

const USERS = {
  users: [
    { name: 'ops', password: 'ops-pw' },
    { name: 'app', password: 'app-pw', commands: '+@read +@write' },
  ],
};

let certs: TestCerts | undefined;
let nodes: StandaloneNodes | undefined;

beforeAll(async () => {
  certs = makeTestCerts();
  nodes = await StandaloneNodes.start(2);
}, 30_000);

afterAll(async () => {
  killAllProxies();
  await nodes?.stop();
  if (certs !== undefined) fs.rmSync(certs.dir, { recursive: true, force: true });
});

function ring(addrs: string[]): { hash: string; nodes: { name: string; addr: string }[] } {
  return { hash: 'fnv1a_64', nodes: addrs.map((addr, i) => ({ name: `n${i}`, addr })) };
}

describe('metrics.auth: users, with metrics.tls', () => {
  let proxy: ProxyServer | undefined;
  let port = 0;
  beforeAll(async () => {
    const c = certs!;
    proxy = await ProxyServer.start(parseConfig({
      listen: '127.0.0.1:0',
      mode: 'ring',
      ring: ring(nodes!.addresses),
      auth: USERS,
      metrics: { listen: '127.0.0.1:0', auth: 'users', tls: { cert: c.serverCert, key: c.serverKey } },
      log: { level: 'silent' },
    }));
    port = proxy.metricsPort ?? 0;
  });
  afterAll(() => proxy?.close(200));

  test('/metrics: 401 with a Basic challenge without credentials or with a wrong password, 200 for a user allowed INFO, 403 for one who is not', async () => {
    const none = await get(port, '/metrics', certs!.ca);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic realm="slotproxy"/);
    expect(none.body).toBe('NOAUTH Authentication required.\n');
    expect((await get(port, '/metrics', certs!.ca, basic('ops', 'wrong'))).status).toBe(401);
    const ok = await get(port, '/metrics', certs!.ca, basic('ops', 'ops-pw'));
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('slotproxy_connected_clients');
    const app = await get(port, '/metrics', certs!.ca, basic('app', 'app-pw'));
    expect(app.status).toBe(403);
    expect(app.body).toBe("NOPERM this user has no permissions to run the 'info' command\n");
  });

  test('/console.json asks the same; the page\'s files and /healthz, /readyz stay open', async () => {
    expect((await get(port, '/console.json', certs!.ca)).status).toBe(401);
    expect((await get(port, '/console.json', certs!.ca, basic('app', 'app-pw'))).status).toBe(403);
    const s = await get(port, '/console.json', certs!.ca, basic('ops', 'ops-pw'));
    expect(s.status).toBe(200);
    expect((JSON.parse(s.body) as ConsoleState).proxy.workers).toBe(1);
    expect((await get(port, '/', certs!.ca)).status).toBe(200);
    expect((await get(port, '/healthz', certs!.ca)).status).toBe(200);
    expect((await get(port, '/readyz', certs!.ca)).status).toBe(200);
  });

  test('plain HTTP to the TLS listener gets no answer', async () => {
    await expect(get(port, '/healthz', null)).rejects.toThrow();
  });
});

describe('metrics.auth: { password }', () => {
  let proxy: ProxyServer | undefined;
  beforeAll(async () => {
    proxy = await ProxyServer.start(parseConfig({
      listen: '127.0.0.1:0',
      mode: 'ring',
      ring: ring(nodes!.addresses),
      metrics: { listen: '127.0.0.1:0', auth: { password: 'scrape-pw' } },
      log: { level: 'silent' },
    }));
  });
  afterAll(() => proxy?.close(200));

  test('any user name with that password reads /metrics and /console.json; none or another password is 401', async () => {
    const port = proxy!.metricsPort ?? 0;
    expect((await get(port, '/metrics', null)).status).toBe(401);
    expect((await get(port, '/metrics', null, basic('prometheus', 'nope'))).status).toBe(401);
    expect((await get(port, '/metrics', null, basic('prometheus', 'scrape-pw'))).status).toBe(200);
    expect((await get(port, '/console.json', null)).status).toBe(401);
    expect((await get(port, '/console.json', null, basic('', 'scrape-pw'))).status).toBe(200);
  });
});

test('metrics.auth: users without an auth section is refused, with the reason', () => {
  expect(() => parseConfig({ mode: 'ring', ring: ring(['127.0.0.1:1']), metrics: { listen: '127.0.0.1:0', auth: 'users' } })).toThrow(
    /metrics\.auth.*users needs an auth section/,
  );
});

test('--workers 2: one console for the process (both workers\' clients summed, one migration state), /metrics and the console behind the workers\' users, over HTTPS', async () => {
  const dir = tempDir('slotproxy-metrics-workers-');
  const conns: Redis[] = [];
  try {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const file = path.join(dir, 'workers.json');
    const [a, b] = nodes!.addresses;
    fs.writeFileSync(file, JSON.stringify({
      listen: `127.0.0.1:${port}`,
      mode: 'ring',
      ring: ring([a]),
      migration: { phase: 'double-write', to: ring([b]) },
      auth: USERS,
      metrics: { listen: `127.0.0.1:${metricsPort}`, auth: 'users', tls: { cert: certs!.serverCert, key: certs!.serverKey } },
      workers: 2,
    }));
    const p = ProxyProcess.start(file);
    await p.waitForLog(/slotproxy is listening/, 20_000, 2);
    await p.waitForLog(/metrics endpoint is listening/, 20_000);
    // Enough connections that both workers get some (the primary hands them out in turn).
    for (let i = 0; i < 8; i++) conns.push(new Redis({ port, username: 'ops', password: 'ops-pw', maxRetriesPerRequest: 0 }));
    const pids = new Set<string>();
    for (const c of conns) pids.add(/proxy_process_id:(\d+)/.exec(String(await c.call('INFO', 'proxy')))?.[1] ?? '');
    expect(pids.size).toBe(2);
    const ca = certs!.ca;
    expect((await get(metricsPort, '/console.json', ca)).status).toBe(401);
    expect((await get(metricsPort, '/console.json', ca, basic('app', 'app-pw'))).status).toBe(403);
    expect((await get(metricsPort, '/metrics', ca)).status).toBe(401);
    expect((await get(metricsPort, '/metrics', ca, basic('app', 'app-pw'))).status).toBe(403);
    expect((await get(metricsPort, '/metrics', ca, basic('ops', 'ops-pw'))).status).toBe(200);
    await expect(get(metricsPort, '/healthz', null)).rejects.toThrow();
    const answer = await get(metricsPort, '/console.json', ca, basic('ops', 'ops-pw'));
    expect(answer.status).toBe(200);
    const s = JSON.parse(answer.body) as ConsoleState;
    expect(s.proxy.workers).toBe(2);
    expect(s.proxy.pid).toBe(p.child.pid);
    expect(s.clients.connected).toBe(8);
    expect(s.clients.byUser).toEqual({ ops: 8 });
    expect(s.migration?.phase).toBe('double-write');
    // Each node once, with both workers' connections to it.
    expect(s.nodes.map((n) => n.addr).sort()).toEqual([a, b].sort());
    expect((await get(metricsPort, '/', ca)).status).toBe(200);
    for (const c of conns) c.disconnect();
    const exited = p.exitCode();
    p.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    for (const c of conns) c.disconnect();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
