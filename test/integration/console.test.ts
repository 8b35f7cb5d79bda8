// The web console (docs/operations.md "Console"): its JSON and its page, driven in headless
// Chromium against real proxies over real Redis nodes. A ring whose node is killed and restarted,
// a cluster's slot map, a ring migration from double-write to done with the copy moving, and a
// proxy with users (the page's sign-in, and INFO's permission).
import http from 'node:http';
import Redis from 'ioredis';
import { Page } from 'playwright-core';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { ProxyServer } from '../../proxy/server/server';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { verifyMoved } from '../../proxy/migration/tools/verify';
import { saveVerifyRecord } from '../../proxy/migration/tools/verify-record';
import type { ConsoleState } from '../../proxy/console/state';
import { useCluster } from '../helpers/cluster';
import { client, startProxy } from '../helpers/proxy';
import { useRingGrow } from '../helpers/ring-grow';
import { useBrowser } from '../helpers/browser';
import { carryOf } from '../helpers/carried';

jest.setTimeout(120_000);

const browser = useBrowser();
const METRICS = { listen: '127.0.0.1:0' };

function get(port: number, path: string, authorization?: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, headers: authorization === undefined ? {} : { authorization } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
      })
      .on('error', reject);
  });
}

async function state(port: number, authorization?: string): Promise<ConsoleState> {
  const r = await get(port, '/console.json', authorization);
  expect(r.status).toBe(200);
  expect(r.type).toBe('application/json');
  return JSON.parse(r.body) as ConsoleState;
}

function metricsPort(proxy: ProxyServer): number {
  const port = proxy.metricsPort;
  if (port === null) throw new Error('no metrics listener');
  return port;
}

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** The page's console errors, without the browser's own line for a 401 the page asked for and handled. */
const realErrors = (errors: string[]): string[] => errors.filter((e) => !/status of 401/.test(e));

/** Resolves once `check` holds, asked every 100 ms (the page's CSP refuses Playwright's string predicates). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function nodeHealth(page: Page, addr: string): Promise<string | null> {
  return page.getAttribute(`#node-table tr[data-addr="${addr}"]`, 'data-health');
}

describe('a ring: nodes, and one killed and back', () => {
  let nodes: StandaloneNodes | undefined;
  let proxy: ProxyServer | undefined;
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3);
    const ring = nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
    proxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'fnv1a_64', nodes: ring }, metrics: METRICS, log: { level: 'silent' } }));
  }, 60_000);
  afterAll(async () => {
    await proxy?.close(500);
    await nodes?.stop();
  }, 30_000);

  test('the JSON has the proxy, every node and the ring placement; no password anywhere', async () => {
    const port = metricsPort(proxy!);
    const s = await state(port);
    expect(s.version).toBe(1);
    expect(s.proxy.mode).toBe('ring');
    expect(s.proxy.address).toBe(`127.0.0.1:${proxy!.address.port}`);
    expect(s.nodes.map((n) => n.addr)).toEqual(nodes!.addresses);
    expect(s.nodes.every((n) => n.health === 'up' && n.role === 'node')).toBe(true);
    expect(s.placement.a.kind).toBe('ring');
    if (s.placement.a.kind === 'ring') {
      expect(s.placement.a.nodes.map((n) => n.name)).toEqual(['n0', 'n1', 'n2']);
      expect(s.placement.a.nodes.reduce((sum, n) => sum + n.share, 0)).toBeCloseTo(1, 6);
    }
    expect(s.migration).toBeNull();
    expect(s.events[0].kind).toBe('start');
    // The page's files, from the package, with a policy that allows nothing from elsewhere.
    const page = await get(port, '/');
    expect(page.status).toBe(200);
    expect(page.type).toMatch(/^text\/html/);
    for (const file of ['/console/console.js', '/console/chart.js', '/console/console.css']) expect((await get(port, file)).status).toBe(200);
    expect((await get(port, '/console/nothing.js')).status).toBe(404);
  });

  test('CONFIG SET requirepass through the proxy makes the JSON ask for the password, and "" opens it again', async () => {
    const port = metricsPort(proxy!);
    const admin = client(proxy!);
    try {
      expect(await admin.config('SET', 'requirepass', 'console-pw')).toBe('OK');
      expect((await get(port, '/console.json')).status).toBe(401);
      expect((await state(port, basic('', 'console-pw'))).proxy.mode).toBe('ring');
      expect(await admin.config('SET', 'requirepass', '')).toBe('OK');
      expect((await state(port)).proxy.mode).toBe('ring');
    } finally {
      admin.disconnect();
    }
  });

  test('the page shows the nodes and follows one killed and restarted', async () => {
    const { page, errors } = await browser.open(`http://127.0.0.1:${metricsPort(proxy!)}/`);
    await page.waitForSelector('#status.live');
    const [a, b, c] = nodes!.addresses;
    for (const addr of [a, b, c]) await page.waitForSelector(`#node-table tr[data-addr="${addr}"][data-health="up"]`);
    expect(await page.textContent('#placement-a')).toContain('n2');
    // Traffic shows on the chart's source and the nodes' rates.
    const app = client(proxy!);
    try {
      for (let i = 0; i < 200; i++) await app.set(`console:${i}`, 'v');
    } finally {
      app.disconnect();
    }
    const victim = nodes!.nodes[1];
    victim.kill('SIGKILL');
    await page.waitForSelector(`#node-table tr[data-addr="${b}"][data-health="down"]`, { timeout: 20_000 });
    expect(await nodeHealth(page, a)).toBe('up');
    await page.waitForSelector('#event-list li[data-kind="node-down"]', { timeout: 20_000 });
    await victim.restart();
    await page.waitForSelector(`#node-table tr[data-addr="${b}"][data-health="up"]`, { timeout: 20_000 });
    const s = await state(metricsPort(proxy!));
    expect(s.series.some((x) => x.requests > 0)).toBe(true);
    expect(realErrors(errors)).toEqual([]);
  });
});

describe('a cluster: the slot map by master', () => {
  const cluster = useCluster({ masters: 3, replicasPerMaster: 1 });
  let proxy: ProxyServer | undefined;
  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds, { metrics: METRICS });
  }, 30_000);
  afterAll(async () => {
    await proxy?.close(500);
  });

  test('masters with their slot ranges, replicas with their master', async () => {
    const s = await state(metricsPort(proxy!));
    if (s.placement.a.kind !== 'cluster') throw new Error('expected a cluster placement');
    expect(s.placement.a.masters.length).toBe(3);
    expect(s.placement.a.masters.reduce((sum, m) => sum + m.slots, 0)).toBe(16384);
    expect(s.placement.a.unservedSlots).toBe(0);
    expect(s.nodes.filter((n) => n.role === 'master').length).toBe(3);
    const replicas = s.nodes.filter((n) => n.role === 'replica');
    expect(replicas.length).toBe(3);
    for (const r of replicas) expect(s.placement.a.masters.map((m) => m.addr)).toContain(r.name);

    const { page, errors } = await browser.open(`http://127.0.0.1:${metricsPort(proxy!)}/`);
    await page.waitForSelector('#status.live');
    const legend = await page.textContent('#placement-a');
    for (const m of s.placement.a.masters) expect(legend).toContain(`${m.addr}: ${m.slots} slots`);
    expect(await page.locator('#node-table tbody tr').count()).toBe(6);
    expect(await page.isHidden('#migration')).toBe(true);
    expect(realErrors(errors)).toEqual([]);
  });
});

describe('a proxy with users', () => {
  const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
  let proxy: ProxyServer | undefined;
  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds, {
      metrics: METRICS,
      auth: {
        password: 'default-secret-pw',
        users: [
          { name: 'ops', password: 'ops-secret-pw', commands: '-@all +info' },
          { name: 'app', password: 'app-secret-pw', commands: '+@all -info' },
        ],
      },
    });
  }, 30_000);
  afterAll(async () => {
    await proxy?.close(500);
  });

  test('the JSON asks for a user allowed to run INFO, with Redis\'s errors', async () => {
    const port = metricsPort(proxy!);
    const failures = proxy!.stats.authFailures;
    expect(await get(port, '/console.json')).toMatchObject({ status: 401, body: JSON.stringify({ error: 'NOAUTH Authentication required.' }) });
    expect(await get(port, '/console.json', basic('ops', 'wrong'))).toMatchObject({ status: 401, body: JSON.stringify({ error: 'WRONGPASS invalid username-password pair or user is disabled.' }) });
    expect(proxy!.stats.authFailures).toBe(failures + 1);
    expect(await get(port, '/console.json', basic('app', 'app-secret-pw'))).toMatchObject({ status: 403, body: JSON.stringify({ error: "NOPERM this user has no permissions to run the 'info' command" }) });
    const s = await state(port, basic('ops', 'ops-secret-pw'));
    expect(s.nodes.length).toBe(3);
    // A password given with no user is the default user's, as AUTH <password>.
    expect((await state(port, basic('', 'default-secret-pw'))).nodes.length).toBe(3);
    // Neither the state nor the page holds a password or a key.
    const app = client(proxy!, { username: 'app', password: 'app-secret-pw' });
    try {
      await app.set('console-secret-key', 'console-secret-value');
      const text = (await get(port, '/console.json', basic('ops', 'ops-secret-pw'))).body;
      for (const secret of ['secret-pw', 'console-secret']) expect(text).not.toContain(secret);
      expect(JSON.parse(text).clients.byUser).toEqual({ app: 1 });
    } finally {
      app.disconnect();
    }
    // Read-only: nothing but GET.
    const post = await new Promise<number>((resolve, reject) =>
      http.request({ host: '127.0.0.1', port, path: '/console.json', method: 'POST' }, (res) => resolve(res.statusCode ?? 0)).on('error', reject).end(),
    );
    expect(post).toBe(404);
  });

  test('the page signs in: a wrong password and a user without INFO are refused, then it shows the nodes', async () => {
    const { page, errors } = await browser.open(`http://127.0.0.1:${metricsPort(proxy!)}/`);
    await page.waitForSelector('#login:not([hidden])');
    expect(await page.isHidden('#main')).toBe(true);
    const signIn = async (user: string, password: string): Promise<void> => {
      await page.fill('#login input[name=user]', user);
      await page.fill('#login input[name=password]', password);
      await page.click('#login button');
    };
    await signIn('ops', 'nope');
    await page.waitForSelector('#login-error:text-matches("^WRONGPASS")');
    await signIn('app', 'app-secret-pw');
    await page.waitForSelector('#login-error:text-matches("^NOPERM")');
    await signIn('ops', 'ops-secret-pw');
    await page.waitForSelector('#status.live');
    expect(await page.isHidden('#login')).toBe(true);
    expect(await page.locator('#node-table tbody tr[data-health="up"]').count()).toBe(3);
    // The browser logs each refused fetch (401/403); nothing else went wrong.
    expect(errors.filter((e) => !/status of 40[13]/.test(e))).toEqual([]);
  });
});

describe('a ring migration from double-write to done', () => {
  const grow = useRingGrow();
  const KEYS = 6000;

  test('the page follows the copy\'s progress and the phases, with the fleet and the feeds', async () => {
    const config: Config = { ...grow.config(), metrics: { ...METRICS, console: true } };
    const proxy = await ProxyServer.start(config);
    const admin = client(proxy);
    const direct = new NodeClient(config);
    try {
      // Keys on ring A only (written to its nodes directly), so the copy has them to carry.
      const placement = Placement.fromConfig(grow.config().ring, grow.config().migration);
      const owners = new Map<string, Redis>();
      try {
        for (const addr of placement.from.masters()) {
          const [host, port] = addr.split(':');
          owners.set(addr, new Redis({ host, port: Number(port), maxRetriesPerRequest: 0 }));
        }
        const batches = new Map<string, string[]>();
        for (let i = 0; i < KEYS; i++) {
          const key = `console:${i}`;
          const addr = ownerOfKey(placement.from, Buffer.from(key)) ?? '';
          batches.set(addr, [...(batches.get(addr) ?? []), key, String(i)]);
        }
        for (const [addr, args] of batches) await owners.get(addr)!.mset(...args);
      } finally {
        for (const c of owners.values()) c.disconnect();
      }

      const { page, errors } = await browser.open(`http://127.0.0.1:${metricsPort(proxy)}/`);
      await page.waitForSelector('#migration[data-phase="double-write"]');
      await page.waitForSelector('#fleet tbody tr[data-phase="double-write"]');
      const replication = (await carryOf(admin)) === 'replication';
      if (replication) {
        // The history copy is each node's full sync, begun when the proxy followed the node (before the keys were written).
        await page.waitForSelector('#copy-text[data-done="true"]', { timeout: 30_000 });
        expect(await page.textContent('#copy-text')).toContain('History copy (full syncs) done');
        expect(await page.textContent('#next')).toContain('slotproxy migrate verify');
      } else {
        expect(await page.textContent('#copy-text')).toContain('not started');
        expect(await page.textContent('#next')).toContain('slotproxy migrate copy');
      }
      await until('two change feeds', async () => (await page.locator('#feeds tbody tr').count()) === 2);

      // A copy slow enough to be watched: its progress moves on the page, then it is done. Under
      // the replication carry a new full sync of each node, whose restores on B are what --rate caps.
      const copy = copyHistory(direct, placement, { rate: replication ? 400 : 1000, batch: 100, restart: true, progress: false });
      const copiedOnPage = async (): Promise<number> => Number(await page.getAttribute('#copy-text', 'data-copied'));
      const copyingPast = (n: number) => async (): Promise<boolean> => (await copiedOnPage()) > n && (await page.getAttribute('#copy-text', 'data-done')) === 'false';
      await until('the copy under way', copyingPast(0));
      const first = await copiedOnPage();
      await until('the copy moving on', copyingPast(first));
      expect(await page.textContent('#copy-text')).toMatch(/keys\/s read/);
      const result = await copy;
      await page.waitForSelector('#copy-text[data-done="true"]', { timeout: 30_000 });
      expect(await copiedOnPage()).toBe(result.copied);

      // migrate verify's result, as the command saves it on side A, shows on the page.
      expect(await page.textContent('#verify')).toContain('No verify result known');
      const verified = await verifyMoved(direct, placement, { ttlToleranceMs: 2000, batch: 500, show: 0, progress: false });
      expect(verified.differing).toBe(0);
      await saveVerifyRecord(direct, placement, { at: Date.now(), compared: verified.compared, differing: verified.differing, inFlight: verified.inFlight });
      await page.waitForSelector('#verify[data-differing="0"]');
      expect(await page.textContent('#verify')).toContain(`${verified.compared.toLocaleString('en-US')} moved keys compared, 0 differ`);

      expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
      await page.waitForSelector('#migration[data-phase="read-new"]');
      expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'done')).toBe('OK');
      await page.waitForSelector('#migration[data-phase="done"]');
      await page.waitForSelector('#fleet tbody tr[data-phase="done"]');
      const phases = await page.locator('#event-list li[data-kind="phase"]').allTextContents();
      expect(phases.some((t) => t.includes('double-write -> read-new'))).toBe(true);
      expect(phases.some((t) => t.includes('read-new -> done'))).toBe(true);
      expect(await page.textContent('#placement-b')).toContain('Side B');
      expect(realErrors(errors)).toEqual([]);
    } finally {
      direct.close();
      admin.disconnect();
      await proxy.close(500);
    }
  });
});
