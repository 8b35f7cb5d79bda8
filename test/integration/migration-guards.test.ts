// After done, only side B may be served: a reload of a config without migration: that names side A
// again (or another back end) is refused with the reason, before and after the migration finished;
// a proxy started without migration: on nodes whose fleet is in done, naming another side B, is
// refused at start; one started with that side B is not. A ring a, b grown to a, b, c (the nodes
// shared, so only the fleet's fingerprint of side B tells the two apart).
import fs from 'node:fs';
import Redis from 'ioredis';
import { killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { setLogLevel } from '../../proxy/telemetry/log';

let nodes: StandaloneNodes | undefined;
const proxies: ProxyServer[] = [];

beforeAll(async () => {
  setLogLevel('silent');
  nodes = await StandaloneNodes.start(3);
}, 30_000);

afterAll(async () => {
  killAllProxies();
  await Promise.all(proxies.map((p) => p.close(200)));
  await nodes?.stop();
}, 30_000);

function ringOf(count: number): { hash: string; nodes: { name: string; addr: string }[] } {
  return { hash: 'murmur', nodes: nodes!.addresses.slice(0, count).map((addr, i) => ({ name: 'abc'[i], addr })) };
}

function config(ring: ReturnType<typeof ringOf>, migration?: Record<string, unknown>): Config {
  return parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring, ...(migration === undefined ? {} : { migration }), log: { level: 'silent' } });
}

const A = (): ReturnType<typeof ringOf> => ringOf(2);
const B = (): ReturnType<typeof ringOf> => ringOf(3);
const inDone = (): Config => config(A(), { phase: 'done', to: { nodes: B().nodes } });

async function start(cfg: Config): Promise<ProxyServer> {
  const p = await ProxyServer.start(cfg);
  proxies.push(p);
  return p;
}

/** Resolves once node a's CLIENT LIST shows a proxy of the fleet in done. */
async function fleetInDone(): Promise<void> {
  const a = new Redis({ port: nodes!.nodes[0].port, host: '127.0.0.1', disableClientInfo: true });
  try {
    for (let i = 0; i < 200; i++) {
      if (/name=slotproxy-fleet\|[^|]+\|done\|/.test(String(await a.client('LIST')))) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('no proxy in done registered on node a');
  } finally {
    a.disconnect();
  }
}

test('after done, a reload without migration: naming side A (or another back end) is refused, before and after the one naming side B finishes the migration', async () => {
  const p = await start(inDone());
  expect(() => p.reloadRing(config(A()))).toThrow(/^done is final: this config has no migration: and names side A \(ring .+\) again; side B \(ring .+\) is fenced and has taken every write since done, so A is stale\. Write side B as the back end: slotproxy migrate finish -c FILE$/);
  expect(() => p.reloadRing(config(ringOf(1)))).toThrow(/^after done, a config without migration: must name side B \(ring .+\) as its back end; it names ring /);
  // Side B: accepted, and a key is served from its ring-B node.
  p.reloadRing(config(B()));
  const c = new Redis({ host: '127.0.0.1', port: p.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  try {
    await c.set('guard:k', 'v');
    expect(await c.get('guard:k')).toBe('v');
  } finally {
    c.disconnect();
  }
  // Finished: side A is still refused on a later reload, side B still taken.
  expect(() => p.reloadRing(config(A()))).toThrow(/^done is final/);
  expect(() => p.reloadRing(config(B()))).not.toThrow();
  // Nor may a migration start from side A again.
  expect(() => p.reloadRing(config(A(), { phase: 'read-new', to: { nodes: B().nodes } }))).toThrow(/^done is final: this config migrates from side A \(ring .+\) again, which this proxy closed/);
}, 30_000);

test('a start without migration: on nodes whose fleet is in done is refused naming the proxies, unless it serves their side B', async () => {
  const done = await start(inDone());
  await fleetInDone();
  await expect(ProxyServer.start(config(A()))).rejects.toThrow(
    new RegExp(`^refused: these nodes are side A of a migration past done \\(live proxies \\S+ \\(127\\.0\\.0\\.1:${done.address.port}\\) in done write to its side B alone\\), so their keys are stale; start with side B as the back end`),
  );
  // Side B, on the same nodes and more: served.
  const b = await start(config(B()));
  expect(b.address.port).toBeGreaterThan(0);
}, 30_000);

test('a proxy still in double-write whose reload drops migration: is refused once side B is fenced (another proxy is in done)', async () => {
  await start(inDone()); // fences B, if no earlier test did
  const dir = tempDir('slotproxy-guards-');
  try {
    const raw = (migration?: Record<string, unknown>): Record<string, unknown> => ({ mode: 'ring', ring: A(), ...(migration === undefined ? {} : { migration }) });
    const { proxy, port, file } = await startProxyProcess(raw({ phase: 'double-write', to: { nodes: B().nodes } }), dir);
    fs.writeFileSync(file, JSON.stringify({ ...raw(), listen: `127.0.0.1:${port}`, log: { level: 'info' } }));
    proxy.kill('SIGHUP');
    await proxy.waitForLog(/a config without migration: refused in double-write; the migration phase stays/, 15_000);
    expect(proxy.log).toContain('side B is fenced: a proxy of the fleet is in done and writes to B alone, so side A is stale');
    const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
    try {
      expect(String(await c.call('PROXY', 'MIGRATION', 'STATUS'))).toContain('phase:double-write');
    } finally {
      c.disconnect();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);
