// Converging writes sharing a burst (proxy/migration/converging-batch.ts): the writes of one turn
// to one node of ring A go as one MULTI, yet every client gets its own replies in its own order,
// a read pipelined behind a write sees it, ring B ends up equal to ring A, and a write refused at
// queue time inside a shared burst gets its own refusal while the others run (grow 2 -> 3).
// Bursts are the change feeds' converging path, so those tests pin `carry: feeds`; on the
// replication carry (the default) nothing converges, and the same pipelines are checked there too:
// each client's replies in order, a refusal of its own, and B equal to A once A's stream carried it.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { carriedToB, carryOf } from '../helpers/carried';

const grow = useRingGrow();

let proxy: ProxyServer | undefined;
let placement: Placement;
const clients: Redis[] = [];

function connect(port: number, host = '127.0.0.1'): Redis {
  const c = new Redis({ host, port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

function nodeClient(addr: string): Redis {
  const [host, port] = addr.split(':');
  return connect(Number(port), host);
}

/** Moving keys `prefix<i>` whose node in ring A is `from` (the first `n` found). */
function movingKeys(prefix: string, n: number, from?: string): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const t = placement.copyTarget(Buffer.from(`${prefix}${i}`));
    if (t !== null && (from === undefined || t.from === from)) out.push(`${prefix}${i}`);
  }
  return out;
}

async function commandCalls(name: string): Promise<number> {
  let calls = 0;
  for (const n of grow.nodes().nodes) calls += Number(/calls=(\d+)/.exec(String(await n.command('INFO', 'commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${name}:`)) ?? '')?.[1] ?? 0);
  return calls;
}

beforeEach(async () => {
  await Promise.all(grow.nodes().nodes.map((n) => n.command('FLUSHALL')));
  await Promise.all(grow.nodes().nodes.map((n) => n.command('ACL', 'SETUSER', 'default', 'on', 'nopass', '+@all', '~*', '&*')));
});

/** The proxy of a test, on the change feeds (`feeds`) or on the default carry (replication on these nodes). */
async function start(carry?: 'feeds'): Promise<ProxyServer> {
  const base = grow.config();
  const cfg = carry === undefined ? base : { ...base, migration: { ...base.migration!, carry } };
  placement = Placement.fromConfig(cfg.ring, cfg.migration);
  proxy = await ProxyServer.start(cfg);
  expect(await carryOf(connect(proxy.address.port))).toBe(carry ?? 'replication');
  return proxy;
}

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await proxy?.close(200);
  proxy = undefined;
  await Promise.all(grow.nodes().nodes.map((n) => n.command('ACL', 'SETUSER', 'default', 'on', 'nopass', '+@all', '~*', '&*')));
});

/** Ten clients' pipelines of writes and reads, moving keys and staying ones: each gets its replies in order; the moving keys returned with the writes made to them. */
async function pipelines(proxy: ProxyServer, phase: string): Promise<{ moving: string[]; movingWrites: number }> {
  const admin = connect(proxy.address.port);
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', phase)).toBe('OK');
  await Promise.all(grow.nodes().nodes.map((n) => n.command('CONFIG', 'RESETSTAT')));
  const CLIENTS = 10;
  const KEYS = 8;
  const moves = (k: string): boolean => placement.copyTarget(Buffer.from(k)) !== null;
  let movingWrites = 0;
  const runs = Array.from({ length: CLIENTS }, async (_, c) => {
    const client = connect(proxy.address.port);
    // Keys that move and keys that stay, interleaved in one pipeline: runs of writes, reads between.
    const keys = Array.from({ length: KEYS }, (_, i) => `${phase}-${c}-${i}`);
    const p = client.pipeline();
    const expected: unknown[] = [];
    for (const k of keys) {
      p.set(k, `v-${k}`).incr(`{${k}}:n`).incr(`{${k}}:n`).rpush(`{${k}}:l`, 'x', 'y').append(k, '+');
      expected.push('OK', 1, 2, 2, `v-${k}+`.length);
      movingWrites += (moves(k) ? 2 : 0) + (moves(`{${k}}:n`) ? 2 : 0) + (moves(`{${k}}:l`) ? 1 : 0);
      if (k.endsWith('-3')) {
        // A read right behind the writes sees them.
        p.get(k);
        expected.push(`v-${k}+`);
      }
    }
    for (const k of keys) {
      p.get(k).get(`{${k}}:n`).lrange(`{${k}}:l`, 0, -1);
      expected.push(`v-${k}+`, '2', ['x', 'y']);
    }
    const replies = await p.exec();
    expect(replies?.map(([err, r]) => err ?? r)).toEqual(expected);
    return keys;
  });
  const keys = (await Promise.all(runs)).flat();
  const moving = keys.flatMap((k) => [k, `{${k}}:n`, `{${k}}:l`]).filter(moves);
  expect(movingWrites).toBeGreaterThan(50);
  return { moving, movingWrites };
}

/** Every moving key of `moving` is on its node of B as on its node of A, type and value. */
async function bEqualsA(moving: readonly string[]): Promise<void> {
  for (const k of moving) {
    const t = placement.copyTarget(Buffer.from(k));
    if (t === null) continue;
    const [a, b] = [nodeClient(t.from), nodeClient(t.to)];
    const type = await a.type(k);
    const read = (r: Redis): Promise<unknown> => (type === 'list' ? r.lrange(k, 0, -1) : r.get(k));
    expect([type, await read(b)]).toEqual([type, await read(a)]);
    expect(await b.type(k)).toBe(type);
  }
}

test.each(['double-write', 'read-new'])('%s: pipelined writes of many clients share bursts, each client gets its own replies in order, and ring B equals ring A', async (phase) => {
  const proxy = await start('feeds');
  if (phase === 'double-write') {
    // Double-write's writes converge (and share bursts) while a read barrier lasts (read-barrier.ts:
    // READING_TTL_MS after a switch to read-new), not only in a new proxy's first second.
    expect(await connect(proxy.address.port).call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  }
  const { moving, movingWrites } = await pipelines(proxy, phase);
  expect(String(await connect(proxy.address.port).info('proxy'))).toContain('migration_write_answer:converging');
  // Fewer MULTIs than converging writes: bursts were shared (one per write without sharing). Not
  // half of them: on a loaded machine, beside other test files, fewer writes meet in one turn (68
  // MULTIs for 115 writes was seen so).
  const multis = await commandCalls('multi');
  expect(multis).toBeGreaterThan(0);
  expect(multis).toBeLessThan(movingWrites);
  await bEqualsA(moving);
}, 60_000);

test.each(['double-write', 'read-new'])('replication carry, %s: pipelined writes of many clients, each client gets its own replies in order, and ring B equals ring A', async (phase) => {
  const { moving } = await pipelines(await start(), phase);
  // Double-write answers after A: B holds the writes once A's stream carried them. Read-new's replies waited for B.
  if (phase === 'double-write') await carriedToB(placement.from.masters());
  await bEqualsA(moving);
}, 60_000);

test('a write refused at queue time inside a shared burst gets its own refusal; the others run once, or are told they did not run when their client\'s next request is already behind the burst', async () => {
  const proxy = await start('feeds');
  const admin = connect(proxy.address.port);
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).toBe('OK');
  const [nodeA, nodeB] = grow.nodes().addresses;
  const onB = async (k: string): Promise<string | null> => nodeClient(placement.copyTarget(Buffer.from(k))?.to ?? '').get(k);
  const c = connect(proxy.address.port);
  const refuseIncr = async (addr: string): Promise<Redis> => {
    const n = nodeClient(addr);
    // INCR refused by ACL on ring A's node: a queue-time refusal SET does not share.
    await n.call('ACL', 'SETUSER', 'default', '-incr');
    await n.config('RESETSTAT');
    return n;
  };
  const results = (replies: [Error | null, unknown][] | null): unknown[] => (replies ?? []).map(([err, r]) => (err === null ? r : String(err.message)));

  // 1. Nothing of the client behind the burst: the other writes are sent again and run once.
  const b = await refuseIncr(nodeB);
  const [k1, k2, k3] = movingKeys('sent-again-', 3, nodeB);
  const first = results(await c.pipeline().set(k1, 'one').incr(k2).set(k3, 'three').exec());
  expect(first[0]).toBe('OK');
  expect(String(first[1])).toMatch(/^NOPERM .*'incr'/);
  expect(first[2]).toBe('OK');
  expect(await c.get(k1)).toBe('one');
  expect(String(await b.info('errorstats'))).toMatch(/errorstat_EXECABORT:count=1\r\n/);
  expect(Number(/cmdstat_set:calls=(\d+)/.exec(String(await b.info('commandstats')))?.[1])).toBe(2);
  expect([await onB(k1), await onB(k3), await b.exists(k2)]).toEqual(['one', 'three', 0]);

  // 2. A read of the client pipelined behind the burst: the others did not run, and say so.
  const a = await refuseIncr(nodeA);
  const [j1, j2, j3] = movingKeys('not-run-', 3, nodeA);
  const second = results(await c.pipeline().set(j1, 'one').incr(j2).set(j3, 'three').get(j1).exec());
  expect(String(second[0])).toMatch(/^ERR slotproxy: not run: /);
  expect(String(second[1])).toMatch(/^NOPERM .*'incr'/);
  expect(String(second[2])).toMatch(/^ERR slotproxy: not run: /);
  expect(second[3]).toBe(null);
  expect(Number(/cmdstat_set:calls=(\d+)/.exec(String(await a.info('commandstats')))?.[1] ?? 0)).toBe(0);

  // 3. That node now gets a burst per write: the same pipeline runs as on one Redis.
  const third = results(await c.pipeline().set(j1, 'one').incr(j2).set(j3, 'three').get(j1).exec());
  expect([third[0], third[2], third[3]]).toEqual(['OK', 'OK', 'one']);
  expect(String(third[1])).toMatch(/^NOPERM .*'incr'/);
  expect([await onB(j1), await onB(j3)]).toEqual(['one', 'three']);
}, 30_000);

test('replication carry: a write refused on A inside a pipeline gets its own refusal; the others run once, and reach B', async () => {
  const proxy = await start();
  const [, nodeB] = grow.nodes().addresses;
  const onB = async (k: string): Promise<string | null> => nodeClient(placement.copyTarget(Buffer.from(k))?.to ?? '').get(k);
  const c = connect(proxy.address.port);
  const b = nodeClient(nodeB);
  await b.call('ACL', 'SETUSER', 'default', '-incr');
  await b.config('RESETSTAT');
  const [k1, k2, k3] = movingKeys('refused-', 3, nodeB);
  const replies = (await c.pipeline().set(k1, 'one').incr(k2).set(k3, 'three').get(k1).exec()) ?? [];
  const results = replies.map(([err, r]) => (err === null ? r : String(err.message)));
  expect([results[0], results[2], results[3]]).toEqual(['OK', 'OK', 'one']);
  expect(String(results[1])).toMatch(/^NOPERM .*'incr'/);
  expect(Number(/cmdstat_set:calls=(\d+)/.exec(String(await b.info('commandstats')))?.[1])).toBe(2);
  await carriedToB(placement.from.masters());
  expect([await onB(k1), await onB(k3), await nodeClient(placement.copyTarget(Buffer.from(k2))?.to ?? '').exists(k2)]).toEqual(['one', 'three', 0]);
}, 30_000);
