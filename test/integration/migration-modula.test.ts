// A live migration between two twemproxy `distribution: modula` rings (grow 2 -> 3 over real
// redis-servers, in process): in every phase each key is read and written where hash % 2 and
// hash % 3 put it (computed here, not by the proxy's Ring), and writes reach ring B (in double-write
// on the replication carry, the default here, once A's stream carried them).
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { md5 } from '../../sharding/hash';
import { carriedToB, carryOf } from '../helpers/carried';

let nodes: StandaloneNodes | undefined;
let proxy: ProxyServer | undefined;
const clients: Redis[] = [];

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await proxy?.close(200);
  await nodes?.stop();
}, 30_000);

function connect(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

test('modula 2 -> modula 3: double-write, read-new and done read and write each key at hash % 2, then hash % 3', async () => {
  const addresses = nodes!.addresses;
  // Named in twemproxy's order (by name), so hash % n is the n-th node in config order.
  const ring = (n: number) => addresses.slice(0, n).map((addr, i) => ({ name: 'abc'[i], addr, weight: 1 }));
  const cfg = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', hashTag: '', distribution: 'modula', nodes: ring(2) },
    // distribution: modula is ring A's, by default.
    migration: { phase: 'double-write', to: { nodes: ring(3) } },
    log: { level: 'silent' },
  });
  proxy = await ProxyServer.start(cfg);
  const c = connect(proxy.address.port);
  const direct = nodes!.nodes;
  const keys = Array.from({ length: 300 }, (_, i) => `mk:${i}`);
  const hashOf = (k: string): number => md5(Buffer.from(k), 0, Buffer.byteLength(k));
  const ownerA = (k: string): number => hashOf(k) % 2;
  const ownerB = (k: string): number => hashOf(k) % 3;
  const moving = keys.filter((k) => ownerA(k) !== ownerB(k));
  expect(moving.length).toBeGreaterThan(100);
  expect(moving.length).toBeLessThan(keys.length);

  // double-write: a non-idempotent write on every key lands on A's owner and its state reaches B's.
  for (const k of keys) await c.incrby(k, 5);
  for (const k of keys) await c.incr(k);
  if ((await carryOf(c)) === 'replication') await carriedToB(addresses.slice(0, 2));
  for (const k of keys) {
    expect([k, await direct[ownerA(k)].command('GET', k)]).toEqual([k, '6']);
    expect([k, await direct[ownerB(k)].command('GET', k)]).toEqual([k, '6']);
  }
  // The new node holds exactly the keys hash % 3 gives it.
  const onNew = (await direct[2].command('KEYS', 'mk:*')) as string[];
  expect([...onNew].sort()).toEqual(keys.filter((k) => ownerB(k) === 2).sort());

  // read-new: reads come from B; writes still go to A first and reach B.
  const admin = connect(proxy.address.port);
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  for (const k of keys) expect([k, await c.incr(k)]).toEqual([k, 7]);
  for (const k of moving) expect([k, await direct[ownerA(k)].command('GET', k)]).toEqual([k, '7']);
  for (const k of keys) expect([k, await c.get(k)]).toEqual([k, '7']);

  // done: ring B only.
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'done')).toBe('OK');
  for (const k of moving) await c.set(k, 'new');
  for (const k of moving) {
    expect([k, await direct[ownerB(k)].command('GET', k)]).toEqual([k, 'new']);
    expect([k, await direct[ownerA(k)].command('GET', k)]).toEqual([k, '7']);
    expect([k, await c.get(k)]).toEqual([k, 'new']);
  }
}, 60_000);
