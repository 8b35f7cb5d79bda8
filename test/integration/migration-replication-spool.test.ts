// The replication carry into a slow side B (real slotproxy processes, a ring grown 2 -> 3 over real
// redis-servers, B's new node held by CLIENT PAUSE WRITE while ~30 MB per node are written straight
// on A): the follower reads its links at full speed and keeps what B has not taken in its spool
// file, so a 16 MB client-output-buffer-limit for replicas on A never cuts the link (no second full
// sync, no resume), the spool grows then drains, and B ends exact (DUMP of every moving key). With
// a spool too small, the follower stops reading and A holds the stream in its replica's output
// buffer (more than 8 MB), as for a slow replica; under A's default limit the link survives,
// under a 1 MB one A cuts it and a new full sync makes B exact again.
import fs from 'node:fs';
import Redis from 'ioredis';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';
import { freePort } from '../../cmd/sandbox/ports';

const grow = useRingGrow();
const nodeClients = new NodeClients();
let dir = '';
let spoolDir = '';

beforeAll(() => {
  dir = tempDir('slotproxy-follow-spool-');
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function open(addr: string): Redis {
  return nodeClients.open(addr);
}

function setup(maxBytes: number): { config: Record<string, unknown>; placement: Placement; slow: string } {
  const cfg = grow.config();
  const to = (cfg.migration?.to as { nodes: unknown[] }).nodes;
  // B's pause is no command timeout here: each batch waits for B, as it would for a slow B.
  const config = { mode: 'ring', ring: { hash: 'md5', nodes: cfg.ring.nodes }, backend: { commandTimeoutMs: 120_000 }, migration: { phase: 'double-write', carry: 'replication', spool: { dir: spoolDir, maxBytes }, to: { nodes: to } } };
  const placement = Placement.fromConfig(cfg.ring, cfg.migration);
  const slow = (placement.to?.masters() ?? []).find((b) => !placement.from.masters().includes(b)) as string;
  return { config, placement, slow };
}

beforeEach(async () => {
  spoolDir = fs.mkdtempSync(`${dir}/spool-`);
  for (const n of grow.nodes().nodes) {
    await n.command('FLUSHALL');
    await n.command('CONFIG', 'RESETSTAT');
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

/** `addr=value` per followed node of one INFO field. */
function perNode(info: string, field: string): Map<string, number> {
  const line = new RegExp(`${field}:(\\S+)`).exec(info)?.[1] ?? '';
  return new Map(line.split(',').filter((p) => p !== '').map((p) => [p.slice(0, p.lastIndexOf('=')), Number(p.slice(p.lastIndexOf('=') + 1))]));
}

function stat(info: string, field: string): number {
  return Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? NaN);
}

/** Once both nodes are followed live and every write made on A is on B. */
async function caughtUp(port: number, placement: Placement): Promise<string> {
  await eventually(() => proxyInfo(port), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 60_000);
  for (const a of placement.from.masters()) expect(Number(await open(a).call('WAIT', '1', '60000'))).toBe(1);
  return proxyInfo(port);
}

/**
 * Straight on each node of A, in pipelines of 40: 8 KB values overwritten in turn (the last write
 * wins only in order), counters and a list, on moving keys and on keys that stay (read past).
 */
async function writeOnA(placement: Placement, rounds: number): Promise<void> {
  const big = 'x'.repeat(8000);
  await Promise.all(
    placement.from.masters().map(async (a) => {
      const node = open(a);
      const keys = [...Array(4000).keys()].map((i) => `k:${a}:${i}`).filter((k) => ownerOfKey(placement.from, Buffer.from(k)) === a);
      for (let r = 0; r < rounds; r++) {
        const p = node.pipeline();
        for (let i = 0; i < 40; i++) {
          const n = r * 40 + i;
          p.set(keys[n % 300], `${n}:${big}`);
          if (i % 8 === 0) p.incr(keys[300 + (n % 20)]);
          if (i % 8 === 4) p.rpush(keys[320 + (n % 5)], n);
        }
        await p.exec();
      }
    }),
  );
}

/** Every key of A that moves whose DUMP differs on its owner in B (or a note that none moved). */
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
  if (moving < 100) out.push(`only ${moving} moving keys`);
  return out;
}

async function fullSyncsOn(placement: Placement): Promise<number[]> {
  return Promise.all(placement.from.masters().map(async (a) => stat(String(await open(a).info('stats')), 'sync_full')));
}

/**
 * A replica limit a replica that keeps up survives on a loaded machine (8 MB cut a keeping-up
 * follower once under CI's two jest workers), well below the ~30 MB B falls behind by.
 */
const REPLICA_LIMIT = 16 * 1024 * 1024;

test('a slow side B: the follower spools the stream, A\'s 16 MB replica buffer limit never cuts the link, and B ends exact', async () => {
  const { config, placement, slow } = setup(512 * 1024 * 1024);
  for (const a of placement.from.masters()) await open(a).call('CONFIG', 'SET', 'client-output-buffer-limit', `replica ${REPLICA_LIMIT} 0 0`);
  const { proxy, port } = await startProxyProcess(config, dir);
  await caughtUp(port, placement);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);

  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  await writeOnA(placement, 90);
  // ~30 MB per node: beyond what the follower holds in memory (4 MiB) and A's limit, so the rest waits in its spool.
  const during = await eventually(() => proxyInfo(port), (t) => [...perNode(t, 'migration_follow_spool_bytes').values()].filter((n) => n > REPLICA_LIMIT).length === 2, 30_000);
  expect(fs.readdirSync(spoolDir)).toEqual([]); // unlinked once opened: nothing is left behind, even by kill -9
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  expect([...perNode(info, 'migration_follow_spool_bytes').values()]).toEqual([0, 0]);
  expect([...perNode(info, 'migration_follow_spool_full').values()]).toEqual([0, 0]);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(info).toMatch(/migration_follow_resumes:0\r\n/);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  expect(proxy.log).not.toMatch(/replication link to a node of side A lost/);
  expect(await differences(placement)).toEqual([]);
  expect(during).toMatch(/migration_follows:\S+=live,\S+=live/);
  proxy.kill('SIGTERM');
}, 180_000);

test('a spool too small for a slow side B: the follower stops reading the link, A holds the stream as for a slow replica, and B ends exact', async () => {
  const { config, placement, slow } = setup(1024 * 1024);
  const metricsPort = await freePort();
  const { proxy, port } = await startProxyProcess({ ...config, metrics: { listen: `127.0.0.1:${metricsPort}` } }, dir);
  await caughtUp(port, placement);

  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  await writeOnA(placement, 90);
  await proxy.waitForLog(/stream spool is full/, 30_000, 2);
  const held = await Promise.all(placement.from.masters().map(async (a) => Number(/ omem=(\d+)/.exec(String(await open(a).call('CLIENT', 'LIST', 'TYPE', 'replica')))?.[1])));
  // What the follower does not read waits on A, in its replica's output buffer: more than 8 MB of it.
  for (const omem of held) expect(omem).toBeGreaterThan(8 * 1024 * 1024);
  const full = await proxyInfo(port);
  for (const n of perNode(full, 'migration_follow_spool_full').values()) expect(n).toBeGreaterThanOrEqual(1);
  for (const n of perNode(full, 'migration_follow_spool_bytes').values()) expect(n).toBeGreaterThanOrEqual(1024 * 1024);
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  for (const a of placement.from.masters()) {
    expect(Number(new RegExp(`slotproxy_migration_follow_spool_full_total\\{node="${a}"\\} (\\d+)`).exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    expect(Number(new RegExp(`slotproxy_migration_follow_spool_bytes\\{node="${a}"\\} (\\d+)`).exec(metrics)?.[1])).toBeGreaterThanOrEqual(1024 * 1024);
    // The flag the shipped alert (SlotproxyMigrationFollowSpoolFull) fires on: the link is not read now.
    expect(metrics).toContain(`slotproxy_migration_follow_spool_paused{node="${a}"} 1`);
  }
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  expect([...perNode(info, 'migration_follow_spool_bytes').values()]).toEqual([0, 0]);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(info).toMatch(/migration_follow_resumes:0\r\n/);
  expect(await fullSyncsOn(placement)).toEqual([1, 1]);
  expect(proxy.log).toMatch(/stream spool has room again/);
  // One warning per episode of a full spool, not one per chunk read while it stays full.
  expect((proxy.log.match(/stream spool is full/g) ?? []).length).toBe([...perNode(info, 'migration_follow_spool_full').values()].reduce((n, v) => n + v, 0));
  const after = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  for (const a of placement.from.masters()) expect(after).toContain(`slotproxy_migration_follow_spool_paused{node="${a}"} 0`);
  expect(await differences(placement)).toEqual([]);
  proxy.kill('SIGTERM');
}, 180_000);

test('a spool too small and A\'s 1 MB replica buffer limit: A cuts the link as it would a slow replica\'s, the follower syncs again, and B ends exact', async () => {
  const { config, placement, slow } = setup(1024 * 1024);
  // Redis 7 takes max(limit, repl-backlog-size): what A cuts for is beyond its backlog, so a full sync follows.
  for (const a of placement.from.masters()) await open(a).call('CONFIG', 'SET', 'client-output-buffer-limit', 'replica 1mb 0 0');
  const { proxy, port } = await startProxyProcess(config, dir);
  await caughtUp(port, placement);

  await open(slow).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  await writeOnA(placement, 90);
  await proxy.waitForLog(/replication link to a node of side A lost/, 30_000, 2);
  await open(slow).call('CLIENT', 'UNPAUSE');

  const info = await caughtUp(port, placement);
  expect([...perNode(info, 'migration_follow_spool_bytes').values()]).toEqual([0, 0]);
  // At least one more full sync per node (more when A cuts a full sync too, its writes still coming).
  expect(stat(info, 'migration_follow_full_syncs')).toBeGreaterThanOrEqual(4);
  for (const n of await fullSyncsOn(placement)) expect(n).toBeGreaterThanOrEqual(2);
  expect(await differences(placement)).toEqual([]);
  proxy.kill('SIGTERM');
}, 180_000);
