// The replication carry while side B's new node is paused (CLIENT PAUSE WRITE) and its commands
// time out (real slotproxy processes, a ring grown 2 -> 3 over real redis-servers, a 1 s command
// timeout so B's pause outlasts many of them): A cuts the link meanwhile, and the follower waits
// for B instead of looping on full syncs, resumes with +CONTINUE where A can continue, makes one
// new full sync where it cannot, never takes B's timeouts for refusals, and B ends exact.
import fs from 'node:fs';
import Redis from 'ioredis';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';

const grow = useRingGrow();
const nodeClients = new NodeClients();
let dir = '';
let spoolDir = '';

beforeAll(() => {
  dir = tempDir('slotproxy-follow-pause-');
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function open(addr: string): Redis {
  return nodeClients.open(addr);
}

function setup(maxBytes = 64 * 1024 * 1024): { config: Record<string, unknown>; placement: Placement; slow: string } {
  const cfg = grow.config();
  const to = (cfg.migration?.to as { nodes: unknown[] }).nodes;
  const config = { mode: 'ring', ring: { hash: 'md5', nodes: cfg.ring.nodes }, backend: { commandTimeoutMs: 1000 }, migration: { phase: 'double-write', carry: 'replication', spool: { dir: spoolDir, maxBytes }, to: { nodes: to } } };
  const placement = Placement.fromConfig(cfg.ring, cfg.migration);
  const slow = (placement.to?.masters() ?? []).find((b) => !placement.from.masters().includes(b)) as string;
  return { config, placement, slow };
}

beforeEach(async () => {
  spoolDir = fs.mkdtempSync(`${dir}/spool-`);
  for (const n of grow.nodes().nodes) {
    await n.command('FLUSHALL');
    await n.command('CONFIG', 'RESETSTAT');
    await n.command('CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
  }
});

afterEach(async () => {
  const cfg = grow.config();
  for (const n of cfg.migration?.to && 'nodes' in cfg.migration.to ? cfg.migration.to.nodes : []) await open(n.addr as string).call('CLIENT', 'UNPAUSE');
  for (const n of cfg.ring.nodes) await open(n.addr as string).call('CONFIG', 'SET', 'client-output-buffer-limit', 'replica 256mb 64mb 60');
  nodeClients.closeAll();
  killAllProxies();
});

async function proxyInfo(port: number): Promise<string> {
  return String(await open(`127.0.0.1:${port}`).info('proxy'));
}

function stat(info: string, field: string): number {
  return Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? NaN);
}

async function caughtUp(port: number, placement: Placement): Promise<string> {
  await eventually(() => proxyInfo(port), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 60_000);
  for (const a of placement.from.masters()) expect(Number(await open(a).call('WAIT', '1', '60000'))).toBe(1);
  return proxyInfo(port);
}

/** Connections B's node took: each command timeout of the proxy's closes one, and it connects again. */
async function connectionsTo(node: string): Promise<number> {
  return stat(String(await open(node).info('stats')), 'total_connections_received');
}

/** Once the proxy's commands to paused `node` have timed out `n` more times. */
async function timeoutsOn(node: string, n: number): Promise<void> {
  const before = await connectionsTo(node);
  await eventually(() => connectionsTo(node), (c) => c >= before + n, 30_000);
}

async function fullSyncsOn(placement: Placement): Promise<number[]> {
  return Promise.all(placement.from.masters().map(async (a) => stat(String(await open(a).info('stats')), 'sync_full')));
}

/** Moving keys of each node of A: counters, and 8 KB values overwritten in turn. */
function movingKeys(placement: Placement, a: string): string[] {
  return [...Array(3000).keys()].map((i) => `k:${a}:${i}`).filter((k) => ownerOfKey(placement.from, Buffer.from(k)) === a && placement.copyTarget(Buffer.from(k)) !== null);
}

async function writeOnA(placement: Placement, rounds: number, size: number): Promise<void> {
  const big = 'x'.repeat(size);
  await Promise.all(
    placement.from.masters().map(async (a) => {
      const node = open(a);
      const keys = movingKeys(placement, a);
      for (let r = 0; r < rounds; r++) {
        const p = node.pipeline();
        for (let i = 0; i < 40; i++) {
          const n = r * 40 + i;
          p.set(keys[n % 100], `${n}:${big}`);
          p.incr(keys[100 + (n % 10)]);
        }
        await p.exec();
      }
    }),
  );
}

/** Every key of A that moves whose DUMP differs on its owner in B (or a note that too few moved). */
async function differences(placement: Placement): Promise<string[]> {
  const out: string[] = [];
  let moving = 0;
  for (const a of placement.from.masters()) {
    const node = open(a);
    for (const key of await node.keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      const t = placement.copyTarget(Buffer.from(key));
      if (t === null || t.from !== a) continue;
      moving++;
      const [onA, onB] = await Promise.all([node.dumpBuffer(key), open(t.to).dumpBuffer(key)]);
      if (onB === null || !onA.equals(onB)) out.push(`${key}: differs on ${t.to}`);
    }
  }
  if (moving < 20) out.push(`only ${moving} moving keys`);
  return out;
}

test('the link cut while side B is paused: the follower waits for B, resumes with +CONTINUE, no new full sync, and B ends exact', async () => {
  const { config, placement, slow } = setup();
  const { proxy, port } = await startProxyProcess(config, dir);
  await writeOnA(placement, 2, 100);
  await caughtUp(port, placement);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);

  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  await writeOnA(placement, 5, 100);
  // B's applies wait past several command timeouts, with the link cut meanwhile.
  await timeoutsOn(slow, 2);
  for (const a of placement.from.masters()) await open(a).call('CLIENT', 'KILL', 'TYPE', 'replica');
  await proxy.waitForLog(/replication link to a node of side A lost/, 20_000, 2);
  await writeOnA(placement, 5, 100);
  const lostAt = proxy.log.length;
  await timeoutsOn(slow, 3);
  expect(proxy.log.slice(lostAt)).not.toMatch(/full sync of a node of side A begun/);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(stat(info, 'migration_follow_resumes')).toBeGreaterThanOrEqual(2);
  expect(proxy.log).not.toMatch(/side B refused a command/);
  expect(proxy.log).not.toMatch(/the follow of a node of side A stopped/);
  expect(await differences(placement)).toEqual([]);
  proxy.kill('SIGTERM');
}, 120_000);

test('A cuts the link of a follower whose spool is full while side B is paused: at most one new full sync per node, and B ends exact', async () => {
  const { config, placement, slow } = setup(1024 * 1024);
  for (const a of placement.from.masters()) await open(a).call('CONFIG', 'SET', 'client-output-buffer-limit', 'replica 1mb 0 0');
  const { proxy, port } = await startProxyProcess(config, dir);
  await writeOnA(placement, 2, 100);
  await caughtUp(port, placement);

  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  // Written until A has cut both links: the kernel's socket buffers on loopback hold several MB
  // before A's own output buffer for the replica starts to grow, so no fixed amount is sure to.
  const cut = proxy.waitForLog(/replication link to a node of side A lost/, 60_000, 2);
  let settled = false;
  void cut.then(() => (settled = true), () => (settled = true));
  while (!settled) await writeOnA(placement, 10, 8000);
  await cut;
  // Many command timeouts of B meanwhile: before the fix each was a full sync of its own.
  await timeoutsOn(slow, 8);
  const during = await fullSyncsOn(placement);
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  for (const n of during) expect(n).toBeLessThanOrEqual(2);
  for (const n of await fullSyncsOn(placement)) expect(n).toBeLessThanOrEqual(2);
  expect(stat(info, 'migration_follow_full_syncs')).toBeLessThanOrEqual(4);
  expect(await differences(placement)).toEqual([]);
  proxy.kill('SIGTERM');
}, 150_000);

test('a full sync while side B is paused: its restore waits for B through many command timeouts, one full sync per node, and B ends exact', async () => {
  const { config, placement, slow } = setup();
  await writeOnA(placement, 5, 100);
  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  const { proxy, port } = await startProxyProcess(config, dir);
  await proxy.waitForLog(/full sync of a node of side A begun/, 20_000, 2);
  // The snapshot's restore waits on paused B: before, each timeout failed it and a new full sync began.
  await timeoutsOn(slow, 6);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  expect(await proxyInfo(port)).toMatch(/migration_follows:\S+=loading,\S+=loading/);
  await writeOnA(placement, 5, 100);
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(proxy.log).not.toMatch(/side B refused a command|the follow of a node of side A stopped/);
  expect(await differences(placement)).toEqual([]);
  proxy.kill('SIGTERM');
}, 120_000);
