// Client-side caching under load, never stale: 8 caching readers (RESP3, CLIENT TRACKING, a local
// cache each) over 1,000 keys and 4 writers over half of them for 20 s, through a manual failover and a slot moved
// between masters (cluster mode), or a node restarted without its data (ring mode). When the
// writes stop and every invalidation has come through, each value a reader holds must equal what
// the proxy reads now: 0 stale keys. The counts are printed.

import Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { useProxy, useRingProxy } from '../helpers/proxy';
import { CachingReader } from '../helpers/caching-reader';
import { keyPerMaster } from '../helpers/master-keys';
import { manualFailover } from '../helpers/cluster';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { Ring } from '../../sharding/ring';

const DURATION_MS = 20_000;
const KEYS = 1000;
const READERS = 8;
const WRITERS = 4;
const key = (i: number): string => `stress:${i}`;

interface Disruption {
  /** Ms after the start. */
  at: number;
  what: string;
  run(): Promise<void>;
}

interface Outcome {
  reads: number;
  hits: number;
  writes: number;
  errors: number;
  invalidations: number;
  flushes: number;
  cached: number;
  stale: string[];
}

/** Keeps `work` running until `stop` says so; resolves with how many rounds completed. */
async function loop(stop: () => boolean, work: () => Promise<void>): Promise<number> {
  let n = 0;
  while (!stop()) {
    await work();
    n++;
  }
  return n;
}

async function stress(port: number, connect: () => Redis, sentinels: () => Promise<string[]>, disruptions: Disruption[]): Promise<Outcome> {
  const readers = await Promise.all(Array.from({ length: READERS }, () => CachingReader.open(port)));
  try {
    const writers = Array.from({ length: WRITERS }, () => connect());
    // Every key has a value; the writers then change only the first half, so a value of the other
    // half lost with a node stays wrong in a cache unless the proxy flushes it.
    for (let i = 0; i < KEYS; i++) await writers[0].set(key(i), 'seed');
    let stopped = false;
    let writeErrors = 0;
    const started = performance.now();
    const reading = readers.map((r) => loop(() => stopped, async () => void (await r.get(key(Math.floor(Math.random() * KEYS))))));
    const writing = writers.map((w, wi) => {
      let n = 0;
      return loop(() => stopped, async () => {
        await w.set(key(Math.floor((Math.random() * KEYS) / 2)), `w${wi}-${n++}`).catch(() => writeErrors++);
      });
    });
    for (const d of disruptions) {
      const wait = d.at - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait)); // the schedule itself: disruptions at fixed times of the run
      await d.run();
    }
    const left = DURATION_MS - (performance.now() - started);
    if (left > 0) await new Promise((r) => setTimeout(r, left)); // the load runs for its set duration
    stopped = true;
    const reads = (await Promise.all(reading)).reduce((a, b) => a + b, 0);
    const writes = (await Promise.all(writing)).reduce((a, b) => a + b, 0);

    // Drain: a write to one key per node after the last write; once every reader has its
    // invalidation, everything each node sent before it has come through too (one feed per node).
    const marks = await sentinels();
    for (const r of readers) for (const m of marks) while (!r.cache.has(m)) await r.get(m);
    const drained = readers.map((r) => {
      const waiting = new Set(marks);
      return new Promise<void>((resolve) => {
        r.onInvalidate((k) => {
          if (k === null) waiting.clear();
          else waiting.delete(k);
          if (waiting.size === 0) resolve();
        });
      });
    });
    for (const m of marks) await writers[0].set(m, 'drain');
    await Promise.all(drained);

    const truth = connect();
    const stale: string[] = [];
    let cached = 0;
    for (const r of readers) {
      for (const [k, v] of r.cache) {
        cached++;
        const now = await truth.get(k);
        if (now !== v) stale.push(`${k}: cached ${v}, now ${now}`);
      }
    }
    return {
      reads,
      hits: readers.reduce((a, r) => a + r.hits, 0),
      writes,
      errors: writeErrors + readers.reduce((a, r) => a + r.errors, 0),
      invalidations: readers.reduce((a, r) => a + r.invalidations, 0),
      flushes: readers.reduce((a, r) => a + r.flushes, 0),
      cached,
      stale,
    };
  } finally {
    for (const r of readers) r.close();
  }
}

function report(mode: string, o: Outcome): void {
  const { stale, ...counts } = o;
  console.log(`client-side caching stress, ${mode}: ${JSON.stringify({ ...counts, stale: stale.length })}`);
}

/** Moves `slot` with its keys from its master to another (MIGRATE, then SETSLOT NODE on every master). */
async function moveSlot(cluster: RedisCluster, slot: number): Promise<void> {
  const from = await cluster.masterFor(slot);
  const to = cluster.masters.find((m) => m !== from) as typeof from;
  const [fromId, toId] = await Promise.all([from, to].map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
  await to.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await from.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  for (;;) {
    const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    if (keys.length === 0) break;
    await from.command('MIGRATE', to.host, to.port, '', 0, 5000, 'REPLACE', 'KEYS', ...keys);
  }
  for (const m of cluster.masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
}

describe('cluster mode: a failover and a slot migration under load', () => {
  const env = useProxy();
  test('0 stale keys', async () => {
    const cluster = env.cluster();
    const outcome = await stress(
      env.proxy().address.port,
      () => env.connect(),
      async () => (await keyPerMaster(cluster, 'drain')).map((k) => k.key),
      [
        { at: 6000, what: 'manual failover', run: () => manualFailover(cluster, calculateSlot(key(0))) },
        { at: 12_000, what: 'slot migration', run: () => moveSlot(cluster, calculateSlot(key(1))) },
      ],
    );
    report('cluster', outcome);
    expect(outcome.stale).toEqual([]);
    expect(outcome.hits).toBeGreaterThan(0);
    expect(outcome.invalidations).toBeGreaterThan(0);
  }, 90_000);
});

describe('ring mode: a node restarted without its data under load', () => {
  const env = useRingProxy(3);
  test('0 stale keys', async () => {
    const nodes = env.backend();
    const ring = new Ring({ hash: 'md5', hashTag: '', nodes: nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) });
    const perNode = (prefix: string): string[] =>
      nodes.nodes.map((_, idx) => {
        for (let i = 0; ; i++) if (ring.indexOf(Buffer.from(`${prefix}:${i}`)) === idx) return `${prefix}:${i}`;
      });
    const outcome = await stress(env.proxy().address.port, () => env.connect(), async () => perNode('drain'), [
      { at: 8000, what: 'node restart', run: () => nodes.nodes[1].restart() },
    ]);
    report('ring', outcome);
    expect(outcome.stale).toEqual([]);
    expect(outcome.hits).toBeGreaterThan(0);
    expect(outcome.flushes).toBeGreaterThan(0);
  }, 90_000);
});
