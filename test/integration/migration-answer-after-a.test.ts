// Double-write answers a write after side A alone and lets its node's stream carry it to B (the
// replication carry, the default here; the change feeds on theirs; proxy/dispatch/carried-write.ts), over real redis-servers (a ring grown 2 -> 3) with two
// proxies: when writes stop, B holds A's final state for every key; the switch to read-new is a
// fleet barrier (read-barrier.ts), so a write acknowledged through one proxy is read back from B
// through the other; going back to double-write answers after A again.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';

const grow = useRingGrow();
const clients: Redis[] = [];
const proxies: ProxyServer[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(proxies.splice(0).map((p) => p.close(500)));
  await Promise.all(grow.nodes().nodes.map((n) => n.command('FLUSHALL')));
});

function open(addr: string): Redis {
  const [host, port] = addr.split(':');
  const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

function connect(p: ProxyServer): Redis {
  return open(`127.0.0.1:${p.address.port}`);
}

async function startProxies(n: number, carry?: 'feeds'): Promise<ProxyServer[]> {
  const base = grow.config();
  const cfg = carry === undefined ? base : { ...base, migration: { ...base.migration!, carry } };
  for (let i = 0; i < n; i++) proxies.push(await ProxyServer.start(cfg));
  return proxies.slice();
}

function movingKeys(prefix: string, count: number): string[] {
  const placement = Placement.fromConfig(grow.config().ring, grow.config().migration);
  const keys: string[] = [];
  for (let i = 0; keys.length < count; i++) if (placement.copyTarget(Buffer.from(`${prefix}${i}`)) !== null) keys.push(`${prefix}${i}`);
  return keys;
}

function sides(key: string): { a: Redis; b: Redis } {
  const t = Placement.fromConfig(grow.config().ring, grow.config().migration).copyTarget(Buffer.from(key));
  if (t === null) throw new Error(`${key} does not move`);
  return { a: open(t.from), b: open(t.to) };
}

async function answerMode(c: Redis): Promise<string> {
  const info = String(await c.call('INFO', 'proxy'));
  return /migration_write_answer:(\S+)/.exec(info)?.[1] ?? '?';
}

/** Polls until `check` holds (the proxies' fleet checks run every second). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A key's value and whether it has a TTL, on one node (DUMP holds the value byte for byte). */
async function state(node: Redis, key: string): Promise<string> {
  const dump = await node.dumpBuffer(key);
  if (dump === null) return 'gone';
  return `${dump.toString('hex')} ${(await node.pttl(key)) >= 0 ? 'ttl' : 'no-ttl'}`;
}

test('double-write answers after side A; when writes stop, side B holds A\'s final state of every key', async () => {
  const [p1, p2] = await startProxies(2);
  const admins = [connect(p1), connect(p2)];
  await until('both proxies to answer after side A', async () => (await Promise.all(admins.map(answerMode))).every((m) => m === 'after-side-a'));
  const counters = movingKeys('cnt', 10);
  const lists = movingKeys('lst', 5);
  const gone = movingKeys('del', 5);
  const expiring = movingKeys('exp', 5);
  const acked = new Map<string, number>();
  const writers = [p1, p2, p1, p2].map(connect);
  const direct = sides(counters[0]).a;
  const deadline = Date.now() + 2000;
  await Promise.all(
    writers.map(async (w, i) => {
      for (let n = 0; Date.now() < deadline; n++) {
        const k = counters[(n + i) % counters.length];
        await w.incr(k);
        acked.set(k, (acked.get(k) ?? 0) + 1);
        await w.rpush(lists[n % lists.length], `${i}:${n}`);
        if (n % 7 === 0) await w.set(gone[n % gone.length], 'x');
        if (n % 11 === 0) await w.del(gone[(n + 1) % gone.length]);
        await w.set(expiring[n % expiring.length], String(n), 'PX', 60_000);
      }
    }),
  );
  // A write straight on A's node: carried by the feeds too.
  await direct.incrby(counters[0], 1000);
  acked.set(counters[0], (acked.get(counters[0]) ?? 0) + 1000);
  for (const [k, n] of acked) expect(Number(await admins[0].get(k))).toBe(n);
  const all = [...counters, ...lists, ...gone, ...expiring];
  await until('side B to hold side A\'s final state', async () => {
    for (const k of all) {
      const { a, b } = sides(k);
      if ((await state(a, k)) !== (await state(b, k))) return false;
    }
    return true;
  });
  // A counter no writer reached in the 2 s (a loaded machine) is absent on both sides: 0.
  for (const k of counters) expect(Number(await sides(k).b.get(k))).toBe(acked.get(k) ?? 0);
}, 60_000);

test.each([2, 3])('the switch to read-new is a fleet barrier (%i proxies): a write acknowledged through one proxy is read from side B through another', async (count) => {
  const started = await startProxies(count);
  const [p1, p2] = started;
  const admins = started.map(connect);
  await until('both proxies to answer after side A', async () => (await Promise.all(admins.map(answerMode))).every((m) => m === 'after-side-a'));
  const keys = movingKeys('rw', 8);
  const writer = connect(p2);
  const reader = connect(p1);
  let switchedAt = Infinity;
  let stale: string[] = [];
  let readsFromB = 0;
  let running = true;
  const load = (async () => {
    for (let n = 0; running; n++) {
      const k = keys[n % keys.length];
      const v = await writer.incr(k);
      const ackedAt = Date.now();
      const read = Number(await reader.get(k));
      if (ackedAt > switchedAt) {
        readsFromB++;
        if (read < v) stale.push(`${k}: acknowledged ${v}, read ${read}`);
      }
    }
  })();
  await new Promise((resolve) => setTimeout(resolve, 300));
  const began = Date.now();
  expect(await admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  switchedAt = Date.now();
  const switchMs = switchedAt - began;
  // Enough reads from B after the switch to tell (a second's worth on an idle machine; longer on a loaded one).
  await until('more than 50 reads from B after the switch', async () => readsFromB > 50);
  running = false;
  await load;
  expect(readsFromB).toBeGreaterThan(50);
  expect(stale).toEqual([]);
  // The others, still in double-write, converge now: their writes are answered once B holds them.
  for (const a of admins.slice(1)) expect(await answerMode(a)).toBe('converging');
  console.log(`switch to read-new with ${count} proxies under load took ${switchMs} ms; ${readsFromB} reads from B after it, none stale`);

  // Back to double-write: once no proxy reads from B (and the barrier's hash expired), both answer after A again.
  expect(await admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).toBe('OK');
  expect(await answerMode(admins[0])).toBe('converging');
  await until('both proxies to answer after side A again', async () => (await Promise.all(admins.map(answerMode))).every((m) => m === 'after-side-a'), 30_000);
  stale = [];
}, 60_000);

// The change feeds' own (pinned): a write to a B node that is down converges, so its client hears of
// it. On the replication carry the write is answered after A and B converges once the node is back
// (migration.test.ts, "a ring B node down during double-write, side A followed as a replica").
test('a ring B node down: writes to keys moving there converge (the client hears of it); once it is back, the next write reaches it', async () => {
  const [p1] = await startProxies(1, 'feeds');
  const c = connect(p1);
  await until('the proxy to answer after side A', async () => (await answerMode(c)) === 'after-side-a');
  const placement = Placement.fromConfig(grow.config().ring, grow.config().migration);
  const newNode = grow.nodes().nodes[2];
  const key = movingKeys('down', 200).find((k) => placement.copyTarget(Buffer.from(k))?.to === grow.nodes().addresses[2]);
  if (key === undefined) throw new Error('no key moves to the new node');
  expect(await c.incr(key)).toBe(1);
  await until('the key on B', async () => (await newNode.command('GET', key)) === '1');
  await newNode.stop();
  try {
    await expect(c.incr(key)).rejects.toThrow(/the write ran on .* but its copy to the new ring failed/);
  } finally {
    await newNode.restart();
  }
  // As before: B stays behind for that key until its next write (or `migrate copy --restart`).
  expect(await c.incr(key)).toBe(3);
  await until('the key carried to the restarted node', async () => (await newNode.command('GET', key).catch(() => null)) === '3');
}, 60_000);

// Right after the start the follows are in their full syncs (A's nodes wait repl-diskless-sync-delay,
// Redis's default 5 s here, before they send the snapshot): a switch to read-new waits for them, then switches.
test('replication carry: a reload into read-new during the follows\' full syncs waits for them, then switches; a write through it is read from B', async () => {
  const a = grow.config().ring.nodes.map((n) => open(n.addr as string));
  for (const n of a) await n.config('SET', 'repl-diskless-sync-delay', '5');
  const [p1] = await startProxies(1);
  const c = connect(p1);
  expect(/migration_carry:(\w+)/.exec(String(await c.call('INFO', 'proxy')))?.[1]).toBe('replication');
  const phase = async (): Promise<string> => /phase:(\S+)/.exec(String(await c.call('PROXY', 'MIGRATION', 'STATUS')))?.[1] ?? '';
  const uncovered = async (): Promise<string> => /uncovered:([^\r\n]*)/.exec(String(await c.call('PROXY', 'MIGRATION', 'STATUS')))?.[1] ?? '';
  expect(await uncovered()).not.toBe('');
  const base = grow.config();
  expect(() => p1.reloadRing({ ...base, migration: { ...base.migration!, phase: 'read-new' } })).not.toThrow();
  expect(await phase()).toBe('double-write');
  await until('the reload to switch to read-new', async () => (await phase()) === 'read-new', 30_000);
  expect(await uncovered()).toBe('');
  const [key] = movingKeys('after-wait', 1);
  expect(await c.incr(key)).toBe(1);
  expect(await sides(key).b.get(key)).toBe('1');
  for (const n of a) await n.config('SET', 'repl-diskless-sync-delay', '0');
}, 60_000);
