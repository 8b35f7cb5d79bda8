// The fleet's barriers keep their hashes on one node of side A, the coordination node
// (`__slotproxy:migration:reading`, `:closing`, `:copiers`; proxy/migration/closing.ts). A FLUSHALL,
// FLUSHDB or DEL there while the fleet confirms a barrier erases what the proxies confirmed: over
// real redis-servers (a ring grown 2 -> 3) and two proxy processes, one SIGSTOPped so the barrier
// stays open, the switch to read-new and to done fail at once naming the node (not a 5 s wait
// then a timeout naming the proxies), no proxy keeps holding writes for the erased closing, and a
// script waiting on an erased copier mark asks again and is answered once its job is on B.
// The marks serve a script's reply in double-write on the change feeds (pinned there), and in
// read-new on the replication carry (where a double-write is answered after A): the test runs on both.
import fs from 'node:fs';
import Redis from 'ioredis';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { READING_KEY } from '../../proxy/migration/read-barrier';
import { CLOSING_KEY } from '../../proxy/migration/closing';
import { COPIERS_KEY } from '../../proxy/migration/copier-lease';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { verifyMoved } from '../../proxy/migration/tools/verify';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { carryOf } from '../helpers/carried';

const grow = useRingGrow();
const clients: Redis[] = [];
let dir = '';
let started: { proxy: ProxyProcess; port: number }[] = [];

type Carry = 'feeds' | 'replication';

beforeEach(() => {
  dir = tempDir('slotproxy-coordination-flush-');
  started = [];
});

/** Two proxy processes on `carry` (unset: auto, which takes replication of these standalone nodes). */
async function startFleet(carry?: Carry): Promise<void> {
  for (let i = 0; i < 2; i++) started.push(await startProxyProcess(rawConfig(carry), dir));
}

afterEach(async () => {
  for (const c of clients.splice(0)) if (c.status !== 'end') c.disconnect();
  // A SIGSTOPped proxy is continued, then killed; each exit awaited (bounded).
  await Promise.all(started.map((p) => p.proxy.stop()));
  killAllProxies();
  fs.rmSync(dir, { recursive: true, force: true });
  await Promise.all(grow.nodes().nodes.map((n) => n.command('FLUSHALL')));
});

function rawConfig(carry?: Carry): Record<string, unknown> {
  const ring = (n: number): { name: string; addr: string; weight: number }[] => grow.nodes().addresses.slice(0, n).map((addr, i) => ({ name: 'abc'[i], addr, weight: 1 }));
  return { mode: 'ring', ring: { hash: 'md5', nodes: ring(2) }, migration: { phase: 'double-write', ...(carry === undefined ? {} : { carry }), to: { nodes: ring(3) } } };
}

function open(addr: string): Redis {
  const [host, port] = addr.split(':');
  // No reconnecting, no offline queue: a command to a stopped proxy waits on its socket alone.
  const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true, retryStrategy: () => null });
  clients.push(c);
  return c;
}

const placement = (): Placement => Placement.fromConfig(grow.config().ring, grow.config().migration);
/** The coordination node: ring A's first node. */
const coordination = (): string => grow.nodes().addresses[0];
const status = async (c: Redis): Promise<string> => String(await c.call('PROXY', 'MIGRATION', 'STATUS'));
const copiers = async (c: Redis): Promise<string> => /copiers:(\S*)/.exec(await status(c))?.[1] ?? '';
const phase = async (c: Redis): Promise<string> => /phase:(\S*)/.exec(await status(c))?.[1] ?? '';
const errorOf = (p: Promise<unknown>): Promise<string> => p.then((r) => `no error: ${String(r)}`, (e: Error) => e.message);

/** Both proxies registered, each node's copier known to both, and every feed live. */
async function fleetReady(admins: Redis[]): Promise<string[]> {
  await eventually(() => open(coordination()).client('LIST'), (l) => String(l).split('slotproxy-fleet|').length - 1 >= 2);
  const lines = await eventually(() => Promise.all(admins.map(copiers)), (l) => l.every((x) => x === l[0] && x !== '' && !x.includes('?')));
  await eventually(() => Promise.all(admins.map(status)), (s) => s.every((x) => !x.includes('uncovered:')));
  return lines[0].split(',');
}

/** Every proxy covers every node of A again (the flushed node re-walked). */
const covered = (admins: Redis[]): Promise<string[]> => eventually(() => Promise.all(admins.map(status)), (s) => s.every((x) => !x.includes('uncovered:')), 20_000);

/** Moving keys, written through the first proxy. */
async function writeKeys(c: Redis, prefix: string, count: number): Promise<void> {
  for (let i = 0, n = 0; n < count; i++) {
    if (placement().copyTarget(Buffer.from(`${prefix}${i}`)) === null) continue;
    await c.set(`${prefix}${i}`, `v${i}`);
    n++;
  }
}

async function expectBExact(): Promise<void> {
  const nodes = new NodeClient(grow.config());
  await nodes.start();
  try {
    const result = await verifyMoved(nodes, nodes.placement(), { ttlToleranceMs: 2000, batch: 100, show: 5, progress: false });
    expect(result.examples).toEqual([]);
    expect(result.differing).toBe(0);
  } finally {
    nodes.close();
  }
}

test('a FLUSHALL of the coordination node while the fleet confirms read-new fails the switch at once, naming the node; once re-walked the switch goes through and B is exact', async () => {
  await startFleet();
  const admins = started.map((p) => open(`127.0.0.1:${p.port}`));
  await fleetReady(admins);
  await writeKeys(admins[0], 'k', 60);
  const coord = open(coordination());

  // The second proxy cannot confirm: the barrier stays open (for 5 s) on its acknowledgment alone.
  started[1].proxy.kill('SIGSTOP');
  const switched = errorOf(admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'read-new'));
  // id, gen and the first proxy's acknowledgment.
  await eventually(() => coord.hlen(READING_KEY), (n) => n >= 3);
  const flushedAt = Date.now();
  await coord.flushall();
  const why = await switched;
  const tookMs = Date.now() - flushedAt;
  console.log(`read-new refused ${tookMs} ms after the FLUSHALL: ${why}`);
  expect(why).toContain(`the fleet's coordination keys on ${coordination()} are gone`);
  expect(why).toContain(READING_KEY);
  expect(tookMs).toBeLessThan(1000);
  expect(await phase(admins[0])).toBe('double-write');

  started[1].proxy.kill('SIGCONT');
  await covered(admins);
  expect(await admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  await expectBExact();
}, 60_000);

test('a FLUSHDB of the coordination node while side A closes for done fails the switch at once, and no proxy keeps holding writes for the erased closing', async () => {
  await startFleet();
  const admins = started.map((p) => open(`127.0.0.1:${p.port}`));
  await fleetReady(admins);
  for (const c of admins) expect(await c.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  await writeKeys(admins[0], 'd', 40);
  const coord = open(coordination());

  started[1].proxy.kill('SIGSTOP');
  const switched = errorOf(admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'done'));
  // by and the first proxy's acknowledgment: it holds its writes now.
  await eventually(() => coord.hlen(CLOSING_KEY), (n) => n >= 2);
  const flushedAt = Date.now();
  await coord.flushdb();
  const why = await switched;
  console.log(`done refused ${Date.now() - flushedAt} ms after the FLUSHDB: ${why}`);
  expect(why).toContain(`the fleet's coordination keys on ${coordination()} are gone`);
  expect(why).toContain(CLOSING_KEY);
  expect(Date.now() - flushedAt).toBeLessThan(1000);
  expect(await phase(admins[0])).toBe('read-new');
  // A write through it is answered now, not once the closing would have expired (30 s).
  const wroteAt = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const wrote = await Promise.race([admins[0].set('after-flush', '1'), new Promise((resolve) => (timer = setTimeout(() => resolve('held'), 3000)))]);
  clearTimeout(timer);
  expect(wrote).toBe('OK');
  expect(Date.now() - wroteAt).toBeLessThan(1000);

  started[1].proxy.kill('SIGCONT');
  await covered(admins);
  expect(await admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'done')).toBe('OK');
}, 60_000);

// A job queue's add-job script: the job hash is a key built from ARGV, which no proxy can name.
const ADD_JOB = `local id = redis.call('INCR', KEYS[1])
redis.call('HSET', ARGV[1] .. id, 'data', ARGV[2])
return id`;

test.each([
  ['feeds', 'double-write'],
  ['replication', 'read-new'],
] as const)('on %s, in %s: a FLUSHALL of the coordination node while a script waits on the copier\'s mark: the script asks again and is answered once its job is on B', async (carry, inPhase) => {
  await startFleet(carry);
  const admins = started.map((p) => open(`127.0.0.1:${p.port}`));
  expect(await carryOf(admins[0])).toBe(carry);
  const line = await fleetReady(admins);
  if (inPhase === 'read-new') for (const c of admins) expect(await c.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  // Node b of A, which the flush does not touch: its copier (the holder) and the other proxy (the waiter).
  const b = grow.nodes().addresses[1];
  const holderId = line.find((e) => e.startsWith(`${b}=`))?.slice(b.length + 1) ?? '';
  const holder = started.findIndex((p) => holderId.includes(`-${p.proxy.pid}-`));
  expect(holder).toBeGreaterThanOrEqual(0);
  const waiter = admins[1 - holder];
  let tag = '';
  for (let i = 0; tag === ''; i++) {
    const key = Buffer.from(`{job${i}}`);
    if (placement().copyTarget(key) !== null && ownerOfKey(placement().from, key) === b) tag = `job${i}`;
  }
  const target = placement().copyTarget(Buffer.from(`{${tag}}`));
  const onB = open(target?.to ?? '');
  const coord = open(coordination());

  // Each reply waits on a mark the holder serves: the counter climbs well past what a second of
  // new marks reaches after the flush.
  for (let n = 0; n < 60; n++) await waiter.eval(ADD_JOB, 1, `{${tag}}:id`, `{${tag}}:job:`, `p${n}`);
  const before = Number(await coord.hget(COPIERS_KEY, `mark:${b}`));
  expect(before).toBeGreaterThanOrEqual(60);

  started[holder].proxy.kill('SIGSTOP');
  const reply = waiter.eval(ADD_JOB, 1, `{${tag}}:id`, `{${tag}}:job:`, 'last').then((id) => String(id), (e: Error) => `error: ${e.message}`);
  await eventually(() => coord.hget(COPIERS_KEY, `mark:${b}`), (m) => Number(m) > before);
  const flushedAt = Date.now();
  await coord.flushall();
  started[holder].proxy.kill('SIGCONT');
  const id = await reply;
  console.log(`the script answered ${Date.now() - flushedAt} ms after the FLUSHALL: ${id}`);
  expect(id).toMatch(/^\d+$/);
  // Well within the barrier's 5 s: it did not wait for the erased mark.
  expect(Date.now() - flushedAt).toBeLessThan(3000);
  expect(await onB.hget(`{${tag}}:job:${id}`, 'data')).toBe('last');
}, 60_000);
