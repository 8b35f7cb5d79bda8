// `migrate verify` under live writes: a ring of 2 grows to a ring of 3 (and, second test, moves into
// a Redis Cluster) with a proxy in double-write and the copy done, while clients keep running INCR,
// SET, LPUSH, HINCRBY and EXPIRE on a few hundred keys through it, and others INCR keys straight on
// A's nodes (the proxy's change feed copies those). Verify, run again and again, must
// find no difference (keys caught mid-copy are rechecked and agree); with its rechecks turned off
// the same load shows differences, so the rechecks are what makes it right; and a key changed
// straight on its B node, behind the migration's back, is still reported.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { ownerOfKey } from '../../sharding/key-space';
import { Placement } from '../../sharding/migration';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { readState } from '../../proxy/migration/tools/key-state';
import { RING_BOOKKEEPING, snapshotCommand } from '../../proxy/migration/converge';
import { VerifyResult, verifyMoved } from '../../proxy/migration/tools/verify';
import { setLogLevel } from '../../proxy/telemetry/log';
import { xorshift32 } from '../helpers/random';
import { waitFor } from '../helpers/master-keys';
import { carryOf } from '../helpers/carried';

const KEYS_PER_KIND = 60;
const KINDS = ['n', 's', 'l', 'h'] as const;
/** Connections to the proxy, and commands each keeps in flight. */
const CLIENTS = 8;
const IN_FLIGHT = 8;
/** Verify runs of each kind, and at most this many while waiting for the load to catch one key mid-copy. */
const RUNS = 5;
const MAX_RUNS = 40;
/** Keys INCRed straight on their A node, and loops doing it. */
const DIRECT_KEYS = 40;
const DIRECT_LOOPS = 4;
/** Keys nobody writes after the copy: one of them is changed straight on its B node. */
const QUIET = 20;

let ring: StandaloneNodes | undefined;
let cluster: RedisCluster | undefined;

beforeAll(async () => {
  setLogLevel('silent');
  [ring, cluster] = await Promise.all([StandaloneNodes.start(3), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);

afterAll(async () => {
  await Promise.all([ring?.stop(), cluster?.stop()]);
}, 30_000);

function connect(addr: string): Redis {
  const [host, port] = addr.split(':');
  return new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true });
}

/**
 * INCR, SET, LPUSH, HINCRBY and EXPIRE on KEYS_PER_KIND keys of each kind through the proxy, and
 * INCR on DIRECT_KEYS keys straight on their node of side A, as fast as the clients go.
 */
class WriteLoad {
  private running = false;
  private loops: Promise<void>[] = [];
  ops = 0;
  readonly errors: string[] = [];

  constructor(private readonly clients: Redis[], private readonly onA: (key: string) => Redis) {}

  /** `straightToA` false: through the proxy only (after `done`, a write straight to A is one B never gets). */
  start(straightToA = true): void {
    this.running = true;
    this.loops = [
      ...this.clients.flatMap((c, i) => Array.from({ length: IN_FLIGHT }, (_, j) => this.loop(c, xorshift32(i * 100 + j + 1)))),
      ...Array.from({ length: straightToA ? DIRECT_LOOPS : 0 }, (_, j) => this.direct(xorshift32(7919 + j))),
    ];
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async loop(c: Redis, rnd: () => number): Promise<void> {
    while (this.running) {
      const i = Math.floor(rnd() * KEYS_PER_KIND);
      const r = rnd();
      try {
        if (r < 0.25) await c.incr(`n:${i}`);
        else if (r < 0.45) await c.set(`s:${i}`, `v${this.ops}`);
        else if (r < 0.65) await c.lpush(`l:${i}`, `e${this.ops}`);
        else if (r < 0.85) await c.hincrby(`h:${i}`, `f${Math.floor(rnd() * 4)}`, 1);
        else await c.expire(`${KINDS[Math.floor(rnd() * KINDS.length)]}:${i}`, 1000 + Math.floor(rnd() * 1000));
        this.ops++;
      } catch (err) {
        if (this.errors.length < 10) this.errors.push(err instanceof Error ? err.message : String(err));
      }
    }
  }

  private async direct(rnd: () => number): Promise<void> {
    while (this.running) {
      const k = `d:${Math.floor(rnd() * DIRECT_KEYS)}`;
      try {
        await this.onA(k).incr(k);
        this.ops++;
      } catch (err) {
        if (this.errors.length < 10) this.errors.push(`straight to A: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
}

/** A client of each node of side A, the one of a key on demand. */
function sideA(placement: Placement): { on: (key: string) => Redis; close: () => void } {
  const byNode = new Map<string, Redis>();
  return {
    on: (key) => {
      const addr = ownerOfKey(placement.from, Buffer.from(key)) as string;
      let c = byNode.get(addr);
      if (c === undefined) byNode.set(addr, (c = connect(addr)));
      return c;
    },
    close: () => {
      for (const c of byNode.values()) c.disconnect();
    },
  };
}

/** Every key of the load, and the quiet ones, written on side A before the migration. */
async function seedA(placement: Placement): Promise<void> {
  const { on, close } = sideA(placement);
  try {
    for (let i = 0; i < DIRECT_KEYS; i++) await on(`d:${i}`).set(`d:${i}`, '0');
    for (let i = 0; i < KEYS_PER_KIND; i++) {
      await on(`n:${i}`).set(`n:${i}`, String(i));
      await on(`s:${i}`).set(`s:${i}`, 'seed', 'EX', 5000);
      await on(`l:${i}`).rpush(`l:${i}`, 'seed');
      await on(`h:${i}`).hset(`h:${i}`, 'f0', '1');
    }
    for (let i = 0; i < QUIET; i++) await on(`quiet:${i}`).set(`quiet:${i}`, 'as copied');
  } finally {
    close();
  }
}

/** Both sides flushed, A seeded, a proxy over them and a write load through it, not started yet. */
async function migrationUnderLoad(raw: Record<string, unknown>) {
  const config = parseConfig(raw);
  const direct = new NodeClient(config);
  await direct.start();
  const placement = direct.placement();
  await Promise.all(placement.allAddresses().map((addr) => direct.call(addr, ['FLUSHALL'])));
  await seedA(placement);
  const proxy = await ProxyServer.start(config);
  const clients = Array.from({ length: CLIENTS }, () => connect(`127.0.0.1:${proxy.address.port}`));
  const onA = sideA(placement);
  const load = new WriteLoad(clients, onA.on);
  const close = async (): Promise<void> => {
    await load.stop();
    for (const c of clients) c.disconnect();
    await proxy.close(500);
    onA.close();
    direct.close();
  };
  return { direct, placement, proxy, onA, load, close, carry: await carryOf(clients[0]) };
}

async function verifyUnderLoad(raw: Record<string, unknown>, label: string): Promise<void> {
  const { direct, placement, load, close, carry } = await migrationUnderLoad(raw);
  const verify = (recheck?: number): Promise<VerifyResult> =>
    verifyMoved(direct, placement.withPhase('read-new'), { ttlToleranceMs: 2000, batch: 100, show: 5, progress: false, recheck });
  try {
    const copied = await copyHistory(direct, placement, { rate: 0, batch: 100, restart: true, progress: false });
    expect(copied.copied).toBeGreaterThan(0);
    load.start();
    await new Promise((r) => setTimeout(r, 300));

    // With rechecks: nothing differs, every time, though keys were caught mid-copy (at least 5
    // runs, and more until one has caught a key mid-copy: whether one does is up to timing).
    const withRechecks: VerifyResult[] = [];
    while (withRechecks.length < RUNS || (!withRechecks.some((r) => r.rechecked > 0) && withRechecks.length < MAX_RUNS)) {
      const r = await verify();
      withRechecks.push(r);
      expect(r.examples).toEqual([]);
      expect(r.differing).toBe(0);
    }
    expect(withRechecks.some((r) => r.rechecked > 0)).toBe(true);

    // Without them, the same load shows keys that merely changed between the reads of A and B.
    const without: VerifyResult[] = [];
    while (without.length < RUNS || (without.every((r) => r.differing === 0) && without.length < MAX_RUNS)) without.push(await verify(0));
    expect(without.reduce((n, r) => n + r.differing, 0)).toBeGreaterThan(0);
    expect(without.every((r) => r.rechecked === 0)).toBe(true);

    // A moving key nobody writes, changed straight on its B node: a lasting difference, found under the load.
    const quiet = Array.from({ length: QUIET }, (_, i) => `quiet:${i}`).find((k) => placement.copyTarget(Buffer.from(k)) !== null);
    if (quiet === undefined) throw new Error('no quiet key moves');
    const bNode = connect(ownerOfKey(placement.to!, Buffer.from(quiet)) as string);
    try {
      await bNode.set(quiet, 'changed behind the migration');
    } finally {
      bNode.disconnect();
    }
    const altered = await verify();
    expect(altered.differing).toBe(1);
    // The feeds tell it by versions; the replication carry by B's record past A's offset, A unchanged between.
    const lasting = carry === 'replication' ? "\\(B holds A's stream through offset \\d+, past offset \\d+, and A's key did not change between\\)" : '\\(A at version (\\d+), B at \\1\\)';
    expect(altered.examples).toEqual([expect.stringMatching(new RegExp(`^${quiet}: string values differ ${lasting}$`))]);

    await load.stop();
    expect(load.errors).toEqual([]);
    const stat = (rs: VerifyResult[]): string => rs.map((r) => `${r.differing}/${r.rechecked}/${r.inFlight}`).join(' ');
    console.log(
      `${label}: ${load.ops} writes during ${withRechecks.length + without.length + 1} verifies of ${withRechecks[0].compared} moved keys; ` +
        `differ/rechecked/in flight with rechecks: ${stat(withRechecks)}; without: ${stat(without)}; altered key: ${altered.examples[0]}`,
    );
  } finally {
    await close();
  }
}

/**
 * After `done` under load: the proxy walks double-write -> read-new -> done with clients writing
 * throughout, and keeps being written (to B alone). Verify then says side A is closed and checks
 * on B instead of comparing (which would count every key written since as a difference); a write
 * made straight on A after the close is still reported.
 */
async function verifyAfterDone(raw: Record<string, unknown>, label: string, fenceUnits: { of: number; unit: 'nodes' | 'slots' }): Promise<void> {
  const { direct, placement, proxy, onA, load, close, carry } = await migrationUnderLoad(raw);
  const admin = connect(`127.0.0.1:${proxy.address.port}`);
  // The config file still says double-write: verify learns that A is closed from B's fence.
  const verify = (): Promise<VerifyResult> => verifyMoved(direct, placement, { ttlToleranceMs: 2000, batch: 100, show: 5, progress: false });
  try {
    expect((await copyHistory(direct, placement, { rate: 0, batch: 100, restart: true, progress: false })).copied).toBeGreaterThan(0);
    load.start(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
    // done waits for the fleet's registrations (this proxy's own included) to show read-new.
    await waitFor('done to be accepted', () =>
      admin.call('PROXY', 'MIGRATION', 'PHASE', 'done').then(
        (ok) => ok === 'OK',
        (err: Error) => {
          if (/behind read-new/.test(err.message)) return false;
          throw err;
        },
      ),
    );
    const before = load.ops;
    const runs: VerifyResult[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await verify();
      runs.push(r);
      expect(r.closedSideA).toEqual({ fence: { fenced: fenceUnits.of, ...fenceUnits } });
      expect(r.examples).toEqual([]);
      expect(r.differing).toBe(0);
      expect(r.compared).toBeGreaterThan(50);
    }
    // Written (to B) while verify ran.
    expect(load.ops - before).toBeGreaterThan(200);
    await load.stop();
    expect(load.errors).toEqual([]);

    // A moving key written straight on its A node after the close: B never gets it.
    const moving = Array.from({ length: KEYS_PER_KIND }, (_, i) => `n:${i}`).find((k) => placement.copyTarget(Buffer.from(k)) !== null);
    if (moving === undefined) throw new Error('no n: key moves');
    await onA.on(moving).incr(moving);
    const late = await verify();
    expect(late.differing).toBe(1);
    // The feeds tell it by A's fingerprint; the replication carry by A's stream read back after B's last record.
    const after = carry === 'replication' ? "after the offset of its stream side B applied there" : 'after its last snapshot \\(version \\d+\\)';
    expect(late.examples).toEqual([expect.stringMatching(new RegExp(`^${moving}: changed in \\S+ ${after}: a write B never got$`))]);
    console.log(`${label}, after done: ${RUNS} verifies of ${runs[0].compared} moved keys of A under ${load.ops - before} writes to B, 0 differ; a late write on A: ${late.examples[0]}`);
  } finally {
    admin.disconnect();
    await close();
  }
}

/** A proxy over the ring's first two nodes, migrating to all three (a grow). */
function ringGrow(): Record<string, unknown> {
  const addrs = ring!.addresses;
  return migrating(addrs.slice(0, 2), { nodes: ringOf(addrs) });
}

/** A proxy over the ring's first two nodes, migrating into the cluster. */
function ringToCluster(): Record<string, unknown> {
  return migrating(ring!.addresses.slice(0, 2), { cluster: { seeds: [cluster!.masters[0].address] } });
}

function migrating(from: string[], to: Record<string, unknown>): Record<string, unknown> {
  return { listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', nodes: ringOf(from) }, migration: { phase: 'double-write', to }, log: { level: 'silent' } };
}

function ringOf(addrs: string[]): { name: string; addr: string; weight: number }[] {
  return addrs.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
}

test('ring of 2 -> ring of 3, after done under load: verify says side A is closed and checks B', async () => {
  await verifyAfterDone(ringGrow(), 'ring 2 -> 3', { of: 3, unit: 'nodes' });
}, 120_000);

test('ring of 2 -> cluster of 3, after done under load: verify says side A is closed and checks B', async () => {
  await verifyAfterDone(ringToCluster(), 'ring 2 -> cluster of 3', { of: 16384, unit: 'slots' });
}, 120_000);

test('ring of 2 -> ring of 3: verify under live writes reports only lasting differences', async () => {
  await verifyUnderLoad(ringGrow(), 'ring 2 -> 3');
}, 120_000);

test('ring of 2 -> cluster of 3: verify under live writes reports only lasting differences', async () => {
  await verifyUnderLoad(ringToCluster(), 'ring 2 -> cluster of 3');
}, 120_000);

test("verify tells a key of A still in its last snapshot's state from one changed since, as the snapshot script fingerprints it", async () => {
  const addr = ring!.addresses[0];
  const config = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: ringOf([addr]) },
    migration: { phase: 'double-write', to: { nodes: ringOf(ring!.addresses.slice(1, 2)) } },
    log: { level: 'silent' },
  });
  const nodes = new NodeClient(config);
  const key = Buffer.from('fingerprinted');
  const side = { addr, owners: null, book: RING_BOOKKEEPING, source: true };
  const changed = async (): Promise<boolean> => (await readState(nodes, side, key, false)).changedSinceSnapshot;
  const snapshot = (): Promise<Buffer> => nodes.raw(addr, snapshotCommand(key, false, RING_BOOKKEEPING));
  try {
    await nodes.call(addr, ['FLUSHALL']);
    await nodes.call(addr, ['SET', key, 'v1', 'EX', '1000']);
    expect(await changed()).toBe(true); // never snapshotted
    await snapshot();
    expect(await changed()).toBe(false);
    await nodes.call(addr, ['EXPIRE', key, '2000']);
    expect(await changed()).toBe(true);
    await snapshot();
    await nodes.call(addr, ['SET', key, 'v2', 'KEEPTTL']);
    expect(await changed()).toBe(true);
    await snapshot();
    expect(await changed()).toBe(false);
    await nodes.call(addr, ['DEL', key]);
    expect(await changed()).toBe(true);
    await snapshot();
    expect(await changed()).toBe(false);
  } finally {
    nodes.close();
  }
});
