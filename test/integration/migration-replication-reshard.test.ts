// The replication carry while side A, a Redis Cluster, is resharded (real redis-servers, a real
// slotproxy process): a cluster of 2 masters moving into a ring of 2, clients writing through the
// proxy. A slot moves from one master to the other (IMPORTING/MIGRATING, MIGRATE of its keys in
// batches while they are written, SETSLOT NODE), and another slot moves to a master added to the
// cluster meanwhile. The keys leave one master's stream as DELs and arrive in the other's as
// RESTORE-ASKINGs, each stream followed apart; B must end holding exactly A's keys and values, with
// every acknowledged write, and the added master must be followed.
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freeClusterPorts } from '../../cmd/sandbox/ports';
import { keySlot } from '../../sharding/slot';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';

let source: RedisCluster | undefined;
let ring: StandaloneNodes | undefined;
let added: RedisNode | undefined;
let proxy: { proxy: ProxyProcess; port: number } | undefined;
let dir = '';
let config: Record<string, unknown> = {};
const nodeClients = new NodeClients();
const clients: Redis[] = [];

beforeAll(async () => {
  dir = tempDir('slotproxy-follow-reshard-');
  const [port] = await freeClusterPorts(1);
  [source, ring, added] = await Promise.all([
    RedisCluster.start({ masters: 2, replicasPerMaster: 0, extraArgs: ['--repl-diskless-sync-delay', '0'] }),
    StandaloneNodes.start(2),
    RedisNode.start({ port, cluster: true, dir: path.join(dir, String(port)), extraArgs: ['--repl-diskless-sync-delay', '0'] }),
  ]);
  config = {
    mode: 'cluster',
    cluster: { seeds: [source.masters[0].address] },
    migration: { phase: 'double-write', carry: 'replication', to: { nodes: ring.addresses.map((addr, i) => ({ name: `r${i}`, addr, weight: 1 })) } },
  };
  proxy = await startProxyProcess(config, dir);
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  nodeClients.closeAll();
  killAllProxies();
  await Promise.all([source?.stop(), ring?.stop(), added?.destroy()]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

function open(address: string): Redis {
  return nodeClients.open(address);
}

async function info(): Promise<string> {
  return String(await open(`127.0.0.1:${proxy!.port}`).info('proxy'));
}

function field(text: string, name: string): string {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1].trim() ?? '';
}

/** A's masters now: those CLUSTER SLOTS names (the added node once it serves a slot). */
async function mastersOfA(): Promise<string[]> {
  const slots = (await source!.nodes[0].command('CLUSTER', 'SLOTS')) as unknown[][];
  return [...new Set(slots.map((r) => `${String((r[2] as unknown[])[0])}:${String((r[2] as unknown[])[1])}`))];
}

/** Until every master of A is followed live and B holds everything each has written. */
async function caughtUp(): Promise<string> {
  const masters = await mastersOfA();
  await eventually(info, (t) => masters.every((m) => field(t, 'migration_follows').includes(`${m}=live`)), 60_000);
  const offsets = await Promise.all(masters.map(async (m) => Number(((await open(m).call('ROLE')) as unknown[])[1])));
  return eventually(info, (t) => {
    const applied = new Map(field(t, 'migration_follow_applied').split(',').map((e) => [e.slice(0, e.lastIndexOf('=')), Number(e.slice(e.lastIndexOf('=') + 1))]));
    return masters.every((m, i) => (applied.get(m) ?? -1) >= offsets[i]);
  }, 30_000);
}

/** Every key with its value (strings and lists) on the given nodes, and keys found on more than one. */
async function contents(addresses: string[]): Promise<{ values: Map<string, string>; twice: string[] }> {
  const values = new Map<string, string>();
  const twice: string[] = [];
  for (const a of addresses) {
    const node = open(a);
    for (const key of await node.keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      const value = (await node.type(key)) === 'list' ? JSON.stringify(await node.lrange(key, 0, -1)) : String(await node.get(key));
      if (values.has(key)) twice.push(`${key} on several nodes`);
      values.set(key, value);
    }
  }
  return { values, twice };
}

async function differences(): Promise<string[]> {
  const a = await contents(await mastersOfA());
  const b = await contents(ring!.addresses);
  const out = [...a.twice, ...b.twice];
  for (const [k, v] of a.values) if (b.values.get(k) !== v) out.push(`${k}: A ${v} / B ${b.values.get(k) ?? '(none)'}`);
  for (const k of b.values.keys()) if (!a.values.has(k)) out.push(`${k}: on B only`);
  return out;
}

interface Load {
  stop(): Promise<void>;
  acked: Set<string>;
  errors: string[];
  done(): number;
}

/**
 * Writers through the proxy on the moving slots' keys (and others): unique SETs, counters, lists,
 * and keys set and deleted in turn (a DEL of the old owner must not undo the new owner's SET).
 */
function writeLoad(tags: string[]): Load {
  const acked = new Set<string>();
  const errors: string[] = [];
  let running = true;
  let n = 0;
  const loops = tags.map(async (tag, w) => {
    const c = new Redis({ host: '127.0.0.1', port: proxy!.port, maxRetriesPerRequest: 0, disableClientInfo: true, commandTimeout: 20_000 });
    clients.push(c);
    for (let i = 0; running; i++) {
      try {
        const key = `{${tag}}k:${w}:${i}`;
        await c.set(key, `v${i}`);
        acked.add(key);
        await c.incr(`{${tag}}c:${i % 10}`);
        await c.rpush(`{${tag}}l:${i % 5}`, String(i));
        await (i % 2 === 0 ? c.set(`{${tag}}t:${i % 6}`, String(i)) : c.del(`{${tag}}t:${(i - 1) % 6}`));
        n++;
      } catch (err) {
        errors.push(err instanceof Error ? err.message : String(err));
      }
    }
  });
  return { acked, errors, done: () => n, stop: async () => { running = false; await Promise.all(loops); } };
}

/** Moves `slot` of A to `to`, keys and all, as `redis-cli --cluster reshard` does, in batches of 5 keys while they are written. */
async function moveSlot(slot: number, to: RedisNode, masters: RedisNode[]): Promise<void> {
  const from = await source!.masterFor(slot);
  const [fromId, toId] = await Promise.all([from, to].map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
  await to.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await from.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  let moved = 0;
  for (;;) {
    const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', slot, 5)) as string[];
    if (keys.length === 0) break;
    await from.command('MIGRATE', to.host, to.port, '', 0, 5000, 'KEYS', ...keys);
    moved += keys.length;
  }
  for (const m of masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
  expect(moved).toBeGreaterThan(20);
}

test('a slot moved between masters of A, and one moved to a master added, while followed: B ends exact', async () => {
  const [m0, m1] = source!.masters;
  await caughtUp();
  // Tags on each master, the moving ones first.
  const tags = [...Array(400).keys()].map((i) => `t${i}`);
  const on = async (m: RedisNode): Promise<string[]> => {
    const out: string[] = [];
    for (const t of tags) if ((await source!.masterFor(keySlot(Buffer.from(`{${t}}`)))) === m) out.push(t);
    return out;
  };
  const [of0, of1] = await Promise.all([on(m0), on(m1)]);
  const [toOther, toAdded, stay0] = of0;
  const load = writeLoad([toOther, toAdded, stay0, of1[0]]);
  await eventually(async () => load.done(), (n) => n > 150, 20_000);

  await moveSlot(keySlot(Buffer.from(`{${toOther}}`)), m1, [m0, m1]);
  let mark = load.done();
  await eventually(async () => load.done(), (n) => n > mark + 100, 20_000);

  // A master added: it meets the cluster with no slot, then a slot moves to it.
  await added!.command('CLUSTER', 'MEET', m0.host, m0.port);
  await eventually(async () => String(await m0.command('CLUSTER', 'NODES')), (t) => t.includes(`${added!.port}@`) && !/handshake|noaddr/.test(t.split('\n').find((l) => l.includes(`${added!.port}@`)) ?? 'handshake'), 20_000);
  await eventually(
    async () => Promise.all([m0, m1, added!].map(async (n) => String(await n.command('CLUSTER', 'INFO')))),
    (all) => all.every((t) => t.includes('cluster_state:ok') && t.includes('cluster_known_nodes:3')),
    20_000,
  );
  await moveSlot(keySlot(Buffer.from(`{${toAdded}}`)), added!, [m0, m1, added!]);
  await eventually(info, (t) => field(t, 'migration_follows').includes(`${added!.address}=live`), 60_000);
  mark = load.done();
  await eventually(async () => load.done(), (n) => n > mark + 100, 20_000);
  await load.stop();

  const after = await caughtUp();
  console.log(`reshard while followed: ${load.done()} rounds, ${load.errors.length} errors (${load.errors.slice(0, 3).join('; ')}); ${field(after, 'migration_follows')}`);
  expect(load.errors).toEqual([]);
  expect(await differences()).toEqual([]);
  const b = await contents(ring!.addresses);
  expect([...load.acked].filter((k) => !b.values.has(k))).toEqual([]);
}, 180_000);

test('a slot moved while no proxy follows A: the next proxy resumes both masters, the old owner\'s DELs before the new owner\'s RESTOREs, and B ends exact', async () => {
  const [m0, m1] = source!.masters;
  await caughtUp();
  let tag = '';
  for (let i = 0; tag === ''; i++) if ((await source!.masterFor(keySlot(Buffer.from(`{r${i}}`)))) === m1) tag = `r${i}`;
  const slot = keySlot(Buffer.from(`{${tag}}`));
  const writer = open(m1.address);
  for (let i = 0; i < 30; i++) await writer.set(`{${tag}}k:${i}`, `v${i}`);
  await writer.rpush(`{${tag}}l`, 'a', 'b');
  await caughtUp();
  proxy!.proxy.child.kill('SIGKILL');
  await proxy!.proxy.exitCode();
  // Nobody follows A: the keys leave m1's stream as MIGRATE's DELs and arrive in m0's as RESTORE-ASKINGs.
  await moveSlot(slot, m0, [m0, m1]);
  await open(m0.address).rpush(`{${tag}}l`, 'c');
  proxy = await startProxyProcess(config, dir);
  await caughtUp();
  expect(await differences()).toEqual([]);
  const b = await contents(ring!.addresses);
  expect([...Array(30).keys()].filter((i) => b.values.get(`{${tag}}k:${i}`) !== `v${i}`)).toEqual([]);
  expect(b.values.get(`{${tag}}l`)).toBe(JSON.stringify(['a', 'b', 'c']));
  expect(field(await info(), 'migration_follow_full_syncs')).toBe('0');
}, 120_000);

