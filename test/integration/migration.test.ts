// Live ring migrations over real standalone redis-servers, with two proxies serving a mixed write
// load at once: grow 2 -> 3 nodes and shrink 3 -> 2, through double-write, copy, read-new (and
// back and forth), done and cleanup. The final state must equal exactly what clients were told.
// Unset, the carry is auto: the replication carry on these nodes; the walks run on the feeds too.
import net from 'node:net';
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { RingModeConfig } from '../../config/schema';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { verifyMoved } from '../../proxy/migration/tools/verify';
import { cleanupMoved } from '../../proxy/migration/tools/cleanup';
import { isBookkeepingKey } from '../../proxy/migration/converge';
import { Expected, GROUPS, MixedLoad, checkState, keyOf, seed, walkPhases } from './migration-load';
import { carriedToB, carryOf } from '../helpers/carried';

const NAMES = ['a', 'b', 'c'];
const CLIENTS_PER_PROXY = 3;

let nodes: StandaloneNodes | undefined;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
}, 30_000);

function ringNodes(count: number): { name: string; addr: string; weight: number }[] {
  return nodes!.addresses.slice(0, count).map((addr, i) => ({ name: NAMES[i], addr, weight: 1 }));
}

function migrationConfig(from: number, to: number, carry?: 'feeds' | 'replication'): RingModeConfig {
  const cfg = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: ringNodes(from) },
    migration: { phase: 'double-write', ...(carry === undefined ? {} : { carry }), to: { nodes: ringNodes(to) } },
    log: { level: process.env.MIG_LOG === undefined ? 'silent' : 'info' },
  });
  if (cfg.mode !== 'ring') throw new Error('expected a ring config');
  return cfg;
}

function connect(proxy: ProxyServer): Redis {
  return new Redis({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** In double-write on the replication carry a write is on B once its node's stream carried it, not when its reply comes. */
async function onB(proxy: ProxyServer, placement: Placement): Promise<void> {
  const c = connect(proxy);
  try {
    if ((await carryOf(c)) === 'replication') await carriedToB(placement.from.masters());
  } finally {
    c.disconnect();
  }
}

async function phase(admins: Redis[], name: string): Promise<void> {
  for (const a of admins) expect(await a.call('PROXY', 'MIGRATION', 'PHASE', name)).toBe('OK');
}

async function runMigration(from: number, to: number, carry?: 'feeds'): Promise<void> {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(from, to, carry);
  const placement = Placement.fromConfig(config.ring, config.migration);
  const direct = new NodeClient(config);
  const proxies: ProxyServer[] = [];
  const clients: Redis[] = [];
  const seeders = new Map<string, Redis>();
  try {
    // The key space as it was before the migration: on ring A only.
    const expected = new Expected();
    const seedClient = (key: string): Redis => {
      const addr = ownerOfKey(placement.from, Buffer.from(key)) as string;
      let c = seeders.get(addr);
      if (c === undefined) {
        const [host, port] = addr.split(':');
        c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true });
        seeders.set(addr, c);
      }
      return c;
    };
    const seeded = await seed(seedClient, expected);

    for (let i = 0; i < 2; i++) proxies.push(await ProxyServer.start(config));
    const admins = proxies.map(connect);
    clients.push(...admins);
    expect(await carryOf(admins[0])).toBe(carry ?? 'replication');
    const loadClients = proxies.flatMap((p) => Array.from({ length: CLIENTS_PER_PROXY }, () => connect(p)));
    clients.push(...loadClients);
    // One BLPOP consumer per proxy against the LPUSH producers of the load.
    const consumers = proxies.map(connect);
    clients.push(...consumers);
    const load = new MixedLoad(loadClients, expected, from * 10 + to, consumers);

    const { copied, verified } = await walkPhases({
      admins: [admins[0], admins[1]],
      load,
      expected,
      copy: () => copyHistory(direct, placement, { rate: 0, batch: 200, restart: false, progress: false }),
      verify: () => verifyMoved(direct, placement.withPhase('read-new'), { ttlToleranceMs: 2000, batch: 500, show: 5, progress: false }),
    });

    const cleaned = await cleanupMoved(direct, placement.withPhase('done'), { batch: 500, progress: false });
    // After cleanup every node holds exactly the keys ring B gives it, and no bookkeeping.
    for (const node of nodes!.nodes) {
      const keys = (await node.command('KEYS', '*')) as string[];
      for (const k of keys) {
        expect(isBookkeepingKey(Buffer.from(k))).toBe(false);
        expect(ownerOfKey(placement.to!, Buffer.from(k))).toBe(node.address);
      }
    }
    expect(await checkState(admins[0], expected)).toEqual([]);
    // The job queues exist only while they hold jobs.
    let queues = 0;
    for (let i = 0; i < GROUPS.queue; i++) queues += await admins[0].exists(keyOf('queue', i));
    const liveKeys = seeded - expected.deleted.size + queues;
    expect(await admins[0].dbsize()).toBe(liveKeys);
    console.log(
      `migration ${from} -> ${to} (${carry ?? 'replication'}): ${seeded} keys before, ${expected.ops} acknowledged operations by ${loadClients.length} clients ` +
        `through 2 proxies, copy scanned ${copied.scanned} and copied ${copied.copied} (${copied.skippedNewer} already newer), ` +
        `verify compared ${verified.compared} moved keys, ${verified.differing} differ; cleanup deleted ${cleaned.deleted}; ` +
        `${expected.ackedJobs.size} jobs pushed, ${expected.poppedJobs.length} popped by BLPOP, none lost or twice`,
    );
  } finally {
    for (const c of clients) c.disconnect();
    for (const c of seeders.values()) c.disconnect();
    await Promise.all(proxies.map((p) => p.close(500)));
    direct.close();
  }
}

test('grow a ring from 2 to 3 nodes under load, with two proxies, side A followed as a replica', async () => {
  await runMigration(2, 3);
}, 90_000);

test('shrink a ring from 3 to 2 nodes under load, with two proxies, side A followed as a replica', async () => {
  await runMigration(3, 2);
}, 90_000);

// The same walks on the change feeds (pinned): they carry wherever side A refuses replication.
test('grow a ring from 2 to 3 nodes under load, with two proxies, on the change feeds', async () => {
  await runMigration(2, 3, 'feeds');
}, 90_000);

test('shrink a ring from 3 to 2 nodes under load, with two proxies, on the change feeds', async () => {
  await runMigration(3, 2, 'feeds');
}, 90_000);

// On the change feeds (pinned) a converging write tells its client that B missed it.
test('a ring B node down during double-write: writes to keys moving there get a clear error, others work; copy repairs', async () => {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(2, 3, 'feeds');
  const placement = Placement.fromConfig(config.ring, config.migration);
  const find = (moves: boolean, from = 0): string => {
    for (let i = from; ; i++) if ((placement.copyTarget(Buffer.from(`h${i}`)) !== null) === moves) return `h${i}`;
  };
  const proxy = await ProxyServer.start(config);
  const c = connect(proxy);
  const direct = new NodeClient(config);
  const newNode = nodes!.nodes[2];
  try {
    const moving = find(true);
    const staying = find(false);
    expect(await c.incr(moving)).toBe(1);
    await newNode.stop();
    try {
      await expect(c.incr(moving)).rejects.toThrow(/the write ran on .* but its copy to the new ring failed/);
      expect(await c.incr(staying)).toBe(1);
      expect(await c.get(moving)).toBe('2');
    } finally {
      await newNode.restart();
    }
    const copied = await copyHistory(direct, placement, { rate: 0, batch: 100, restart: true, progress: false });
    expect(copied.copied).toBeGreaterThan(0);
    const verified = await verifyMoved(direct, placement, { ttlToleranceMs: 2000, batch: 100, show: 5, progress: false });
    expect(verified.examples).toEqual([]);
    expect(await newNode.command('GET', moving)).toBe('2');
  } finally {
    c.disconnect();
    direct.close();
    await proxy.close(200);
  }
}, 30_000);

// On the replication carry the write is answered after A; the follower retries B's node, and B converges once it is back.
test('a ring B node down during double-write, side A followed as a replica: writes are answered after A, and B converges once the node is back', async () => {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(2, 3);
  const placement = Placement.fromConfig(config.ring, config.migration);
  const find = (moves: boolean): string => {
    for (let i = 0; ; i++) if ((placement.copyTarget(Buffer.from(`h${i}`)) !== null) === moves) return `h${i}`;
  };
  const proxy = await ProxyServer.start(config);
  const c = connect(proxy);
  const newNode = nodes!.nodes[2];
  try {
    expect(await carryOf(c)).toBe('replication');
    const moving = find(true);
    const staying = find(false);
    expect(await c.incr(moving)).toBe(1);
    await carriedToB(placement.from.masters());
    expect(await newNode.command('GET', moving)).toBe('1');
    // Down with its data kept (a reboot): what it held is on disk, what it missed comes by the stream.
    await newNode.command('SAVE');
    await newNode.stop();
    try {
      expect(await c.incr(moving)).toBe(2);
      expect(await c.incr(staying)).toBe(1);
      expect(await c.get(moving)).toBe('2');
    } finally {
      await newNode.restart();
    }
    await carriedToB(placement.from.masters());
    expect(await newNode.command('GET', moving)).toBe('2');
    expect(await c.incr(moving)).toBe(3);
    await carriedToB(placement.from.masters());
    expect(await newNode.command('GET', moving)).toBe('3');
  } finally {
    c.disconnect();
    await proxy.close(200);
  }
}, 60_000);

test('two proxies, eight clients, the same ten keys: every increment and push is kept through every phase', async () => {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(2, 3);
  const placement = Placement.fromConfig(config.ring, config.migration);
  const hot: string[] = [];
  for (let i = 0; hot.length < 10; i++) if (placement.copyTarget(Buffer.from(`hot${i}`)) !== null) hot.push(`hot${i}`);
  const proxies = [await ProxyServer.start(config), await ProxyServer.start(config)];
  const admins = proxies.map(connect);
  const clients = proxies.flatMap((p) => Array.from({ length: 4 }, () => connect(p)));
  const incrs = new Map<string, number>();
  const pushes = new Map<string, number>();
  const errors: string[] = [];
  let running = true;
  const loops = clients.map(async (c, n) => {
    for (let i = 0; running; i++) {
      const key = hot[(i * 7 + n) % hot.length];
      try {
        if (i % 2 === 0) {
          await c.incr(key);
          incrs.set(key, (incrs.get(key) ?? 0) + 1);
        } else {
          await c.rpush(`{${key}}:list`, 'x');
          pushes.set(key, (pushes.get(key) ?? 0) + 1);
        }
      } catch (err) {
        errors.push(String(err));
      }
    }
  });
  try {
    await sleep(300);
    await phase(admins, 'read-new');
    await sleep(300);
    await phase(admins, 'double-write');
    await sleep(300);
    await phase(admins, 'read-new');
    await sleep(300);
    await phase([admins[0]], 'done');
    await sleep(400);
    await phase([admins[1]], 'done');
    await sleep(200);
    running = false;
    await Promise.all(loops);
    expect(errors).toEqual([]);
    for (const key of hot) {
      expect([key, await admins[0].get(key)]).toEqual([key, String(incrs.get(key) ?? 0)]);
      // Tagged with the counter's name: it moves too.
      expect([key, await admins[1].llen(`{${key}}:list`)]).toEqual([key, pushes.get(key) ?? 0]);
    }
    console.log(`hot keys: ${[...incrs.values()].reduce((a, b) => a + b, 0)} increments and ${[...pushes.values()].reduce((a, b) => a + b, 0)} pushes on 10 keys, all kept`);
  } finally {
    running = false;
    await Promise.all(loops);
    for (const c of [...admins, ...clients]) c.disconnect();
    await Promise.all(proxies.map((p) => p.close(500)));
  }
}, 30_000);

test('a RESP3 client (HELLO 3) double-writes too, with replies in RESP3', async () => {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(2, 3);
  const placement = Placement.fromConfig(config.ring, config.migration);
  let i = 0;
  while (placement.copyTarget(Buffer.from(`r${i}`)) === null) i++;
  const key = `r${i}`;
  const proxy = await ProxyServer.start(config);
  const socket = net.connect(proxy.address.port, '127.0.0.1');
  try {
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.write(`HELLO 3\r\nINCR ${key}\r\nDEL nothing-${key}\r\nGET ${key}\r\nHGETALL ${key}h\r\n`);
    const deadline = Date.now() + 5000;
    while (!got.endsWith('%0\r\n')) {
      if (Date.now() > deadline) throw new Error(`replies so far: ${JSON.stringify(got)}`);
      await sleep(10);
    }
    expect(got.startsWith('%')).toBe(true);
    expect(got).toContain(':1\r\n:0\r\n$1\r\n1\r\n%0\r\n');
    await onB(proxy, placement);
    expect(await nodes!.nodes[2].command('GET', key)).toBe('1');
  } finally {
    socket.destroy();
    await proxy.close(200);
  }
}, 30_000);

test('EVALSHA of a script the proxy knows double-writes a moving key even after SCRIPT FLUSH on the nodes', async () => {
  await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
  const config = migrationConfig(2, 3);
  const placement = Placement.fromConfig(config.ring, config.migration);
  let i = 0;
  while (placement.copyTarget(Buffer.from(`s${i}`)) === null) i++;
  const key = `s${i}`;
  const proxy = await ProxyServer.start(config);
  const c = connect(proxy);
  try {
    const sha = String(await c.call('SCRIPT', 'LOAD', "return redis.call('INCRBY', KEYS[1], ARGV[1])"));
    expect(await c.evalsha(sha, 1, key, 5)).toBe(5);
    // Every node forgets its scripts (a restart, a failover): the client must not see NOSCRIPT.
    for (const n of nodes!.nodes) await n.command('SCRIPT', 'FLUSH');
    expect(await c.evalsha(sha, 1, key, 2)).toBe(7);
    await onB(proxy, placement);
    expect(await nodes!.nodes[2].command('GET', key)).toBe('7');
    // A script the proxy never saw is still NOSCRIPT, so clients fall back to EVAL as usual.
    await expect(c.evalsha('0'.repeat(40), 1, key, 1)).rejects.toThrow(/NOSCRIPT/);
  } finally {
    c.disconnect();
    await proxy.close(200);
  }
}, 30_000);
