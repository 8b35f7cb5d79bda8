// A failover of side B loses no write the migration acknowledged (real redis-server processes, a
// real slotproxy process): a ring of 2 moving into a Redis Cluster of 3 masters with a replica each,
// on the replication carry. A counter, a list and a lock live in one slot of B. Its replica is
// stopped (SIGSTOP) behind enough written straight on its master, so what the master takes next
// cannot reach the replica; then writes come through the proxy, the follow applies them on the
// master, the master is killed (kill -9), the replica resumes and takes over (CLUSTER FAILOVER
// TAKEOVER). A follow that counted a write as applied when the master alone held it leaves the
// promoted replica without it; the proxy must carry it there. In double-write (replies after A)
// and in read-new (replies after B, then read back from B through the proxy). A master whose user may
// not run WAIT is not checked, and the follow goes on.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';
import { keySlot } from '../../sharding/slot';

/** More than the loopback sockets between a master and its replica can hold (tcp_rmem's max is 32 MB here). */
const MAX_FILLER_MB = 200;

/** The bytes the master holds in its output buffer for its replica (CLIENT LIST's omem). */
async function replicaOutputBytes(m: Redis): Promise<number> {
  const line = String(await m.call('CLIENT', 'LIST', 'TYPE', 'replica'));
  return Number(/ omem=(\d+)/.exec(line)?.[1] ?? 0);
}

let ring: StandaloneNodes | undefined;
let target: RedisCluster | undefined;
let proxy: { proxy: ProxyProcess; port: number } | undefined;
let dir = '';
const nodeClients = new NodeClients();
const stopped: RedisNode[] = [];

beforeAll(async () => {
  dir = tempDir('slotproxy-b-failover-');
  [ring, target] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start({ masters: 3, replicasPerMaster: 1 })]);
  const config = {
    mode: 'ring',
    ring: { hash: 'fnv1a_64', nodes: ring.addresses.map((addr, i) => ({ name: `a${i}`, addr })) },
    migration: { phase: 'double-write', carry: 'replication', to: { cluster: { seeds: [target.masters[0].address] } } },
  };
  proxy = await startProxyProcess(config, dir);
}, 90_000);

afterAll(async () => {
  for (const n of stopped) n.kill('SIGCONT');
  nodeClients.closeAll();
  killAllProxies();
  await Promise.all([ring?.stop(), target?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

/** A client of a node of B that is killed later: it does not reconnect (nor keep a timer for it). */
function direct(node: RedisNode): Redis {
  return nodeClients.track(new Redis({ host: '127.0.0.1', port: node.port, maxRetriesPerRequest: 0, retryStrategy: () => null, disableClientInfo: true }));
}

function viaProxy(): Redis {
  return nodeClients.track(new Redis({ host: '127.0.0.1', port: proxy!.port, maxRetriesPerRequest: 0, disableClientInfo: true}));
}

const usedTags = new Set<string>();

/** A hash tag not used yet whose slot's master in B has a running replica. */
async function tagOnReplicatedMaster(): Promise<{ tag: string; master: RedisNode }> {
  for (let i = 0; ; i++) {
    const tag = `{bf${i}}`;
    if (usedTags.has(tag)) continue;
    const master = await target!.masterFor(keySlot(Buffer.from(tag)));
    if ((await target!.replicasOf(master)).length === 0) continue;
    usedTags.add(tag);
    // The replica names this master; the master must also list it (a replica still syncing after
    // an earlier test's failover is not in ROLE yet, and the follow checks nothing without one).
    await eventually(async () => (await master.command('ROLE')) as [string, number, [string, string, string][]], (r) => r[2].some((x) => x[1] !== '0'), 30_000);
    return { tag, master };
  }
}

/** What side A holds of the tag's counter, list and lock (on whichever node of the ring has them). */
async function stateInA(tag: string): Promise<string[]> {
  for (const addr of ring!.addresses) {
    const node = nodeClients.open(addr);
    if ((await node.exists(`${tag}:counter`)) === 1) return state(node, tag);
  }
  throw new Error(`no node of side A holds ${tag}:counter`);
}

/** What A's node and B's current owner hold of the slot's counter, list and lock. */
async function state(node: Redis, tag: string): Promise<string[]> {
  const [counter, list, lock] = await Promise.all([node.get(`${tag}:counter`), node.lrange(`${tag}:list`, 0, -1), node.get(`${tag}:lock`)]);
  return [String(counter), list.join(','), String(lock)];
}

/**
 * Stops `master`'s replica, then writes straight on the master until the sockets between them are
 * full and the master holds megabytes for that replica itself: its next writes wait there.
 */
async function stopReplicaBehindFiller(master: RedisNode, tag: string): Promise<RedisNode> {
  const [replica] = await target!.replicasOf(master);
  expect(replica).toBeDefined();
  replica.kill('SIGSTOP');
  stopped.push(replica);
  const m = direct(master);
  const mb = 'x'.repeat(1024 * 1024);
  // Until the master holds some of it for the replica itself: the sockets between them are full.
  for (let i = 0; (await replicaOutputBytes(m)) < 4 * 1024 * 1024; i++) {
    if (i >= MAX_FILLER_MB) throw new Error(`the master still sends the replica everything after ${i} MB`);
    await m.set(`${tag}:filler`, mb);
  }
  return replica;
}

/** kill -9 of `master`; `replica` resumes and takes its slots over. */
async function failOver(master: RedisNode, replica: RedisNode): Promise<void> {
  master.kill('SIGKILL');
  await master.waitForExit();
  replica.kill('SIGCONT');
  stopped.splice(stopped.indexOf(replica), 1);
  expect(await replica.cli('CLUSTER', 'FAILOVER', 'TAKEOVER')).toBe('OK');
  await eventually(() => replica.cli('ROLE'), (r) => r.startsWith('master'), 20_000);
  await target!.waitForClusterOk(30_000);
}

test('double-write: writes the follow applied on a master of B that its replica never got are on the promoted replica', async () => {
  const { tag, master } = await tagOnReplicatedMaster();
  const c = viaProxy();
  for (let i = 0; i < 5; i++) await Promise.all([c.incr(`${tag}:counter`), c.rpush(`${tag}:list`, `e${i}`)]);
  const m = direct(master);
  await eventually(() => state(m, tag), (s) => s[0] === '5', 30_000);

  const replica = await stopReplicaBehindFiller(master, tag);
  for (let i = 5; i < 10; i++) await Promise.all([c.incr(`${tag}:counter`), c.rpush(`${tag}:list`, `e${i}`)]);
  expect(await c.set(`${tag}:lock`, 'token-1', 'PX', 600_000, 'NX')).toBe('OK');
  // The follow ran some on the master (its replica is stopped, so only the master has them).
  await eventually(() => state(m, tag), (s) => s[0] !== '5', 30_000);

  await failOver(master, replica);
  const r = nodeClients.open(replica.address);
  const want = await stateInA(tag);
  expect(want).toEqual(['10', 'e0,e1,e2,e3,e4,e5,e6,e7,e8,e9', 'token-1']);
  await eventually(() => state(r, tag), (s) => JSON.stringify(s) === JSON.stringify(want), 30_000);
}, 180_000);

test('read-new: a write answered after B is on B after its master is killed and its replica promoted', async () => {
  const c = viaProxy();
  expect(await c.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  const { tag, master } = await tagOnReplicatedMaster();
  for (let i = 0; i < 5; i++) await Promise.all([c.incr(`${tag}:counter`), c.rpush(`${tag}:list`, `e${i}`)]);
  const m = direct(master);
  await eventually(() => state(m, tag), (s) => s[0] === '5', 30_000);

  const replica = await stopReplicaBehindFiller(master, tag);
  // Sent now; answered once B holds them (a replica of B's master included).
  const writes = Promise.all([c.incr(`${tag}:counter`), c.rpush(`${tag}:list`, 'e5'), c.set(`${tag}:lock`, 'token-2', 'PX', 600_000, 'NX')]);
  await eventually(() => state(m, tag), (s) => s[0] !== '5' || s[2] !== 'null', 30_000);

  await failOver(master, replica);
  expect(await writes).toEqual([6, 6, 'OK']);
  const want = await stateInA(tag);
  expect(want).toEqual(['6', 'e0,e1,e2,e3,e4,e5', 'token-2']);
  // Read back through the proxy (read-new reads B) and on the promoted replica itself.
  expect(await state(c, tag)).toEqual(want);
  expect(await state(nodeClients.open(replica.address), tag)).toEqual(want);
}, 180_000);

test('a master of B whose user may not run WAIT: the follow says so once and goes on without the check', async () => {
  const c = viaProxy();
  const { tag, master } = await tagOnReplicatedMaster();
  const m = direct(master);
  await m.call('ACL', 'SETUSER', 'default', '-wait');
  try {
    // read-new (the test before): answered only once the follow applied it on B.
    expect(await c.incr(`${tag}:counter`)).toBe(1);
    expect(await m.get(`${tag}:counter`)).toBe('1');
    // The follow reads the master's replicas at most a second old: a later write meets the refusal.
    await eventually(async () => {
      await c.incr(`${tag}:counter`);
      return proxy!.proxy.log;
    }, (log) => log.includes('refuses ROLE or WAIT'), 10_000);
  } finally {
    await m.call('ACL', 'SETUSER', 'default', '+wait');
  }
}, 60_000);
