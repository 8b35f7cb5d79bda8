// The replication carry (migration.carry: replication): each node of side A followed as a replica
// by the proxy (REPLCONF + PSYNC), its full-sync snapshot restored on side B and its stream applied
// after it, over real redis-servers: a ring grown 2 -> 3. Keys written straight on A before the
// proxy started arrive by the snapshot; writes through the proxy, scripts with undeclared keys,
// transactions, writes straight on A (a split MSET, a RENAME across B's nodes), expiry, FLUSHALL and
// FUNCTION LOAD arrive by the stream; WAIT on A counts the follower only once B has the write; a
// second proxy taking over resumes with +CONTINUE instead of a new full sync.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { RingModeConfig } from '../../config/schema';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { parseConfig } from '../../config/load';
import { cleanupMoved } from '../../proxy/migration/tools/cleanup';
import { APPLIED_KEY } from '../../proxy/migration/follow-node-keys';
import { slotTag } from '../../sharding/slot-tags';

const grow = useRingGrow();

let proxy: ProxyServer | null = null;
let placement: Placement;
let layout: NodeClient | undefined;
const nodeClients = new NodeClients();

function replicated(phase: 'double-write' | 'read-new' = 'double-write'): RingModeConfig {
  const cfg = grow.config();
  return { ...cfg, ...(process.env.FOLLOW_LOG === undefined ? {} : { log: { ...cfg.log, level: 'info' as const } }), migration: { ...(cfg.migration as NonNullable<RingModeConfig['migration']>), phase, carry: 'replication' } };
}

function open(addr: string): Redis {
  return nodeClients.open(addr);
}

function connect(): Redis {
  if (proxy === null) throw new Error('no proxy');
  return open(`127.0.0.1:${proxy.address.port}`);
}

/** Type, value and TTL of a key as one node holds it. */
async function stateOn(node: Redis, key: string): Promise<string> {
  const type = String(await node.type(key));
  const ttl = Number(await node.call('PEXPIRETIME', key));
  switch (type) {
    case 'none':
      return 'none';
    case 'string':
      return `string ${await node.get(key)} ${ttl}`;
    case 'hash':
      return `hash ${JSON.stringify(Object.entries(await node.hgetall(key)).sort())} ${ttl}`;
    case 'list':
      return `list ${JSON.stringify(await node.lrange(key, 0, -1))} ${ttl}`;
    case 'set':
      return `set ${JSON.stringify((await node.smembers(key)).sort())} ${ttl}`;
    case 'zset':
      return `zset ${JSON.stringify(await node.zrange(key, 0, -1, 'WITHSCORES'))} ${ttl}`;
    default:
      return `${type} ${ttl}`;
  }
}

/** Every key of A that moves, compared with its owner in B; the differing ones. */
async function differences(): Promise<string[]> {
  const out: string[] = [];
  let moving = 0;
  for (const a of placement.from.masters()) {
    const node = open(a);
    for (const key of await node.keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      const t = placement.copyTarget(Buffer.from(key));
      if (t === null || t.from !== a) continue;
      moving++;
      const [onA, onB] = await Promise.all([stateOn(node, key), stateOn(open(t.to), key)]);
      if (onA !== onB) out.push(`${key}: A ${onA} / B ${onB}`);
    }
  }
  if (moving === 0) out.push('no moving key at all');
  return out;
}

async function info(c: Redis): Promise<string> {
  return String(await c.info('proxy'));
}

/** Waits until every node of A is followed live and B has applied all A wrote so far. */
async function caughtUp(c: Redis): Promise<void> {
  await eventually(() => info(c), (text) => /migration_follows:\S+=live,\S+=live/.test(text), 20_000);
  for (const a of placement.from.masters()) expect(Number(await open(a).call('WAIT', '1', '5000'))).toBeGreaterThanOrEqual(1);
}

async function startProxy(cfg: RingModeConfig): Promise<void> {
  layout = new NodeClient(cfg);
  await layout.start();
  placement = layout.placement();
  proxy = await ProxyServer.start(cfg);
}

beforeEach(async () => {
  for (const n of grow.nodes().nodes) {
    await n.command('FLUSHALL');
    await n.command('FUNCTION', 'FLUSH');
    // A full sync starts at once (Redis waits 5 s by default for more replicas to share it): the suite's time, nothing the proxy relies on.
    await n.command('CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
  }
});

afterEach(async () => {
  nodeClients.closeAll();
  layout?.close();
  await proxy?.close(200);
  proxy = null;
});

const ADD_JOB = `local id = redis.call('INCR', KEYS[1])
local key = ARGV[1] .. id
redis.call('HSET', key, 'data', ARGV[2])
redis.call('RPUSH', KEYS[2], id)
return id`;

test('keys written before the follow arrive by the full sync, with their TTLs; writes after it by the stream', async () => {
  const cfg = replicated();
  // Written straight on A before any proxy follows it.
  for (const [i, a] of cfg.ring.nodes.map((n) => n.addr).entries()) {
    const node = open(a as string);
    const batch = node.pipeline();
    for (let k = 0; k < 2000; k++) batch.set(`pre:${i}:${k}`, `v${k}`);
    for (let k = 0; k < 50; k++) batch.set(`ttl:${i}:${k}`, 'x', 'EX', 3600);
    for (let k = 0; k < 50; k++) batch.hset(`h:${i}:${k}`, 'f', k, 'g', 'long-value-'.repeat(20));
    for (let k = 0; k < 50; k++) batch.rpush(`l:${i}:${k}`, 'a', 'b', 'c');
    for (let k = 0; k < 20; k++) batch.zadd(`z:${i}:${k}`, 1, 'one', 2.5, 'two');
    for (let k = 0; k < 20; k++) batch.sadd(`s:${i}:${k}`, 1, 2, 3);
    await batch.exec();
  }
  await startProxy(cfg);
  const c = connect();
  await caughtUp(c);
  expect(await differences()).toEqual([]);
  expect(await info(c)).toMatch(/migration_follow_full_syncs:2\r\n/);

  // Through the proxy: counters, lists, TTLs, a script's undeclared keys, a transaction.
  for (let n = 0; n < 200; n++) {
    await Promise.all([c.incr(`cnt:${n % 17}`), c.lpush(`list:${n % 5}`, n), c.set(`px:${n % 9}`, n, 'PX', 600000), c.eval(ADD_JOB, 2, `{q${n % 3}}:id`, `{q${n % 3}}:wait`, `{q${n % 3}}:job:`, `p${n}`)]);
  }
  await c.multi().incr('{tx}:a').incr('{tx}:b').exec();
  // Straight on A: several keys of one node whose owners in B differ.
  const a0 = open(placement.from.masters()[0]);
  const mine = (await a0.keys('pre:*')).slice(0, 40);
  await a0.mset(...mine.flatMap((k) => [k, 'changed']));
  await a0.del(...mine.slice(0, 10));
  await a0.rename(mine[20], mine[21]);
  await caughtUp(c);
  expect(await differences()).toEqual([]);
}, 90_000);

test('WAIT on a node of A counts the follower only once side B holds the write', async () => {
  await startProxy(replicated());
  const c = connect();
  await caughtUp(c);
  const key = [...Array(200).keys()].map((i) => `w${i}`).find((k) => placement.copyTarget(Buffer.from(k)) !== null) as string;
  const t = placement.copyTarget(Buffer.from(key));
  if (t === null) throw new Error('no moving key');
  const a = open(t.from);
  const b = open(t.to);
  for (let n = 0; n < 20; n++) {
    await a.set(key, `v${n}`);
    expect(Number(await a.call('WAIT', '1', '5000'))).toBe(1);
    expect(await b.get(key)).toBe(`v${n}`);
  }
}, 60_000);

test('FLUSHALL and FUNCTION LOAD on A reach side B', async () => {
  await startProxy(replicated());
  const c = connect();
  await caughtUp(c);
  for (let n = 0; n < 300; n++) await c.set(`f${n}`, n);
  await caughtUp(c);
  expect(await differences()).toEqual([]);
  const lib = "#!lua name=replib\nredis.register_function('rep_echo', function(keys, args) return args[1] end)";
  expect(await c.call('FUNCTION', 'LOAD', lib)).toBe('replib');
  await caughtUp(c);
  for (const b of placement.to?.masters() ?? []) expect(JSON.stringify(await open(b).call('FUNCTION', 'LIST'))).toContain('replib');
  const a0 = placement.from.masters()[0];
  await open(a0).flushall();
  await caughtUp(c);
  for (const b of placement.to?.masters() ?? []) {
    if (b === a0) continue;
    for (const key of await open(b).keys('f*')) expect(placement.copyTarget(Buffer.from(key))?.from).not.toBe(a0);
  }
}, 60_000);

test('a command B refuses is carried as its keys\' state, and a later command on that key and another is not applied twice', async () => {
  await startProxy(replicated());
  const c = connect();
  await caughtUp(c);
  // Two keys of one node of A that both move to one node of B.
  const names = [...Array(400).keys()].map((i) => `carry:${i}`);
  const targets = names.map((k) => ({ k, t: placement.copyTarget(Buffer.from(k)) })).filter((x) => x.t !== null);
  const src = targets[0];
  const dst = targets.find((x) => x.k !== src.k && x.t?.from === src.t?.from && x.t?.to === src.t?.to);
  if (src.t === null || dst === undefined) throw new Error('no two keys of one node moving to one node');
  // B holds src with another type, so B refuses the RPUSH of A's stream: src is carried as its state.
  await open(src.t.to).set(src.k, 'not a list');
  // FUNCTION LOAD holds the stream until the carry is on B; the carry read A after the LMOVE, so the
  // LMOVE reaches B with src already past it: run there, it would move a second element.
  const lib = "#!lua name=carrylib\nredis.register_function('carry_one', function() return 1 end)";
  const a = open(src.t.from);
  const [pushed, , moved] = (await a.pipeline().rpush(src.k, 'e1', 'e2', 'e3').call('FUNCTION', 'LOAD', 'REPLACE', lib).lmove(src.k, dst.k, 'LEFT', 'RIGHT').exec()) ?? [];
  expect([pushed?.[1], moved?.[1]]).toEqual([3, 'e1']);
  await caughtUp(c);
  const b = open(src.t.to);
  expect([await b.lrange(src.k, 0, -1), await b.lrange(dst.k, 0, -1)]).toEqual([['e2', 'e3'], ['e1']]);
  expect(await differences()).toEqual([]);
}, 60_000);

test('a proxy that takes over resumes each node with +CONTINUE, and B stays exact', async () => {
  const cfg = replicated();
  await startProxy(cfg);
  let c = connect();
  await caughtUp(c);
  for (let n = 0; n < 500; n++) await c.incr(`k${n % 50}`);
  await caughtUp(c);
  const first = proxy as ProxyServer;
  await first.close(200);
  proxy = null;
  // Written while nobody follows: in A's backlog, carried by the resume.
  const direct = new Redis({ port: Number(placement.from.masters()[0].split(':')[1]), maxRetriesPerRequest: 0 });
  nodeClients.track(direct);
  for (let n = 0; n < 100; n++) await direct.incr(`k${n % 50}`);
  proxy = await ProxyServer.start(cfg);
  c = connect();
  await caughtUp(c);
  const text = await info(c);
  expect(text).toMatch(/migration_follow_full_syncs:0\r\n/);
  expect(text).toMatch(/migration_follow_resumes:2\r\n/);
  expect(await differences()).toEqual([]);
}, 90_000);

test('read-new: a client\'s pipelined writes go to A without waiting for each other, and its reads behind them see every one', async () => {
  // crossSlot: split, so an MSET across A's nodes runs as one part per node (dispatch/split.ts).
  await startProxy({ ...replicated('read-new'), crossSlot: 'split' });
  const c = connect();
  await caughtUp(c);
  // Moving keys of both nodes of A, so a read waits for writes followed by two followers.
  const byNode = new Map<string, string[]>();
  for (let n = 0; byNode.size < 2 || [...byNode.values()].some((ks) => ks.length < 4); n++) {
    const t = placement.copyTarget(Buffer.from(`prw${n}`));
    if (t !== null && (byNode.get(t.from)?.length ?? 0) < 4) byNode.set(t.from, [...(byNode.get(t.from) ?? []), `prw${n}`]);
  }
  const keys = [...byNode.values()].flat();
  const stale: string[] = [];
  for (let round = 0; round < 30; round++) {
    const p = c.pipeline();
    for (const k of keys) p.set(k, `r${round}`);
    p.incr('prw:count');
    p.mset(keys[0], `m${round}`, keys[keys.length - 1], `m${round}`); // split across A's nodes
    for (const k of keys) p.get(k);
    p.get('prw:count');
    const replies = ((await p.exec()) ?? []).map(([err, v]) => (err === null ? v : String(err)));
    const reads = replies.slice(keys.length + 2);
    if (replies[keys.length + 1] !== 'OK') stale.push(`round ${round}: MSET answered ${String(replies[keys.length + 1])}`);
    keys.forEach((k, i) => {
      const want = i === 0 || i === keys.length - 1 ? `m${round}` : `r${round}`;
      if (reads[i] !== want) stale.push(`round ${round} ${k}: read ${String(reads[i])}, wrote ${want}`);
    });
    if (Number(reads[keys.length]) !== round + 1) stale.push(`round ${round} counter: read ${String(reads[keys.length])}`);
    // The split write alone: its parts are all the reads behind it wait for.
    const [, ...split] = ((await c.pipeline().mset(keys[0], `s${round}`, keys[keys.length - 1], `s${round}`).get(keys[0]).get(keys[keys.length - 1]).exec()) ?? []).map(([, v]) => v);
    if (split.some((v) => v !== `s${round}`)) stale.push(`round ${round} after a split MSET: read ${JSON.stringify(split)}`);
  }
  expect(stale).toEqual([]);
}, 60_000);

test('read-new: a write through the proxy runs on side A and is on side B when its reply comes', async () => {
  await startProxy(replicated('read-new'));
  const c = connect();
  await caughtUp(c);
  for (let n = 0; n < 100; n++) {
    const key = `rn${n}`;
    await c.set(key, `v${n}`);
    await c.expire(key, 1000 + n);
    const t = placement.copyTarget(Buffer.from(key));
    if (t !== null) {
      // A stays the truth (its stream carries the write to B), so going back to double-write loses nothing.
      expect(await open(t.from).get(key)).toBe(`v${n}`);
      expect(await open(t.to).get(key)).toBe(`v${n}`);
      expect(await open(t.to).call('PEXPIRETIME', key)).toBe(await open(t.from).call('PEXPIRETIME', key));
    }
    expect(await c.get(key)).toBe(`v${n}`);
  }
  const id = await c.eval(ADD_JOB, 2, '{rq}:id', '{rq}:wait', '{rq}:job:', 'payload');
  const t = placement.copyTarget(Buffer.from(`{rq}:job:${String(id)}`));
  if (t !== null) expect(await open(t.to).hget(`{rq}:job:${String(id)}`, 'data')).toBe('payload');
  expect(await c.hget(`{rq}:job:${String(id)}`, 'data')).toBe('payload');
}, 60_000);

test('a TTL renewed on A while its snapshot entry waits for a paused side B is not lost there', async () => {
  const cfg = replicated();
  const nodes = cfg.ring.nodes.map((n) => n.addr as string);
  const keyOn = (a: string): string => {
    for (let i = 0; ; i++) {
      const t = placementOf(cfg).copyTarget(Buffer.from(`exp${i}`));
      if (t !== null && t.from === a) return `exp${i}`;
    }
  };
  const key = keyOn(nodes[0]);
  const a = open(nodes[0]);
  await a.set(key, 'v', 'PX', 800);
  const target = placementOf(cfg).copyTarget(Buffer.from(key));
  if (target === null) throw new Error('the key does not move');
  const b = open(target.to);
  // B takes no write for 2.5 s: the snapshot's entry reaches it after the TTL it carried ran out.
  await b.call('CLIENT', 'PAUSE', '2500', 'WRITE');
  const starting = startProxy(cfg);
  await a.pexpire(key, 600_000);
  await starting;
  const c = connect();
  await caughtUp(c);
  expect(await a.get(key)).toBe('v');
  expect(await stateOn(b, key)).toBe(await stateOn(a, key));
}, 60_000);

test('done: once B takes writes, an expiry on A does not delete the key B holds', async () => {
  await startProxy(replicated());
  const c = connect();
  await caughtUp(c);
  const key = [...Array(200).keys()].map((i) => `dn${i}`).find((k) => placement.copyTarget(Buffer.from(k)) !== null) as string;
  const t = placement.copyTarget(Buffer.from(key));
  if (t === null) throw new Error('no moving key');
  await c.set(key, 'old', 'PX', 1500);
  await caughtUp(c);
  expect(await open(t.to).get(key)).toBe('old');
  expect(await c.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  expect(await c.call('PROXY', 'MIGRATION', 'PHASE', 'done')).toBe('OK');
  await c.set(key, 'new');
  // A expires its copy (and says DEL in its stream) after B took over the key.
  const a = open(t.from);
  await eventually(() => a.exists(key), (n) => n === 0, 10_000);
  expect(Number(await a.call('WAIT', '0', '100'))).toBe(0);
  expect(await open(t.to).get(key)).toBe('new');
  expect(await c.get(key)).toBe('new');
  // migrate cleanup leaves none of the follow's records (the applied offsets) on B.
  await proxy?.close(200);
  proxy = null;
  await cleanupMoved(layout as NodeClient, placement, { batch: 100, progress: false });
  for (const b of placement.to?.masters() ?? []) expect(await open(b).keys('__slotproxy:*')).toEqual([]);
}, 60_000);

function placementOf(cfg: RingModeConfig): Placement {
  return Placement.fromConfig(cfg.ring, cfg.migration);
}

describe('into a Redis Cluster', () => {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 30_000);

  test('the full sync, the stream (a script, MULTI, a split DEL, a RENAME across slots) and a takeover land on the cluster exactly', async () => {
    const seeds = [(cluster as RedisCluster).masters[0].address];
    const ring = grow.config().ring;
    const cfg = parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', nodes: ring.nodes }, migration: { phase: 'double-write', carry: 'replication', to: { cluster: { seeds } } }, log: { level: 'silent' } });
    if (cfg.mode !== 'ring') throw new Error('expected a ring config');
    for (const n of (cluster as RedisCluster).masters) await n.command('FLUSHALL');
    for (const [i, n] of ring.nodes.entries()) {
      const node = open(n.addr as string);
      const batch = node.pipeline();
      for (let k = 0; k < 1500; k++) {
        if (k % 10 === 0) batch.set(`pre:${i}:${k}`, `v${k}`, 'EX', 3600);
        else batch.set(`pre:${i}:${k}`, `v${k}`);
      }
      await batch.exec();
    }
    await startProxy(cfg);
    let c = connect();
    await caughtUp(c);
    expect(await differences()).toEqual([]);
    for (let n = 0; n < 200; n++) await Promise.all([c.incr(`cnt:${n % 13}`), c.rpush(`q:${n % 4}`, n), c.eval(ADD_JOB, 2, `{j${n % 3}}:id`, `{j${n % 3}}:wait`, `{j${n % 3}}:job:`, `p${n}`)]);
    await c.multi().incr('{t}:a').lpush('{t}:b', 'x').exec();
    const a0 = open(placement.from.masters()[0]);
    const mine = (await a0.keys('pre:*')).slice(0, 30);
    await a0.del(...mine.slice(0, 10));
    await a0.rename(mine[15], mine[16]);
    await caughtUp(c);
    expect(await differences()).toEqual([]);
    await (proxy as ProxyServer).close(200);
    proxy = await ProxyServer.start(cfg);
    c = connect();
    for (let n = 0; n < 100; n++) await c.incr(`cnt:${n % 13}`);
    await caughtUp(c);
    expect(await info(c)).toMatch(/migration_follow_resumes:2\r\n/);
    expect(await differences()).toEqual([]);
  }, 120_000);

  test('a master of B that gains a lower slot moves its applied record to that slot\'s key: a takeover still resumes with +CONTINUE', async () => {
    const b = cluster as RedisCluster;
    const seeds = [b.masters[0].address];
    const cfg = parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', nodes: grow.config().ring.nodes }, migration: { phase: 'double-write', carry: 'replication', to: { cluster: { seeds } } }, log: { level: 'silent' } });
    if (cfg.mode !== 'ring') throw new Error('expected a ring config');
    for (const n of b.masters) await n.command('FLUSHALL');
    await startProxy(cfg);
    let c = connect();
    for (let n = 0; n < 50; n++) await c.incr(`gain:${n}`);
    await caughtUp(c);
    // Slot 5000 moves to the master of the last slots, below its lowest one: its record's key moves.
    const [from, to] = await Promise.all([b.masterFor(5000), b.masterFor(16383)]);
    // CLUSTER SLOTS rows: [first, last, [host, port, id], ...].
    const rows = (await to.command('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
    const lowest = Math.min(...rows.filter((r) => r[2][1] === to.port).map((r) => r[0]));
    expect(lowest).toBeGreaterThan(5000);
    const oldKey = `${APPLIED_KEY}:{${slotTag(lowest)}}`;
    const newKey = `${APPLIED_KEY}:{${slotTag(5000)}}`;
    expect(await to.command('HLEN', oldKey)).toBe(2);
    const [fromId, toId] = await Promise.all([from, to].map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
    await to.command('CLUSTER', 'SETSLOT', 5000, 'IMPORTING', fromId);
    await from.command('CLUSTER', 'SETSLOT', 5000, 'MIGRATING', toId);
    for (;;) {
      const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', 5000, 100)) as string[];
      if (keys.length === 0) break;
      await from.command('MIGRATE', to.host, to.port, '', 0, 5000, 'KEYS', ...keys);
    }
    for (const m of b.masters) await m.command('CLUSTER', 'SETSLOT', 5000, 'NODE', toId);
    // Writes keep coming; the follower's record on that master is written under the new key, and the old one goes.
    const writing = (async () => {
      for (let n = 0; n < 400; n++) await c.incr(`{${slotTag(5000)}}:gain:${n % 20}`);
    })();
    await eventually(async () => Number(await to.command('HLEN', newKey)), (n) => n === 2, 20_000);
    await writing;
    await eventually(async () => Number(await to.command('HLEN', oldKey)), (n) => n === 0, 20_000);
    await caughtUp(c);
    await (proxy as ProxyServer).close(200);
    proxy = await ProxyServer.start(cfg);
    c = connect();
    for (let n = 0; n < 50; n++) await c.incr(`gain:${n}`);
    await caughtUp(c);
    expect(await info(c)).toMatch(/migration_follow_full_syncs:0\r\n/);
    expect(await differences()).toEqual([]);
  }, 120_000);
});

test('a back-end user that loses +psync mid-migration: the follow says so, and read-new is refused naming it', async () => {
  const nodes = grow.nodes().nodes;
  for (const n of nodes) await n.command('ACL', 'SETUSER', 'nopsync', 'on', '>pw', '~*', '&*', '+@all');
  try {
    const base = replicated();
    await startProxy({ ...base, backend: { ...base.backend, username: 'nopsync', password: 'pw' } });
    const c = connect();
    await eventually(() => info(c), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 30_000);
    // Revoked, and the links cut: the followers' next PSYNC is refused.
    for (const n of nodes) await n.command('ACL', 'SETUSER', 'nopsync', '-psync', '-sync');
    for (const n of nodes) await n.command('CLIENT', 'KILL', 'TYPE', 'replica');
    const tryReadNew = (): Promise<string> =>
      c.call('PROXY', 'MIGRATION', 'PHASE', 'read-new').then(
        () => 'switched',
        (err: Error) => err.message,
      );
    const refusal = await eventually(tryReadNew, (r) => /refused PSYNC: NOPERM.*refused PSYNC: NOPERM/.test(r) || r === 'switched', 20_000);
    expect(refusal).toMatch(/replication lost \(\S+ refused PSYNC: NOPERM/);
  } finally {
    for (const n of nodes) await n.command('ACL', 'DELUSER', 'nopsync');
  }
}, 60_000);
