// The replication carry's full sync at scale (real slotproxy processes, a ring grown 2 -> 3 over real
// redis-servers): 1,000,000 keys on one node of A and 100,000 on the other (DEBUG POPULATE), ~2 MB/s of SETs straight on
// each node of A all along, B's new node deliberately slow (CLIENT PAUSE 800 WRITE every second
// while the snapshots restore), and A's client-output-buffer-limit for replicas set to one a real
// replica of those nodes survives under the same load. First a plain redis-server replica of each
// node of A syncs under that limit and load (one full sync, its link never cut, its peak omem on A
// measured); then the migration's follower syncs under them: one full sync per node of A, no link
// lost, no resume, its peak omem on A within the limit, and every moving key on B's new node equal
// to A's (DEBUG DIGEST-VALUE of each, and B's new node holding no other key).
//
// Both nodes of A are populated with the same key names (k:0 .. k:999999 on the first, k:0 ..
// k:99999 on the second): each holds its own share of them and a copy of the other's that the ring
// never routes to it, which the follower reads past (follow-router.ts); the first node's snapshot is
// the whole 1,000,000 keys all the same.
import fs from 'node:fs';
import Redis from 'ioredis';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { startProxyProcess } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { useProxyProcesses } from '../helpers/proxy-processes';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { startOnFreePort } from '../../cmd/sandbox/node-group';
import { freePort } from '../../cmd/sandbox/ports';

const grow = useRingGrow(['--enable-debug-command', 'yes']);
const procs = useProxyProcesses('slotproxy-follow-million-');
const open = procs.open;

/** Keys on the first node of A, and on the second (a full sync of a million keys, and a second beside it). */
const KEYS = 1_000_000;
const SECOND_KEYS = 100_000;
/**
 * A's client-output-buffer-limit for replicas (hard, no soft limit), which the real replica is shown
 * to survive first: its peak omem was 7-8 MB on a quiet machine and up to 14.5 MB on a busy one (an
 * 8 MB limit cut it beside a CI run), so 32 MB leaves it a margin.
 */
const LIMIT = 32 * 1024 * 1024;
/** The load on each node of A: SETs of a ~200-byte value (~240 bytes of stream each) at this rate, ~2 MB/s of stream. */
const SETS_PER_SECOND = 8500;
const VALUE_PAD = 'x'.repeat(190);
/** How often the load sends what it owes, in one pipeline of at most MAX_BATCH SETs. */
const TICK_MS = 50;
const MAX_BATCH = 2000;
/** B's new node takes no write for this long of every second while the snapshots restore. */
const PAUSE_MS = 800;

function stat(info: string, field: string): number {
  return Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? NaN);
}

/** `addr=value` per followed node of one INFO field. */
function perNode(info: string, field: string): Map<string, number> {
  const line = new RegExp(`${field}:(\\S+)`).exec(info)?.[1] ?? '';
  return new Map(line.split(',').filter((p) => p !== '').map((p) => [p.slice(0, p.lastIndexOf('=')), Number(p.slice(p.lastIndexOf('=') + 1))]));
}

async function proxyInfo(port: number): Promise<string> {
  return String(await open(`127.0.0.1:${port}`).info('proxy'));
}

/** master_repl_offset of each node of A: the bytes of stream it has written. */
async function offsetsOf(nodes: readonly string[]): Promise<number[]> {
  return Promise.all(nodes.map(async (a) => stat(String(await open(a).info('replication')), 'master_repl_offset')));
}

/** sync_full and sync_partial_ok of each node of A. */
async function syncsOn(nodes: readonly string[]): Promise<{ full: number; partial: number }[]> {
  return Promise.all(nodes.map(async (a) => {
    const info = String(await open(a).info('stats'));
    return { full: stat(info, 'sync_full'), partial: stat(info, 'sync_partial_ok') };
  }));
}

/**
 * Pipelined SETs straight on one node of A, over `keys` in turn, paced to ~2 MB/s of stream, until
 * stop(). Each value is new (`tag`, the write's number): a write B missed leaves it differing.
 */
class Load {
  writes = 0;
  private stopping = false;
  private error: unknown = null;
  private readonly running: Promise<void>;
  private readonly client: Redis;

  constructor(addr: string, private readonly keys: string[], private readonly tag: string) {
    const [host, port] = addr.split(':');
    // Its own connection: the pollers' commands on the node's shared client would wait behind its pipelines.
    this.client = procs.track(new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true }));
    this.running = this.run().catch((err: unknown) => {
      this.error = err;
    });
  }

  private async run(): Promise<void> {
    const start = Date.now();
    while (!this.stopping) {
      const tick = Date.now() + TICK_MS;
      // What the rate owes since the start: a pipeline answered late is made up by the next one.
      const owed = Math.min(MAX_BATCH, Math.floor(((Date.now() - start) * SETS_PER_SECOND) / 1000) - this.writes);
      const p = this.client.pipeline();
      for (let i = 0; i < owed; i++) {
        const n = this.writes++;
        p.set(this.keys[n % this.keys.length], `${this.tag}:${n}:${VALUE_PAD}`);
      }
      if (owed > 0) for (const [err] of (await p.exec()) ?? []) if (err !== null) throw err;
      // Pacing a rate, not waiting for an event.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, tick - Date.now())));
    }
  }

  /** Ends the load once its pipeline in flight is answered (never throws: see check()). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  /** The writes made; throws what a write failed with. */
  check(): number {
    if (this.error !== null) throw this.error;
    return this.writes;
  }
}

/** Polls `CLIENT LIST TYPE replica` of each node every 20 ms: each node's peak omem and the ids of its replica links. */
class ReplicaLinks {
  readonly peak = new Map<string, number>();
  readonly ids = new Map<string, Set<string>>();
  private stopping = false;
  private error: unknown = null;
  private readonly running: Promise<void>;

  constructor(private readonly nodes: readonly string[], private readonly also: () => Promise<void> = async () => undefined) {
    for (const a of nodes) {
      this.peak.set(a, 0);
      this.ids.set(a, new Set());
    }
    this.running = this.run().catch((err: unknown) => {
      this.error = err;
    });
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      await Promise.all([
        ...this.nodes.map(async (a) => {
          for (const line of String(await open(a).call('CLIENT', 'LIST', 'TYPE', 'replica')).split('\n')) {
            const id = / ?id=(\d+)/.exec(line)?.[1];
            const omem = Number(/ omem=(\d+)/.exec(line)?.[1] ?? NaN);
            if (id === undefined || Number.isNaN(omem)) continue;
            (this.ids.get(a) as Set<string>).add(id);
            this.peak.set(a, Math.max(this.peak.get(a) ?? 0, omem));
          }
        }),
        this.also(),
      ]);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Ends the polling (never throws: see check()). */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  /** Throws what a poll failed with. */
  check(): void {
    if (this.error !== null) throw this.error;
  }
}

/** Once both nodes are followed live and every write made on A is on B. */
/**
 * Until both follows are live and have applied on B everything each node of A holds now (the writes
 * have stopped). Not WAIT on A: it counts from its client's last write, and the real replica beside
 * the follower acknowledges first.
 */
async function caughtUp(port: number, nodes: readonly string[]): Promise<string> {
  await eventually(() => proxyInfo(port), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 120_000);
  const offsets = await Promise.all(nodes.map(async (a) => Number(((await open(a).call('ROLE')) as unknown[])[1])));
  return eventually(() => proxyInfo(port), (t) => nodes.every((a, i) => (perNode(t, 'migration_follow_applied').get(a) ?? -1) >= offsets[i]), 120_000);
}

const mb = (n: number): string => (n / 1024 / 1024).toFixed(1);

test('a full sync of 1,000,000 keys (and one of 100,000 beside it) into a slow side B under a write load: the follower needs no more of A\'s replica output buffer than a real replica (no link dropped, no second full sync), and B ends exact', async () => {
  const t0 = Date.now();
  const cfg = grow.config();
  const placement = Placement.fromConfig(cfg.ring, cfg.migration);
  const from = placement.from.masters();
  const slow = (placement.to?.masters() ?? []).find((b) => !from.includes(b)) as string;
  expect(from).toHaveLength(2);

  await Promise.all(grow.nodes().nodes.map((n) => n.command('FLUSHALL')));
  const held = new Map([[from[0], KEYS], [from[1], SECOND_KEYS]]);
  await Promise.all(from.map((a) => open(a).call('DEBUG', 'POPULATE', String(held.get(a)), 'k', '16')));
  for (const a of from) {
    expect(await open(a).dbsize()).toBe(held.get(a));
    await open(a).call('CONFIG', 'RESETSTAT');
    await open(a).call('CONFIG', 'SET', 'client-output-buffer-limit', `replica ${LIMIT} 0 0`);
  }

  // Each node's own keys (the load writes them) and those of them that move (to B's new node).
  const owned = new Map(from.map((a) => [a, [] as string[]]));
  const moving = new Map(from.map((a) => [a, [] as string[]]));
  let elsewhere = 0;
  for (let i = 0; i < KEYS; i++) {
    const key = `k:${i}`;
    const buf = Buffer.from(key);
    const owner = ownerOfKey(placement.from, buf) as string;
    if (i >= (held.get(owner) ?? 0)) continue; // not populated on its node
    owned.get(owner)?.push(key);
    const t = placement.copyTarget(buf);
    if (t === null) continue;
    if (t.to !== slow) elsewhere++;
    moving.get(t.from)?.push(key);
  }
  expect(elsewhere).toBe(0);
  const movingKeys = [...moving.values()].reduce((n, keys) => n + keys.length, 0);
  expect(movingKeys).toBeGreaterThan(KEYS / 6);
  const setupMs = Date.now() - t0;

  // 1. What a real replica survives: a plain redis-server replica of each node of A, synced under the limit and the load.
  const replicas: RedisNode[] = [];
  const replicaClients: Redis[] = [];
  const replicaOffsets = await offsetsOf(from);
  const replicaStart = Date.now();
  const replicaLoads = from.map((a) => new Load(a, owned.get(a) as string[], 'replica'));
  const replicaLinks = new ReplicaLinks(from);
  let replicaMs = 0;
  try {
    for (let i = 0; i < from.length; i++) {
      const r = await startOnFreePort(freePort, (port) => ({ port }));
      replicas.push(r);
      replicaClients.push(new Redis({ host: r.host, port: r.port, maxRetriesPerRequest: 0, disableClientInfo: true }));
    }
    await Promise.all(replicaClients.map((r, i) => r.call('REPLICAOF', ...from[i].split(':'))));
    await eventually(
      () => Promise.all(replicaClients.map(async (r) => String(await r.info('replication')))),
      (infos) => infos.every((t) => /master_link_status:up\r\n/.test(t) && /master_sync_in_progress:0\r\n/.test(t)),
      60_000,
    );
    // Caught up under the load: each replica acknowledges all its node wrote so far.
    for (const a of from) expect(Number(await open(a).call('WAIT', '1', '30000'))).toBe(1);
  } finally {
    await replicaLinks.stop();
    await Promise.all(replicaLoads.map((l) => l.stop()));
    replicaMs = Date.now() - replicaStart;
    for (const c of replicaClients) c.disconnect();
    await Promise.all(replicas.map((r) => r.destroy()));
  }
  replicaLinks.check();
  for (const l of replicaLoads) expect(l.check()).toBeGreaterThan(0);
  const replicaStream = (await offsetsOf(from)).map((o, i) => o - replicaOffsets[i]);
  expect(await syncsOn(from)).toEqual([{ full: 1, partial: 0 }, { full: 1, partial: 0 }]);
  for (const a of from) expect(replicaLinks.ids.get(a)?.size).toBe(1);
  for (const a of from) expect(replicaLinks.peak.get(a)).toBeLessThan(LIMIT);

  // 2. The follower, under the same limit and load, into B's new node paused PAUSE_MS of every second while the snapshots restore.
  const spoolDir = fs.mkdtempSync(`${procs.dir()}/spool-`);
  const to = (cfg.migration?.to as { nodes: unknown[] }).nodes;
  // B's pause is no command timeout: each batch waits for B, as it would for a slow B.
  const config = { mode: 'ring', ring: { hash: 'md5', nodes: cfg.ring.nodes }, backend: { commandTimeoutMs: 120_000 }, migration: { phase: 'double-write', carry: 'replication', spool: { dir: spoolDir, maxBytes: 512 * 1024 * 1024 }, to: { nodes: to } } };
  const followOffsets = await offsetsOf(from);
  const followStart = Date.now();
  const loads = from.map((a) => new Load(a, owned.get(a) as string[], 'follow'));
  let loadMs = 0;
  let port = 0;
  let spoolPeak = 0;
  const followerLinks = new ReplicaLinks(from, async () => {
    if (port === 0) return;
    const spooled = [...perNode(await proxyInfo(port), 'migration_follow_spool_bytes').values()];
    spoolPeak = Math.max(spoolPeak, ...spooled);
  });
  let pausing = true;
  const pauses = (async () => {
    while (pausing) {
      const tick = Date.now() + 1000;
      await open(slow).call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE');
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, tick - Date.now())));
    }
  })();
  let restoredMs = 0;
  let caughtUpMs = 0;
  let info = '';
  let log = '';
  try {
    const started = await startProxyProcess(config, procs.dir());
    port = started.port;
    await started.proxy.waitForLog(/snapshot of a node of side A restored on side B/, 150_000, 2);
    restoredMs = Date.now() - followStart;
    pausing = false;
    await pauses;
    await open(slow).call('CLIENT', 'UNPAUSE');
    await Promise.all(loads.map((l) => l.stop()));
    loadMs = Date.now() - followStart;
    for (const l of loads) expect(l.check()).toBeGreaterThan(0);
    info = await caughtUp(port, from);
    caughtUpMs = Date.now() - followStart;
    log = started.proxy.log;
  } finally {
    pausing = false;
    await pauses.catch(() => undefined);
    await followerLinks.stop();
    await Promise.all(loads.map((l) => l.stop()));
    await open(slow).call('CLIENT', 'UNPAUSE');
  }
  followerLinks.check();
  const followStream = (await offsetsOf(from)).map((o, i) => o - followOffsets[i]);
  // No link dropped: one full sync per node of A (the follower's), no resume, one link each all along.
  expect(await syncsOn(from)).toEqual([{ full: 2, partial: 0 }, { full: 2, partial: 0 }]);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(info).toMatch(/migration_follow_resumes:0\r\n/);
  expect(log).not.toMatch(/replication link to a node of side A lost|the follow of a node of side A stopped|side B refused a command/);
  for (const a of from) expect(followerLinks.ids.get(a)?.size).toBe(1);
  for (const a of from) expect(followerLinks.peak.get(a)).toBeLessThan(LIMIT);
  expect(stat(info, 'migration_follow_snapshot_restored')).toBe(movingKeys);
  // B was slower than A's writes: the stream waited in the spool meanwhile, and is all applied now.
  expect(spoolPeak).toBeGreaterThan(0);
  expect([...perNode(info, 'migration_follow_spool_bytes').values()]).toEqual([0, 0]);

  // Every moving key on B's new node is A's, and it holds nothing else but the follow's records.
  const verifyStart = Date.now();
  const b = open(slow);
  const differing: string[] = [];
  await Promise.all([...moving].map(async ([a, keys]) => {
    for (let i = 0; i < keys.length; i += 5000) {
      const batch = keys.slice(i, i + 5000);
      const [onA, onB] = (await Promise.all([open(a).call('DEBUG', 'DIGEST-VALUE', ...batch), b.call('DEBUG', 'DIGEST-VALUE', ...batch)])) as string[][];
      batch.forEach((k, j) => {
        if (onA[j] !== onB[j] && differing.length < 20) differing.push(`${k} (from ${a})`);
      });
    }
  }));
  expect(differing).toEqual([]);
  const records = (await b.keys('__slotproxy:*')).length;
  expect((await b.dbsize()) - records).toBe(movingKeys);

  const verifyMs = Date.now() - verifyStart;
  const perSecond = (bytes: number[], ms: number): string => bytes.map((n) => mb(n / (ms / 1000))).join('/');
  console.log(
    `million: ${from.map((a) => held.get(a)).join('/')} keys on the nodes of A, ${movingKeys} moving to B's new node (${[...moving.values()].map((keys) => keys.length).join('/')} per node); A's replica limit ${mb(LIMIT)} MB; ` +
      `real replica: synced and caught up in ${(replicaMs / 1000).toFixed(1)} s under ${perSecond(replicaStream, replicaMs)} MB/s of stream per node, ` +
      `peak omem ${from.map((a) => mb(replicaLinks.peak.get(a) ?? 0)).join('/')} MB; ` +
      `follower: snapshots restored in ${(restoredMs / 1000).toFixed(1)} s (${[...perNode(info, 'migration_follow_snapshot_ms').values()].map((ms) => (ms / 1000).toFixed(1)).join('/')} s per node from its sync's start, B paused ${PAUSE_MS} ms of every second), caught up in ${(caughtUpMs / 1000).toFixed(1)} s, ` +
      `under ${perSecond(followStream, loadMs)} MB/s of stream per node for ${(loadMs / 1000).toFixed(1)} s, ` +
      `peak omem ${from.map((a) => mb(followerLinks.peak.get(a) ?? 0)).join('/')} MB, peak spool ${mb(spoolPeak)} MB; data ${(setupMs / 1000).toFixed(1)} s, check ${(verifyMs / 1000).toFixed(1)} s, total ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
}, 240_000);
