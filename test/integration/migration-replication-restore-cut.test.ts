// The replication carry when side A's links are cut while the snapshots are restored on B (real
// redis-servers, a real slotproxy process): a cluster of 2 masters moving into a ring of 2. B's
// nodes are paused for writes, so both followers hold their snapshots unrestored; then both links
// are killed on A (as a FLUSHALL during the sync does on 7.4, redis#13434) and A's masters move on.
// Each restore begins with a barrier on the other master's follower; a follower restoring its
// snapshot is not waited for, whatever its link's state, so neither waits on the other (before, the
// two barriers waited on each other for their 30 s cap) and B ends holding exactly A's keys.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';

let source: RedisCluster | undefined;
let ring: StandaloneNodes | undefined;
let proxy: { proxy: ProxyProcess; port: number } | undefined;
let dir = '';
const nodeClients = new NodeClients();

beforeAll(async () => {
  dir = tempDir('slotproxy-follow-restore-cut-');
  [source, ring] = await Promise.all([
    RedisCluster.start({ masters: 2, replicasPerMaster: 0, extraArgs: ['--repl-diskless-sync-delay', '0'] }),
    StandaloneNodes.start(2),
  ]);
}, 90_000);

afterAll(async () => {
  for (const b of ring?.addresses ?? []) await nodeClients.open(b).call('CLIENT', 'UNPAUSE').catch(() => undefined);
  nodeClients.closeAll();
  killAllProxies();
  await Promise.all([source?.stop(), ring?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

function field(text: string, name: string): string {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1].trim() ?? '';
}

async function info(): Promise<string> {
  return String(await nodeClients.open(`127.0.0.1:${proxy!.port}`).info('proxy'));
}

/** Every key and its string value on the given nodes, the proxy's own keys left out. */
async function contents(addresses: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const a of addresses) {
    const node = nodeClients.open(a);
    for (const key of await node.keys('*')) if (!key.startsWith('__slotproxy:')) out.set(key, String(await node.get(key)));
  }
  return out;
}

test('both links cut while their snapshots wait on a paused B: the restores do not wait on each other, and B ends exact', async () => {
  const masters = source!.masters.map((m) => m.address);
  const cluster = new Redis.Cluster([{ host: '127.0.0.1', port: source!.masters[0].port }]);
  try {
    for (let i = 0; i < 200; i++) await cluster.set(`k:${i}`, `before:${i}`);
  } finally {
    cluster.disconnect();
  }
  for (const b of ring!.addresses) await nodeClients.open(b).call('CLIENT', 'PAUSE', '60000', 'WRITE');
  proxy = await startProxyProcess({
    mode: 'cluster',
    cluster: { seeds: [masters[0]] },
    migration: { phase: 'double-write', carry: 'replication', to: { nodes: ring!.addresses.map((addr, i) => ({ name: `r${i}`, addr, weight: 1 })) } },
  }, dir);
  // Both snapshots received and waiting on B.
  await eventually(info, (t) => masters.every((m) => field(t, 'migration_follows').includes(`${m}=loading`)), 30_000);
  for (const m of masters) await nodeClients.open(m).call('CLIENT', 'KILL', 'TYPE', 'replica');
  await eventually(info, (t) => masters.every((m) => field(t, 'migration_follows').includes(`${m}=lost`)), 10_000);
  // A moves on past what the followers received: a barrier now has an offset to wait for.
  const cluster2 = new Redis.Cluster([{ host: '127.0.0.1', port: source!.masters[0].port }]);
  try {
    for (let i = 0; i < 200; i += 2) await cluster2.set(`k:${i}`, `after:${i}`);
  } finally {
    cluster2.disconnect();
  }
  const resumed = Date.now();
  for (const b of ring!.addresses) await nodeClients.open(b).call('CLIENT', 'UNPAUSE');
  // Caught up well inside the barrier's 30 s cap: every key of A on B with A's value.
  const a = await contents(masters);
  const b = await eventually(() => contents(ring!.addresses), (got) => got.size === a.size && [...a].every(([k, v]) => got.get(k) === v), 15_000);
  expect(b).toEqual(a);
  expect(a.get('k:0')).toBe('after:0');
  expect(proxy.proxy.log).not.toMatch(/could not be confirmed on side B/);
  expect(Date.now() - resumed).toBeLessThan(15_000);
}, 120_000);
