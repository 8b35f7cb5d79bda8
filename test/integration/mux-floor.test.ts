// The bench's Node floors must be real proxies, or their rows in BENCHMARKS.md mean nothing: replies
// in request order when one client's pipeline spreads over three nodes, keys on every node, and
// MGET/MSET over several nodes split and merged in key order, in front of standalone nodes and in
// front of a Redis Cluster (the slot map read once, the key's slot computed), into the parts the
// product sends (one per node, one per slot), so the floor does no more work than the product.
import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { freePort } from '../../cmd/sandbox/ports';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { exchange, splitReplies } from '../helpers/raw-exchange';
import calculateSlot from 'cluster-key-slot';

const FLOOR = path.resolve(__dirname, '..', '..', 'dist', 'bench', 'mux-floor.js');
const REQUESTS = 600;

async function startFloor(backendArgs: string[]): Promise<{ port: number; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(process.execPath, [FLOOR, String(port), ...backendArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let output = '';
    proc.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('listening')) resolve();
    });
    proc.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    proc.on('exit', (code) => reject(new Error(`mux-floor exited (${code}) before listening: ${output}`)));
  });
  return { port, proc };
}

async function stopFloor(proc: ChildProcess | undefined): Promise<void> {
  if (proc?.exitCode === null) {
    proc.kill('SIGTERM');
    await once(proc, 'exit');
  }
}

/** Calls of GET, SET, MGET and MSET a node ran since CONFIG RESETSTAT, from INFO commandstats. */
async function commandCalls(node: { info(section?: string): Promise<Map<string, string>> }): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [field, value] of await node.info('commandstats')) {
    const calls = /calls=(\d+)/.exec(value);
    const name = field.slice('cmdstat_'.length);
    if (['get', 'set', 'mget', 'mset'].includes(name) && calls !== null) out[name] = Number(calls[1]);
  }
  return out;
}

const SPLIT_KEYS = Array.from({ length: 10 }, (_, i) => `split:${i}`);

/** The checks both floors must pass; `sizes` reads each node's DBSIZE. */
function floorChecks(port: () => number, sizes: () => Promise<number[]>, sameNodeKeys: () => Promise<string[]>): void {
  test('answers a pipeline spread over three nodes in request order', async () => {
    const sets = Array.from({ length: REQUESTS }, (_, i) => ['SET', `floor:${i}`, String(i)]);
    const gets = Array.from({ length: REQUESTS }, (_, i) => ['GET', `floor:${i}`]);
    const { replies, closed } = await exchange(port(), [...sets, ...gets, ['GET', 'floor:missing'], ['PING']]);
    expect(closed).toBe(false);
    expect(splitReplies(replies)).toEqual([...sets.map(() => '+OK\r\n'), ...gets.map((_, i) => `$${String(i).length}\r\n${i}\r\n`), '$-1\r\n', '+PONG\r\n']);
  });

  test('puts keys on every node', async () => {
    for (const size of await sizes()) expect(size).toBeGreaterThan(REQUESTS / 10);
  });

  test('splits an MSET and an MGET over several nodes or slots, merged in key order', async () => {
    const keys = SPLIT_KEYS;
    const { replies } = await exchange(port(), [['MSET', ...keys.flatMap((k, i) => [k, `v${i}`])], ['MGET', ...keys, 'split:none'], ['GET', 'split:3']]);
    expect(splitReplies(replies)).toEqual(['+OK\r\n', `*11\r\n${keys.map((_, i) => `$2\r\nv${i}\r\n`).join('')}$-1\r\n`, '$2\r\nv3\r\n']);
    // Keys of one node: whole in front of standalone nodes; split by slot in front of a cluster (no CROSSSLOT).
    const [a, b] = await sameNodeKeys();
    const again = await exchange(port(), [['MSET', a, '1', b, '2'], ['MGET', a, b]]);
    expect(splitReplies(again.replies)).toEqual(['+OK\r\n', '*2\r\n$1\r\n1\r\n$1\r\n2\r\n']);
  });
}

describe('in front of three standalone nodes', () => {
  let nodes: StandaloneNodes | undefined;
  let floor: { port: number; proc: ChildProcess } | undefined;
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3);
    floor = await startFloor(nodes.addresses);
  }, 30_000);
  afterAll(async () => {
    await stopFloor(floor?.proc);
    await nodes?.stop();
  });
  floorChecks(
    () => floor?.port ?? 0,
    async () => Promise.all((nodes as StandaloneNodes).nodes.map(async (n) => Number(await n.command('DBSIZE')))),
    // The floor picks a standalone node by the key's last byte.
    async () => ['same:a', 'same:d'],
  );

  test('sends one MGET and one MSET per node with its keys, as twemproxy and slotproxy ring do', async () => {
    const all = (nodes as StandaloneNodes).nodes;
    await Promise.all(all.map((n) => n.command('CONFIG', 'RESETSTAT')));
    await exchange(floor?.port ?? 0, [['MSET', ...SPLIT_KEYS.flatMap((k) => [k, 'v'])], ['MGET', ...SPLIT_KEYS]]);
    // split:0 to split:9 end in the digits 0-9: every node has keys.
    for (const n of all) expect(await commandCalls(n)).toEqual({ mget: 1, mset: 1 });
  });
});

describe('in front of a Redis Cluster (--cluster)', () => {
  let cluster: RedisCluster | undefined;
  let floor: { port: number; proc: ChildProcess } | undefined;
  beforeAll(async () => {
    cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
    floor = await startFloor(['--cluster', cluster.seeds[0]]);
  }, 60_000);
  afterAll(async () => {
    await stopFloor(floor?.proc);
    await cluster?.stop();
  });
  floorChecks(
    () => floor?.port ?? 0,
    async () => Promise.all((cluster as RedisCluster).masters.map(async (n) => Number(await n.command('DBSIZE')))),
    async () => {
      // Two keys of different slots on one master.
      const master = await (cluster as RedisCluster).masterFor(calculateSlot('same:0'));
      for (let i = 1; ; i++) {
        const key = `same:${i}`;
        if (calculateSlot(key) !== calculateSlot('same:0') && (await (cluster as RedisCluster).masterFor(calculateSlot(key))) === master) return ['same:0', key];
      }
    },
  );

  test('sends one part per slot, a one-key part as GET/SET, as slotproxy cluster does', async () => {
    const masters = (cluster as RedisCluster).masters;
    await Promise.all(masters.map((n) => n.command('CONFIG', 'RESETSTAT')));
    await exchange(floor?.port ?? 0, [['MSET', ...SPLIT_KEYS.flatMap((k) => [k, 'v'])], ['MGET', ...SPLIT_KEYS]]);
    const total: Record<string, number> = {};
    for (const n of masters) for (const [name, calls] of Object.entries(await commandCalls(n))) total[name] = (total[name] ?? 0) + calls;
    expect(new Set(SPLIT_KEYS.map((k) => calculateSlot(k))).size).toBe(SPLIT_KEYS.length);
    expect(total).toEqual({ get: SPLIT_KEYS.length, set: SPLIT_KEYS.length });
  });
});

// The double-write floor (issue 32's measure of what a migration's write costs at the least) must
// really carry each moved key's final state to B, or its row says nothing.
describe('double-writing (--to-ring, --to-cluster; --versions, --carry feed, both)', () => {
  let nodes: StandaloneNodes | undefined;
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3);
    cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  }, 60_000);
  afterAll(async () => {
    await nodes?.stop();
    await cluster?.stop();
  });

  const KEYS = Array.from({ length: 60 }, (_, i) => `counter:${i}`);
  /** 600 INCRs over 60 keys, pipelined, then each key's value on A and where B keeps it. */
  async function incrementAndCompare(extra: string[], ownerInB: (key: string) => Promise<RedisNode | null>): Promise<{ moved: number; differ: string[] }> {
    const [a, b, c] = (nodes as StandaloneNodes).nodes;
    await Promise.all([a, b, c, ...(cluster as RedisCluster).masters].map((n) => n.command('FLUSHALL')));
    const floor = await startFloor([a.address, b.address, ...extra]);
    try {
      const incrs = Array.from({ length: 600 }, (_, i) => ['INCR', KEYS[i % KEYS.length]]);
      const { replies } = await exchange(floor.port, incrs);
      expect(splitReplies(replies)).toEqual(incrs.map((_, i) => `:${Math.floor(i / KEYS.length) + 1}\r\n`));
      const differ: string[] = [];
      let moved = 0;
      // The feed copies behind the replies: B is read until it holds A's state (or the deadline).
      const deadline = Date.now() + 10_000;
      for (const key of KEYS) {
        // The floor's ring A: the key's last byte picks a or b.
        const inA = String(await (key.charCodeAt(key.length - 1) % 2 === 0 ? a : b).command('GET', key));
        const owner = await ownerInB(key);
        if (owner === null) continue; // does not move
        moved++;
        const read = async (): Promise<string> => String(await owner.command('GET', key));
        let there = await read();
        while (there !== inA && Date.now() < deadline) there = await read();
        if (there !== inA) differ.push(key);
      }
      return { moved, differ };
    } finally {
      await stopFloor(floor.proc);
    }
  }
  /** Ring B = a, b, c: a key moves to c when its last byte % 3 is 2. */
  const inRingB = async (key: string): Promise<RedisNode | null> => (key.charCodeAt(key.length - 1) % 3 === 2 ? (nodes as StandaloneNodes).nodes[2] : null);
  const inCluster = (key: string): Promise<RedisNode | null> => (cluster as RedisCluster).masterFor(calculateSlot(key));

  for (const [label, mode] of [['DUMP/RESTORE', []], ['versions', ['--versions']], ['feed', ['--carry', 'feed']], ['feed with versions', ['--carry', 'feed', '--versions']]] as const) {
    test(`into a ring, ${label}: every moved key's final value on the new node`, async () => {
      const c = (nodes as StandaloneNodes).nodes[2];
      const { moved, differ } = await incrementAndCompare(['--to-ring', c.address, ...mode], inRingB);
      expect(moved).toBeGreaterThan(10);
      expect(differ).toEqual([]);
    }, 30_000);

    test(`into a cluster, ${label}: every key's final value in the cluster`, async () => {
      const { moved, differ } = await incrementAndCompare(['--to-cluster', (cluster as RedisCluster).seeds[0], ...mode], inCluster);
      expect(moved).toBe(KEYS.length);
      expect(differ).toEqual([]);
    }, 30_000);
  }
});
