// Transactions (with WATCH) and blocking commands on keys that move in a live ring migration
// (grow 2 -> 3 over real redis-servers): each behaves as on one Redis, and ring B ends up with
// exactly the state ring A has, in every phase, across a switch made while a command blocks. On the
// replication carry (the default here) a double-write's effect is on B once A's stream carried it;
// in read-new the reply itself waits for B.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { carriedToB, carryOf } from '../helpers/carried';

const grow = useRingGrow();
const config = grow.config;

/** A key (with the given prefix) whose owner moves to the new node c. */
function movingKey(placement: Placement, prefix: string): string {
  for (let i = 0; ; i++) if (placement.copyTarget(Buffer.from(`${prefix}${i}`)) !== null) return `${prefix}${i}`;
}

let proxy: ProxyServer;
let placement: Placement;
const clients: Redis[] = [];

function connect(): Redis {
  const c = new Redis({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

/** The node a key lives on in ring A and in ring B. */
function sides(key: string): { a: Redis; b: Redis } {
  const t = placement.copyTarget(Buffer.from(key));
  if (t === null) throw new Error(`${key} does not move`);
  const byAddr = (addr: string): Redis => {
    const [host, port] = addr.split(':');
    const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true });
    clients.push(c);
    return c;
  };
  return { a: byAddr(t.from), b: byAddr(t.to) };
}

/** Double-write on the replication carry: until every node of A's stream carried what it holds now. */
async function carried(): Promise<void> {
  if ((await carryOf(connect())) === 'replication') await carriedToB(placement.from.masters());
}

beforeEach(async () => {
  await Promise.all(grow.nodes().nodes.map((n) => n.command('FLUSHALL')));
  const cfg = config();
  placement = Placement.fromConfig(cfg.ring, cfg.migration);
  proxy = await ProxyServer.start(cfg);
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await proxy.close(200);
});

test.each(['double-write', 'read-new'])('%s: MULTI/EXEC with WATCH on a moving key runs once and reaches ring B', async (phase) => {
  const admin = connect();
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', phase)).toBe('OK');
  const c = connect();
  const key = movingKey(placement, `t-${phase}-`);
  const list = `{${key}}:list`;
  await c.set(key, '10');
  await c.watch(key);
  const v = Number(await c.get(key));
  expect(await c.multi().set(key, String(v + 1)).incr(key).rpush(list, 'x', 'y').get(key).exec()).toEqual([
    [null, 'OK'],
    [null, 12],
    [null, 2],
    [null, '12'],
  ]);
  // Pipelined right behind EXEC, a read must see it (in read-new it reads ring B).
  const [exec, got] = await Promise.all([c.multi().incr(key).exec(), c.get(key)]);
  expect(exec).toEqual([[null, 13]]);
  expect(got).toBe('13');
  if (phase === 'double-write') await carried();
  const { a, b } = sides(key);
  expect(await b.get(key)).toBe('13');
  expect(await a.get(key)).toBe('13');
  expect(await b.lrange(list, 0, -1)).toEqual(['x', 'y']);
}, 30_000);

test('a WATCHed moving key touched by another client makes EXEC return nil, and nothing is copied', async () => {
  const c = connect();
  const other = connect();
  const key = movingKey(placement, 'w');
  await c.set(key, '1');
  await c.watch(key);
  await other.set(key, '2');
  expect(await c.multi().set(key, '3').exec()).toBeNull();
  expect(await c.get(key)).toBe('2');
  await carried();
  expect(await sides(key).b.get(key)).toBe('2');
}, 30_000);

test('EXECABORT and runtime errors inside a transaction on a moving key answer as one Redis does', async () => {
  const c = connect();
  const key = movingKey(placement, 'e');
  await c.set(key, 'text');
  // A runtime error (WRONGTYPE) keeps its place in EXEC's reply; the other commands run.
  const reply = await c.multi().incr(key).append(key, '!').exec();
  expect(String(reply?.[0][0])).toContain('not an integer');
  expect(reply?.[1]).toEqual([null, 5]);
  await carried();
  expect(await sides(key).b.get(key)).toBe('text!');
  // A queue-time error aborts everything.
  await expect(c.multi().set(key, 'x').call('SET', key).exec()).rejects.toThrow(/EXECABORT/);
  expect(await c.get(key)).toBe('text!');
}, 30_000);

test.each(['double-write', 'read-new'])('%s: BLPOP and BLMOVE on moving keys pop once, and ring B loses the popped item too', async (phase) => {
  const admin = connect();
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', phase)).toBe('OK');
  const consumer = connect();
  const producer = connect();
  const key = movingKey(placement, `q-${phase}-`);
  const dst = `{${key}}:done`;
  const popped = consumer.blpop(key, 5);
  // The pop blocks on a node: wait until the node has the blocked client, not for a fixed time.
  const { a, b } = sides(key);
  while (!String(await a.info('clients')).includes('blocked_clients:1')) await new Promise((r) => setImmediate(r));
  await producer.rpush(key, 'job1', 'job2');
  expect(await popped).toEqual([key, 'job1']);
  if (phase === 'double-write') await carried();
  expect(await b.lrange(key, 0, -1)).toEqual(['job2']);
  expect(await consumer.blmove(key, dst, 'LEFT', 'RIGHT', 1)).toBe('job2');
  if (phase === 'double-write') await carried();
  expect(await b.exists(key)).toBe(0);
  expect(await b.lrange(dst, 0, -1)).toEqual(['job2']);
  expect(await a.lrange(dst, 0, -1)).toEqual(['job2']);
}, 30_000);

test('a BLPOP blocked on ring A when the ring switches to done is moved to ring B and gets the next push', async () => {
  const admin = connect();
  const consumer = connect();
  const producer = connect();
  const key = movingKey(placement, 'd');
  const popped = consumer.blpop(key, 0);
  const { a, b } = sides(key);
  while (!String(await a.info('clients')).includes('blocked_clients:1')) await new Promise((r) => setImmediate(r));
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'done')).toBe('OK');
  while (!String(await b.info('clients')).includes('blocked_clients:1')) await new Promise((r) => setImmediate(r));
  await producer.rpush(key, 'late');
  expect(await popped).toEqual([key, 'late']);
  expect(await b.exists(key)).toBe(0);
}, 30_000);
