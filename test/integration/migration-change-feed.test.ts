// Every change on side A reaches side B during a live migration (a ring grown 2 -> 3, and a ring
// of 2 into a Redis Cluster of 3, over real redis-servers), whoever made it: a script or function
// writing a key it builds from ARGV, a client connected straight to an A node, a FLUSHALL on it. A script's reply comes only once its
// undeclared keys are on B. A change feed killed mid-migration is a gap: switching phase is
// refused until the node is re-walked, and then B equals A.
//
// The tests about the feeds themselves (a feed killed, a proxy started after the copy re-walking
// A, the feeds' copy counts) pin `carry: 'feeds'`. The script and function tests run on both
// carries: on the replication carry a double-write is answered after A and is on B once the stream
// carried it (carriedToB), while read-new answers once B holds it (the read barrier).
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { parseConfig } from '../../config/load';
import { RingModeConfig } from '../../config/schema';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { eventually } from '../helpers/eventually';
import { carriedToB, carryOf } from '../helpers/carried';
import { MigrationConfig } from '../../config/schema';

const grow = useRingGrow();
const config = grow.config;

let proxy: ProxyServer | undefined;
let placement: Placement;
let layout: NodeClient | undefined;
let cluster: RedisCluster | undefined;

beforeAll(async () => {
  cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
}, 30_000);

function clusterB(): RedisCluster {
  if (cluster === undefined) throw new Error('the cluster did not start');
  return cluster;
}

type Carry = 'feeds' | 'replication';

/** Ring a, b in double-write into a Redis Cluster of 3 masters. */
function intoCluster(carry: Carry): RingModeConfig {
  const cfg = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: config().ring.nodes },
    migration: { phase: 'double-write', ...(carry === 'feeds' ? { carry } : {}), to: { cluster: { seeds: [clusterB().masters[0].address] } } },
    log: { level: 'silent' },
  });
  if (cfg.mode !== 'ring') throw new Error('expected a ring config');
  return cfg;
}
/** The ring grow's config on `carry` (the feeds pinned; standalone nodes are followed as replicas otherwise). */
function intoRing(carry: Carry): RingModeConfig {
  const cfg = config();
  return carry === 'feeds' ? { ...cfg, migration: { ...(cfg.migration as MigrationConfig), carry: 'feeds' } } : cfg;
}

const clients: Redis[] = [];

function open(addr: string): Redis {
  const [host, port] = addr.split(':');
  const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

function connect(): Redis {
  if (proxy === undefined) throw new Error('no proxy started');
  return open(`127.0.0.1:${proxy.address.port}`);
}

/** `count` hash tags whose keys move to another node. */
function movingTags(count: number): string[] {
  const tags: string[] = [];
  for (let i = 0; tags.length < count; i++) if (placement.copyTarget(Buffer.from(`{t${i}}`)) !== null) tags.push(`t${i}`);
  return tags;
}

/** The A node and the B node of a key that moves. */
function sides(key: string): { a: Redis; b: Redis } {
  const t = placement.copyTarget(Buffer.from(key));
  if (t === null) throw new Error(`${key} does not move`);
  return { a: open(t.from), b: open(t.to) };
}

/** Type, value and TTL presence of a key, as one node holds it. */
async function stateOn(node: Redis, key: string): Promise<string> {
  const type = String(await node.type(key));
  const ttl = (await node.pttl(key)) >= 0 ? 'ttl' : 'no-ttl';
  switch (type) {
    case 'string':
      return `string ${await node.get(key)} ${ttl}`;
    case 'hash':
      return `hash ${JSON.stringify(Object.entries(await node.hgetall(key)).sort())} ${ttl}`;
    case 'list':
      return `list ${JSON.stringify(await node.lrange(key, 0, -1))} ${ttl}`;
    default:
      return type;
  }
}


async function status(admin: Redis): Promise<string> {
  return String(await admin.call('PROXY', 'MIGRATION', 'STATUS'));
}

describe.each(['ring', 'cluster'] as const)('into a %s', (side) => {
  const configOn = (carry: Carry): RingModeConfig => (side === 'cluster' ? intoCluster(carry) : intoRing(carry));
  /** The nodes of ring A. */
  const nodesOfA = (): string[] => grow.nodes().addresses.slice(0, 2);

  /** Both sides emptied, and a proxy on `carry` started (the test picks it). */
  async function startOn(carry: Carry): Promise<Redis> {
    const all = [...grow.nodes().nodes, ...(side === 'cluster' ? clusterB().masters : [])];
    await Promise.all(all.map((n) => n.command('FLUSHALL')));
    await Promise.all(all.map((n) => n.command('FUNCTION', 'FLUSH')));
    const cfg = configOn(carry);
    // The placement as the proxy sees it (a cluster B's slot map loaded from its nodes).
    layout = new NodeClient(cfg);
    await layout.start();
    placement = layout.placement();
    proxy = await ProxyServer.start(cfg);
    const c = connect();
    expect(await carryOf(c)).toBe(carry);
    return c;
  }

  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    layout?.close();
    layout = undefined;
    await proxy?.close(200);
  });

  // A job queue's add-job script: the id counter is declared, the job hash is built from ARGV.
  const ADD_JOB = `local id = redis.call('INCR', KEYS[1])
  local key = ARGV[1] .. id
  redis.call('HSET', key, 'data', ARGV[2], 'attempts', '0')
  redis.call('RPUSH', KEYS[2], id)
  return id`;

  const carries = ['feeds', 'replication'] as const;
  const phases = ['double-write', 'read-new'] as const;
  test.each(carries.flatMap((carry) => phases.map((phase) => [carry, phase] as const)))('on %s, %s: a script\'s undeclared keys are on side B when its reply comes', async (carry, phase) => {
    const c = await startOn(carry);
    expect(await c.call('PROXY', 'MIGRATION', 'PHASE', phase)).toBe('OK');
    for (const tag of movingTags(3)) {
      const { a, b } = sides(`{${tag}}`);
      for (let n = 1; n <= 5; n++) {
        const id = await c.eval(ADD_JOB, 2, `{${tag}}:id`, `{${tag}}:wait`, `{${tag}}:job:`, `payload-${tag}-${n}`);
        expect(id).toBe(n);
        // No waiting: the reply came after the copy (or, replicated in double-write, once the stream carried it).
        if (carry === 'replication' && phase === 'double-write') await carriedToB(nodesOfA());
        const key = `{${tag}}:job:${n}`;
        expect(await stateOn(b, key)).toBe(`hash ${JSON.stringify([['attempts', '0'], ['data', `payload-${tag}-${n}`]])} no-ttl`);
        expect(await stateOn(b, key)).toBe(await stateOn(a, key));
        // Read back through the proxy (from B in read-new).
        expect(await c.hget(key, 'data')).toBe(`payload-${tag}-${n}`);
      }
      expect(await stateOn(b, `{${tag}}:wait`)).toBe(await stateOn(a, `{${tag}}:wait`));
    }
    const info = String(await c.info('proxy'));
    // The feeds snapshot each undeclared key; the replication carry applies the stream, copying none.
    if (carry === 'feeds') expect(Number(/migration_feed_keys_copied:(\d+)/.exec(info)?.[1])).toBeGreaterThanOrEqual(15);
    else expect(info).toMatch(/migration_feed_keys_copied:0\r\n/);
  });

  test.each(carries)('on %s, a function writing a key built from ARGV, and EVALSHA, inside MULTI: carried before EXEC answers (replicated: once the stream carried it)', async (carry) => {
    const c = await startOn(carry);
    const lib = `#!lua name=jobs
  redis.register_function('addjob', function(keys, args)
    local id = redis.call('INCR', keys[1])
    redis.call('SET', args[1] .. id, args[2])
    return id
  end)`;
    // Loaded through the proxy, as a user would: on the replication carry, the stream of A's
    // nodes also brings the library to every B master (LOAD ... REPLACE), so a LOAD made straight
    // on a node could find it there already.
    expect(await c.call('FUNCTION', 'LOAD', lib)).toBe('jobs');
    const [tag] = movingTags(1);
    const { a, b } = sides(`{${tag}}`);
    const carried = async (): Promise<void> => {
      if (carry === 'replication') await carriedToB(nodesOfA());
    };
    expect(await c.call('FCALL', 'addjob', '1', `{${tag}}:fid`, `{${tag}}:f:`, 'one')).toBe(1);
    await carried();
    expect(await b.get(`{${tag}}:f:1`)).toBe('one');
    const sha = String(await c.script('LOAD', 'redis.call("SET", ARGV[1], ARGV[2]) return 1'));
    const replies = await c.multi().evalsha(sha, 1, `{${tag}}:m`, `{${tag}}:m:computed`, 'two').incr(`{${tag}}:m`).exec();
    expect(replies).toEqual([[null, 1], [null, 1]]);
    await carried();
    expect(await b.get(`{${tag}}:m:computed`)).toBe('two');
    expect(await b.get(`{${tag}}:m`)).toBe(await a.get(`{${tag}}:m`));
  });

  test('writes made straight on ring A\'s nodes reach side B: strings, hashes, lists, TTLs, deletions, a flush', async () => {
    const c = await startOn('replication');
    const tags = movingTags(4);
    const keys = tags.map((t) => `{${t}}:direct`);
    for (const [i, key] of keys.entries()) {
      const { a } = sides(key);
      await a.set(`${key}:s`, `v${i}`);
      await a.hset(`${key}:h`, 'f', `v${i}`, 'g', 'x');
      await a.rpush(`${key}:l`, 'a', 'b', 'c');
      await a.set(`${key}:ttl`, 'x', 'EX', 300);
      await a.set(`${key}:gone`, 'x');
      await a.del(`${key}:gone`);
      await a.incrby(`${key}:n`, 41);
      await a.incr(`${key}:n`);
    }
    for (const key of keys) {
      const { a, b } = sides(key);
      for (const k of [`${key}:s`, `${key}:h`, `${key}:l`, `${key}:ttl`, `${key}:n`, `${key}:gone`]) {
        const want = await stateOn(a, k);
        await eventually(() => stateOn(b, k), (v) => v === want);
      }
    }
    // A FLUSHALL on an A node: the stream carries it (on the feeds, which name no keys then, the
    // node is re-walked), and B drops what it held of it.
    const { a, b } = sides(`${keys[0]}:s`);
    expect(await b.exists(`${keys[0]}:s`)).toBe(1);
    await a.flushall();
    await eventually(() => b.exists(`${keys[0]}:s`, `${keys[0]}:h`, `${keys[0]}:n`), (n) => n === 0);
    await eventually(() => status(c), (s) => !s.includes('uncovered:'));
  });

  // About the feeds' re-walk (pinned); the replication carry's counterpart follows.
  test('a proxy started after the copy began, with no other proxy running: A is re-walked before read-new', async () => {
    await startOn('feeds');
    await proxy?.close(200);
    const [tag] = movingTags(1);
    const key = `{${tag}}:while-down`;
    const { a, b } = sides(key);
    // The history copy has passed this node (its saved cursor), then A took a write nobody heard.
    await Promise.all(grow.nodes().nodes.slice(0, 2).map((n) => n.command('HSET', '__slotproxy:migration:copy', 'cursor', 'done', 'copied', '1')));
    await a.set(key, 'written while no proxy ran');
    proxy = await ProxyServer.start(configOn('feeds'));
    const admin = connect();
    await eventually(() => status(admin), (s) => !s.includes('uncovered:'));
    expect(await b.get(key)).toBe('written while no proxy ran');
    expect(Number(/migration_feed_rewalks:(\d+)/.exec(String(await admin.info('proxy')))?.[1])).toBe(2);
    expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  });

  test('replicated: a write made on A while no proxy ran is on B once a proxy follows A again, before read-new', async () => {
    const first = await startOn('replication');
    const [tag] = movingTags(1);
    const key = `{${tag}}:while-down`;
    const { a, b } = sides(key);
    await first.set(key, 'before the stop');
    await carriedToB(nodesOfA());
    await proxy?.close(200);
    proxy = undefined;
    // Nobody follows A now: this write is in A's stream past the offset B recorded.
    await a.set(key, 'written while no proxy ran');
    proxy = await ProxyServer.start(configOn('replication'));
    const admin = connect();
    await eventually(() => admin.info('proxy').then(String), (s) => /migration_follows:\S+=live,\S+=live/.test(s), 30_000);
    await carriedToB(nodesOfA());
    expect(await b.get(key)).toBe('written while no proxy ran');
    expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
    expect(await admin.get(key)).toBe('written while no proxy ran');
  });

  // About a change feed itself (pinned): on the replication carry the stream carries every change
  // whatever becomes of the feed (migration-replication-kill.test.ts kills the follow's link).
  test('a change feed killed mid-migration: read-new is refused until the node is re-walked, then B equals A', async () => {
    const admin = await startOn('feeds');
    const [tag] = movingTags(1);
    const key = `{${tag}}:gap`;
    const { a, b } = sides(key);
    await admin.set(key, 'before');
    expect(await b.get(key)).toBe('before');
    // The node takes no new connection (those open stay), so the killed feed cannot come back yet.
    const maxclients = (await a.config('GET', 'maxclients')) as string[];
    await a.config('SET', 'maxclients', '1');
    try {
      // The feed is the proxy's BCAST tracking connection on the node (flags t and B).
      const feedId = /id=(\d+) [^\n]*flags=tB/.exec(String(await a.client('LIST')))?.[1];
      expect(feedId).toBeDefined();
      await a.client('KILL', 'ID', feedId as string);
      await a.set(key, 'during the gap');
      await a.hset(`${key}:h`, 'f', '1');
      await eventually(() => status(admin), (s) => /uncovered:127\.0\.0\.1:\d+ lost: change feed lost/.test(s));
      await expect(admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).rejects.toThrow(
        /^ERR .*changes on side A are not all known to be on side B: 127\.0\.0\.1:\d+ lost: change feed lost/,
      );
      expect(await b.get(key)).toBe('before');
    } finally {
      await a.config('SET', 'maxclients', maxclients[1]);
    }
    // The feed comes back, the node is re-walked, and the switch goes through.
    await eventually(() => status(admin), (s) => !s.includes('uncovered:'));
    expect(await b.get(key)).toBe('during the gap');
    expect(await b.hget(`${key}:h`, 'f')).toBe('1');
    expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
    expect(await admin.get(key)).toBe('during the gap');
    expect(await status(admin)).toMatch(/feeds:127\.0\.0\.1:\d+=live,127\.0\.0\.1:\d+=live/);
    expect(Number(/migration_feed_rewalks:(\d+)/.exec(String(await admin.info('proxy')))?.[1])).toBeGreaterThanOrEqual(1);
  });
});
