// A real job queue (BullMQ) through a live migration. BullMQ's scripts write keys they never
// declare: adding a job writes its hash `bull:<queue>:<id>` (the id comes from an INCR inside the
// script), taking one writes its lock `bull:<queue>:<id>:lock`. Two slotproxy processes serve
// producers and workers (both spread over the two proxies) through double-write, `migrate copy`,
// read-new, back to double-write, read-new and done, with a backlog (workers start only after the
// copy) and jobs added in every phase. After each of copy, read-new and the last read-new, every
// job hash on side A must equal its copy on side B (HGETALL on the nodes themselves); once the
// queues drain after done, every job added must have been completed exactly once, with exactly the
// data it was added with, and nothing may have failed. Two cases: a ring of 2 standalone nodes
// into a Redis Cluster of 3 masters, and a cluster of 3 into another cluster of 3.
import fs from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import Redis from 'ioredis';
import { Job, Queue, Worker } from 'bullmq';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { xorshift32 } from '../helpers/random';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { KeySpace, ownerOfKey } from '../../sharding/key-space';
import { setLogLevel } from '../../proxy/telemetry/log';

/** What a producer puts in a job, and what its worker must get back. */
interface JobData {
  uid: string;
  seq: number;
  payload: string;
  tags: string[];
}

/** A job as BullMQ names it: its queue and its id. */
const jobName = (queue: string, id: string | undefined): string => `${queue}/${id ?? '?'}`;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * Everything the producers were told and the workers saw. Waiters are checked after every
 * change, so the test awaits "N more jobs added" or "every job finished" as events.
 */
class Ledger {
  /** Every job a producer sent, by uid (recorded before `add`, so a worker can look it up at once). */
  readonly sent = new Map<string, JobData>();
  /** Acknowledged adds: job name -> uid. */
  readonly added = new Map<string, string>();
  /** Every time a processor ran a job: job name -> the data it got. */
  readonly runs = new Map<string, JobData[]>();
  /** Jobs whose data was not what their producer sent: job name -> what the worker got. */
  readonly wrongData = new Map<string, string>();
  /** 'completed' events by job name. */
  readonly completed = new Map<string, number>();
  readonly failed: string[] = [];
  readonly errors: string[] = [];
  /** Where the walk is (a label switchPhase sets, or the test itself), to name it in a failure. */
  phase = 'before the migration';
  /** Where each job was added: job name -> phase and proxy. */
  readonly addedIn = new Map<string, string>();
  private readonly waiters = new Set<() => void>();

  /** `where`: the phase when it was sent, and through what. */
  ack(queue: string, id: string | undefined, uid: string, where: string): void {
    this.added.set(jobName(queue, id), uid);
    this.addedIn.set(jobName(queue, id), where);
    this.changed();
  }

  /** `where`: the worker's proxy. */
  ran(queue: string, id: string | undefined, data: JobData, where: string): void {
    const name = jobName(queue, id);
    const runs = this.runs.get(name) ?? [];
    runs.push(data);
    this.runs.set(name, runs);
    const want = typeof data.uid === 'string' ? this.sent.get(data.uid) : undefined;
    if (want === undefined || !isDeepStrictEqual(data, want)) this.wrongData.set(name, `run by a worker on ${where} in ${this.phase}: ${JSON.stringify(data).slice(0, 100)}`);
  }

  complete(queue: string, id: string | undefined): void {
    const name = jobName(queue, id);
    this.completed.set(name, (this.completed.get(name) ?? 0) + 1);
    this.changed();
  }

  fail(queue: string, id: string | undefined, err: Error): void {
    this.failed.push(`${jobName(queue, id)}: ${err.message}`);
    this.changed();
  }

  error(what: string, err: unknown): void {
    this.errors.push(`${what}: ${message(err)}`);
    this.changed();
  }

  /** Jobs added (acknowledged) that neither completed nor failed yet. */
  unfinished(): number {
    let n = 0;
    for (const name of this.added.keys()) if (!this.completed.has(name)) n++;
    return n - this.failed.length;
  }

  /** Resolves once `done()` holds (checked after every change), or after `ms` with false. */
  until(done: () => boolean, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return;
        finish(true);
      };
      const timer = setTimeout(() => finish(false), ms);
      const finish = (ok: boolean): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(ok);
      };
      this.waiters.add(check);
      check();
    });
  }

  private changed(): void {
    for (const w of this.waiters) w();
  }
}

/** Producer loops adding jobs to the queues, each loop through its own Queue objects. */
class Producers {
  private running = false;
  private loops: Promise<void>[] = [];
  private seq = 0;

  /** `perLoop[i]`: the queues loop i adds to, all through the proxy `via[i]` names. */
  constructor(private readonly perLoop: Queue<JobData>[][], private readonly via: string[], private readonly ledger: Ledger, private readonly seed: number) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loops = this.perLoop.map((queues, i) => this.loop(queues, i));
  }

  async pause(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /**
   * Resolves once `n` more adds are acknowledged (throws after `ms`). A wait for progress, not a
   * rate: 200 adds take about 2 s alone and took over 20 s on a loaded 2-core host running two
   * test files at once; a stalled producer still fails.
   */
  async untilAdded(n: number, ms = 60_000): Promise<void> {
    const target = this.ledger.added.size + n;
    if (!(await this.ledger.until(() => this.ledger.added.size >= target, ms))) {
      throw new Error(`only ${this.ledger.added.size} of ${target} jobs added within ${ms} ms; errors: ${this.ledger.errors.slice(0, 5).join('; ')}`);
    }
  }

  private async loop(queues: Queue<JobData>[], index: number): Promise<void> {
    const rnd = xorshift32(this.seed * 100 + index + this.seq);
    while (this.running) {
      const q = queues[Math.floor(rnd() * queues.length)];
      const seq = this.seq++;
      const data = makeJob(`p${index}-${seq}`, seq, rnd);
      this.ledger.sent.set(data.uid, data);
      const where = `${this.ledger.phase} via ${this.via[index]}`;
      try {
        const job = await q.add('job', data);
        this.ledger.ack(q.name, job.id, data.uid, where);
      } catch (err) {
        this.ledger.error(`add ${data.uid} to ${q.name}`, err);
        if (this.ledger.errors.length > 20) return;
      }
    }
  }
}

/** A job's data: a unique id and a payload of 16 to 600 characters. */
function makeJob(uid: string, seq: number, rnd: () => number): JobData {
  const length = 16 + Math.floor(rnd() * 585);
  let payload = '';
  while (payload.length < length) payload += Math.floor(rnd() * 2 ** 32).toString(36);
  return { uid, seq, payload: payload.slice(0, length), tags: [`t${seq % 7}`, `r${Math.floor(rnd() * 100)}`] };
}

/** A BullMQ connection to `port` (BullMQ needs maxRetriesPerRequest: null on its connections). */
function connection(port: number): { host: string; port: number; maxRetriesPerRequest: null; disableClientInfo: boolean } {
  return { host: '127.0.0.1', port, maxRetriesPerRequest: null, disableClientInfo: true };
}

function portOf(addr: string): number {
  return Number(addr.slice(addr.lastIndexOf(':') + 1));
}

/**
 * Queue names, one hash tag each (`{jq7}`: every key of the queue in one slot and on one ring
 * node), picked until they cover every node of side A and of side B, at least `min` of them.
 */
function pickQueues(from: KeySpace, to: KeySpace, min: number): string[] {
  const names: string[] = [];
  const onA = new Set<string>();
  const onB = new Set<string>();
  for (let i = 0; names.length < min || onA.size < from.masters().length || onB.size < to.masters().length; i++) {
    const name = `{jq${i}}`;
    const key = Buffer.from(`bull:${name}:id`);
    const [a, b] = [ownerOfKey(from, key) as string, ownerOfKey(to, key) as string];
    if (names.length < min || !onA.has(a) || !onB.has(b)) {
      names.push(name);
      onA.add(a);
      onB.add(b);
    }
  }
  return names;
}

/** A job hash: `bull:{tag}:<numeric id>` (not the queue's meta, events, lists or locks). */
const JOB_HASH = /^bull:\{[^}]+\}:\d+$/;

/** Direct connections to the nodes of both sides, by address. */
class Nodes {
  private readonly clients = new Map<string, Redis>();

  client(addr: string): Redis {
    let c = this.clients.get(addr);
    if (c === undefined) {
      c = new Redis({ host: '127.0.0.1', port: portOf(addr), maxRetriesPerRequest: 1, disableClientInfo: true });
      this.clients.set(addr, c);
    }
    return c;
  }

  async jobHashes(side: KeySpace): Promise<Set<string>> {
    const keys = new Set<string>();
    for (const addr of side.masters()) {
      let cursor = '0';
      do {
        const [next, batch] = await this.client(addr).scan(cursor, 'MATCH', 'bull:*', 'COUNT', 1000);
        cursor = next;
        for (const k of batch) if (JOB_HASH.test(k)) keys.add(k);
      } while (cursor !== '0');
    }
    return keys;
  }

  async hash(side: KeySpace, key: string): Promise<string> {
    const addr = ownerOfKey(side, Buffer.from(key));
    if (addr === null) return '(no owner)';
    const h = await this.client(addr).hgetall(key);
    return JSON.stringify(Object.entries(h).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
  }

  close(): void {
    for (const c of this.clients.values()) c.disconnect();
    this.clients.clear();
  }
}

interface HashComparison {
  compared: number;
  differing: number;
  /** Of the differing: hashes A has and B lacks. */
  missingOnB: number;
  examples: string[];
  /** Comparisons made until nothing differed (or the last one). */
  attempts: number;
}

/** Every job hash of side A against its copy on side B, on the nodes (the key's owner on each side). */
async function compareJobHashes(nodes: Nodes, from: KeySpace, to: KeySpace): Promise<HashComparison> {
  const keys = new Set([...(await nodes.jobHashes(from)), ...(await nodes.jobHashes(to))]);
  const result: HashComparison = { compared: keys.size, differing: 0, missingOnB: 0, examples: [], attempts: 1 };
  for (const key of [...keys].sort()) {
    const [a, b] = await Promise.all([nodes.hash(from, key), nodes.hash(to, key)]);
    if (a === b) continue;
    result.differing++;
    if (b === '[]') result.missingOnB++;
    if (result.examples.length < 5) result.examples.push(`${key}: A ${a.slice(0, 80)} B ${b.slice(0, 80)}`);
  }
  return result;
}

/**
 * The comparison with the load paused. What carries writes to B may still be on its way when the
 * load stops: compared again (up to `tries` times, 200 ms apart) until nothing differs.
 */
async function settledComparison(nodes: Nodes, from: KeySpace, to: KeySpace, tries = 10): Promise<HashComparison> {
  let last = await compareJobHashes(nodes, from, to);
  for (let i = 1; i < tries && last.differing > 0; i++) {
    await new Promise((r) => setTimeout(r, 200));
    last = { ...(await compareJobHashes(nodes, from, to)), attempts: i + 1 };
  }
  return last;
}

/** `PROXY MIGRATION PHASE` on each of `admins`' proxies; `label` names the walk's step in the ledger. */
async function switchPhase(ledger: Ledger, admins: Redis[], phase: string, label: string): Promise<void> {
  ledger.phase = `the switch to ${label}`;
  for (const a of admins) expect(await a.call('PROXY', 'MIGRATION', 'PHASE', phase)).toBe('OK');
  ledger.phase = label;
}

/** What each case gives the walk: a name for its log line and its config (with the migration block). */
interface Sides {
  label: string;
  raw: () => Record<string, unknown>;
}

/** What the test ends with, compared as a whole so a failure shows every number at once. */
interface Outcome {
  hashes: Record<'afterCopy' | 'readNew' | 'beforeDone', { differing: number; missingOnB: number; examples: string[] }>;
  completedOnce: number;
  neverRan: number;
  ranTwice: number;
  wrongData: number;
  wrongDataExamples: string[];
  failed: string[];
  errors: string[];
  missingKeyErrors: number;
  counts: Record<string, number>;
}

async function walk(sides: Sides, seed: number): Promise<void> {
  const started = Date.now();
  const rawConfig = sides.raw();
  const direct = new NodeClient(parseConfig(rawConfig));
  await direct.start();
  const placement = direct.placement();
  const from = placement.from;
  const to = placement.to as KeySpace;
  const dir = tempDir('slotproxy-job-queue-');
  const proxies: { proxy: ProxyProcess; port: number }[] = [];
  const ledger = new Ledger();
  const nodes = new Nodes();
  const admins: Redis[] = [];
  const queues: Queue<JobData>[] = [];
  const workers: Worker<JobData>[] = [];
  let producers: Producers | undefined;
  try {
    const names = pickQueues(from, to, 6);
    const watchQueue = (q: Queue<JobData>): Queue<JobData> => {
      q.on('error', (err) => ledger.error(`queue ${q.name}`, err));
      queues.push(q);
      return q;
    };

    // A backlog from before the migration, added straight on side A's nodes (a queue's keys all
    // live on the node of its hash tag): the history `migrate copy` carries.
    for (const name of names) {
      const q = watchQueue(new Queue<JobData>(name, { connection: connection(portOf(ownerOfKey(from, Buffer.from(`bull:${name}:id`)) as string)) }));
      const rnd = xorshift32(seed + names.indexOf(name));
      for (let i = 0; i < 40; i++) {
        const data = makeJob(`seed-${name}-${i}`, i, rnd);
        ledger.sent.set(data.uid, data);
        const job = await q.add('job', data);
        ledger.ack(name, job.id, data.uid, 'before the migration, on the node');
      }
    }
    const seeded = ledger.added.size;

    // Two proxy processes in double-write; on each, one producer Queue and one Worker per queue.
    for (let i = 0; i < 2; i++) proxies.push(await startProxyProcess(rawConfig, dir));
    admins.push(...proxies.map((p) => new Redis({ host: '127.0.0.1', port: p.port, maxRetriesPerRequest: 0, disableClientInfo: true })));
    const perProxy = proxies.map((p) => names.map((name) => watchQueue(new Queue<JobData>(name, { connection: connection(p.port) }))));
    const via = proxies.map((p) => `proxy :${p.port}`);
    producers = new Producers([perProxy[0], perProxy[0], perProxy[1], perProxy[1]], [via[0], via[0], via[1], via[1]], ledger, seed);
    for (const p of proxies) {
      for (const name of names) {
        const w = new Worker<JobData>(
          name,
          async (job: Job<JobData>) => {
            ledger.ran(name, job.id, job.data, `:${p.port}`);
            return job.data.uid;
          },
          { connection: connection(p.port), concurrency: 4, autorun: false },
        );
        w.on('completed', (job) => ledger.complete(name, job.id));
        w.on('failed', (job, err) => ledger.fail(name, job?.id, err));
        w.on('error', (err) => ledger.error(`worker ${name} on :${p.port}`, err));
        w.on('stalled', (id) => ledger.error(`worker ${name} on :${p.port}`, `job ${id} stalled`));
        workers.push(w);
      }
    }
    let workersStarted = false;
    const pauseWorkers = async (): Promise<void> => {
      await Promise.all(workers.map((w) => w.pause()));
    };
    const runWorkers = async (): Promise<void> => {
      if (workersStarted) {
        await Promise.all(workers.map((w) => w.resume()));
        return;
      }
      workersStarted = true;
      for (const w of workers) w.run().catch((err: unknown) => ledger.error(`worker ${w.name} run`, err));
    };
    /**
     * A checkpoint: workers stop taking jobs while producers add `backlog` more (so jobs of this
     * phase wait, unprocessed), then producers stop and every job hash of A is compared with B's.
     */
    const checkpoint = async (backlog: number): Promise<HashComparison> => {
      await pauseWorkers();
      await producers?.untilAdded(backlog);
      await producers?.pause();
      return settledComparison(nodes, from, to);
    };

    // double-write, producers only: the backlog grows, before, during and after the copy.
    ledger.phase = 'double-write';
    producers.start();
    await producers.untilAdded(200);
    ledger.phase = 'double-write, during the copy';
    const copied = await copyHistory(direct, placement, { rate: 0, batch: 100, restart: false, progress: false });
    ledger.phase = 'double-write, after the copy';
    await producers.untilAdded(300);
    await producers.pause();
    const afterCopy = await settledComparison(nodes, from, to);
    const backlog = ledger.unfinished();

    // Workers start: they take the backlog while producers keep adding.
    producers.start();
    await runWorkers();
    await producers.untilAdded(200);
    await switchPhase(ledger, admins, 'read-new', 'read-new');
    await producers.untilAdded(200);
    const readNew = await checkpoint(200);
    producers.start();
    await runWorkers();
    // Back and forth.
    await switchPhase(ledger, admins, 'double-write', 'double-write again');
    await producers.untilAdded(200);
    await switchPhase(ledger, admins, 'read-new', 'read-new again');
    await producers.untilAdded(200);
    const beforeDone = await checkpoint(200);

    // done with a backlog from read-new still waiting, the second proxy lagging behind the first
    // by 100 jobs, jobs added all along; the workers start again once both are in done, then 200
    // more jobs on B alone.
    producers.start();
    await producers.untilAdded(100);
    await switchPhase(ledger, [admins[0]], 'done', 'done on the first proxy only');
    await producers.untilAdded(100);
    await switchPhase(ledger, [admins[1]], 'done', 'done');
    await producers.untilAdded(100);
    await runWorkers();
    await producers.untilAdded(200);
    await producers.pause();
    const drained = await ledger.until(() => ledger.unfinished() <= 0, 20_000);

    // The queues' own counts, read through a proxy (on side B now).
    const counts: Record<string, number> = {};
    for (const q of perProxy[0]) {
      for (const [state, n] of Object.entries(await q.getJobCounts('completed', 'failed', 'wait', 'active', 'delayed', 'prioritized', 'waiting-children'))) {
        counts[state] = (counts[state] ?? 0) + n;
      }
    }

    // The proxies' own account of what their change feeds carried (INFO proxy), for the log line.
    const feeds: string[] = [];
    for (const [i, a] of admins.entries()) {
      const lines = String(await a.info('proxy')).split('\r\n').filter((l) => l.startsWith('migration_feed'));
      feeds.push(`${via[i]} (${i === 0 ? 'first' : 'second'} into done): ${lines.length > 0 ? lines.map((l) => l.replace(/^migration_(feed_)?/, '')).join(' ') : 'no change feed'}`);
    }

    const added = ledger.added.size;
    let completedOnce = 0;
    let neverRan = 0;
    let ranTwice = 0;
    for (const [name, uid] of ledger.added) {
      const runs = ledger.runs.get(name) ?? [];
      if (runs.length === 0) neverRan++;
      if (runs.length > 1) ranTwice++;
      // Another job's data, however intact, is wrong data too.
      if (runs.some((data) => data.uid !== uid) && !ledger.wrongData.has(name)) ledger.wrongData.set(name, JSON.stringify(runs.map((d) => d.uid)));
      if (runs.length === 1 && ledger.completed.get(name) === 1 && !ledger.wrongData.has(name)) completedOnce++;
    }
    const all = [...ledger.failed, ...ledger.errors, ...[...ledger.wrongData.values()]];
    const shown = (c: HashComparison): Outcome['hashes']['afterCopy'] => ({ differing: c.differing, missingOnB: c.missingOnB, examples: c.examples });
    const outcome: Outcome = {
      hashes: { afterCopy: shown(afterCopy), readNew: shown(readNew), beforeDone: shown(beforeDone) },
      completedOnce,
      neverRan,
      ranTwice,
      wrongData: ledger.wrongData.size,
      wrongDataExamples: [...ledger.wrongData]
        .slice(0, 5)
        .map(([name, run]) => `${name} (${ledger.added.get(name) ?? '?'}, added in ${ledger.addedIn.get(name) ?? '?'}), ${run}`),
      failed: ledger.failed.slice(0, 10),
      errors: ledger.errors.slice(0, 10),
      missingKeyErrors: all.filter((m) => /missing key/i.test(m)).length,
      counts,
    };
    console.log(
      `${sides.label}: ${names.length} queues, ${added} jobs added (${seeded} before the migration, backlog of ${backlog} when workers started), ` +
        `copy scanned ${copied.scanned} copied ${copied.copied}; job hashes compared: ` +
        [['after copy', afterCopy] as const, ['at read-new', readNew] as const, ['before done', beforeDone] as const]
          .map(([when, c]) => `${c.compared} ${when} (${c.differing} differ, ${c.attempts} comparison${c.attempts === 1 ? '' : 's'})`)
          .join(', ') +
        '; ' +
        `drained: ${drained}; completed once ${completedOnce}, never ran ${neverRan}, ran twice ${ranTwice}, wrong data ${ledger.wrongData.size}, ` +
        `failed ${ledger.failed.length}, errors ${ledger.errors.length} (Missing key: ${outcome.missingKeyErrors}); counts ${JSON.stringify(counts)}; ` +
        `feeds: ${feeds.join('; ')}; ` +
        `${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    const none = { differing: 0, missingOnB: 0, examples: [] };
    expect(outcome).toEqual({
      hashes: { afterCopy: none, readNew: none, beforeDone: none },
      completedOnce: added,
      neverRan: 0,
      ranTwice: 0,
      wrongData: 0,
      wrongDataExamples: [],
      failed: [],
      errors: [],
      missingKeyErrors: 0,
      counts: { completed: added, failed: 0, wait: 0, active: 0, delayed: 0, prioritized: 0, 'waiting-children': 0 },
    });
    expect(drained).toBe(true);
  } finally {
    // Bounded: an add stuck on a proxy that hangs must not keep the proxies alive.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([producers?.pause(), new Promise((r) => (timer = setTimeout(r, 5000)))]);
    clearTimeout(timer);
    await Promise.all(workers.map((w) => w.close(true).catch(() => undefined)));
    await Promise.all(queues.map((q) => q.close().catch(() => undefined)));
    for (const a of admins) a.disconnect();
    nodes.close();
    for (const p of proxies) p.proxy.kill('SIGTERM');
    await Promise.all(proxies.map((p) => p.proxy.exitCode()));
    fs.rmSync(dir, { recursive: true, force: true });
    direct.close();
  }
}

beforeAll(() => setLogLevel('silent'));
afterAll(() => killAllProxies());

describe('ring of 2 into a cluster of 3', () => {
  let ring: StandaloneNodes | undefined;
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    [ring, cluster] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
  }, 60_000);
  afterAll(async () => {
    killAllProxies();
    await Promise.all([ring?.stop(), cluster?.stop()]);
  }, 30_000);

  test('BullMQ producers and workers through two proxies lose no job and run none twice', async () => {
    await walk(
      {
        label: 'ring -> cluster',
        raw: () => ({
          listen: '127.0.0.1:0',
          mode: 'ring',
          ring: { hash: 'fnv1a_64', hashTag: '{}', nodes: ring!.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) },
          migration: { phase: 'double-write', to: { cluster: { seeds: [cluster!.masters[0].address] } } },
          log: { level: 'silent' },
        }),
      },
      1,
    );
  }, 240_000); // the walk measured 24-38 s alone, 107 s and more beside other test files
});

describe('cluster of 3 into another cluster of 3', () => {
  let source: RedisCluster | undefined;
  let target: RedisCluster | undefined;
  beforeAll(async () => {
    [source, target] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 0 }), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
  }, 60_000);
  afterAll(async () => {
    killAllProxies();
    await Promise.all([source?.stop(), target?.stop()]);
  }, 30_000);

  test('BullMQ producers and workers through two proxies lose no job and run none twice', async () => {
    await walk(
      {
        label: 'cluster -> cluster',
        raw: () => ({
          listen: '127.0.0.1:0',
          mode: 'cluster',
          cluster: { seeds: [source!.masters[0].address] },
          migration: { phase: 'double-write', to: { cluster: { seeds: [target!.masters[0].address] } } },
          log: { level: 'silent' },
        }),
      },
      2,
    );
  }, 240_000);
});
