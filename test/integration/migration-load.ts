// Test helper: a mixed write load over a known key space, run by several ioredis clients through
// one or more proxies, recording every acknowledged effect so the final state can be checked
// exactly (counters = acknowledged increments, lists = acknowledged pushes, ...).
import Redis from 'ioredis';
import { xorshift32 } from '../helpers/random';

export const GROUPS = {
  counter: 600,
  list: 300,
  hash: 300,
  append: 300,
  ttl: 200,
  deletable: 300,
  queue: 20,
} as const;
export type Group = keyof typeof GROUPS;

export function keyOf(group: Group, i: number): string {
  // A few keys share a hash tag, so multi-key commands have something to work on.
  return i % 10 === 0 ? `{${group}-t${i % 3}}:${i}` : `${group}:${i}`;
}

const INCR_SCRIPT = "return redis.call('INCRBY', KEYS[1], ARGV[1])";

/**
 * One EXPIRE as the clients saw it, on the load's logical clock: sent at `sent`, acknowledged at
 * `acked` (Infinity when no reply came: it may still have run, at any time after it was sent).
 */
export interface TtlWrite {
  secs: number;
  sent: number;
  acked: number;
}

/** What the clients were told succeeded. */
export class Expected {
  readonly counters = new Map<string, number>();
  readonly lists = new Map<string, string[]>();
  readonly hashes = new Map<string, Map<string, number>>();
  readonly appends = new Map<string, string[]>();
  /** Keys with a TTL set, and every EXPIRE sent to each (the seed's first, at time 0). */
  readonly ttls = new Map<string, TtlWrite[]>();
  readonly deleted = new Set<string>();
  /** Job tokens pushed to the queues (acknowledged or not: an unacknowledged push may have run). */
  readonly pushedJobs = new Set<string>();
  readonly ackedJobs = new Set<string>();
  /** Every job a consumer's BLPOP returned, duplicates kept so they can be caught. */
  readonly poppedJobs: string[] = [];
  ops = 0;
  errors: string[] = [];
  /** Orders sends and replies as the clients saw them (one thread: a total order). */
  private clock = 0;

  tick(): number {
    return ++this.clock;
  }
}

/**
 * The TTLs a key may have now. Concurrent EXPIREs (two clients, two proxies, or one proxy in
 * done writing straight to B while another still goes through A) are acknowledged in no
 * particular order, so "the last acknowledged" is not the answer: an EXPIRE may be the key's final
 * one unless some acknowledged EXPIRE was sent after it was acknowledged (that one ran after it).
 */
export function possibleTtls(writes: readonly TtlWrite[]): number[] {
  return writes.filter((w) => !writes.some((later) => later.acked !== Infinity && later.sent > w.acked)).map((w) => w.secs);
}

/** Writes the key space's initial state straight to ring A's nodes, before any migration. */
export async function seed(write: (key: string) => Redis, expected: Expected): Promise<number> {
  const pipes = new Map<Redis, ReturnType<Redis['pipeline']>>();
  const pipe = (key: string): ReturnType<Redis['pipeline']> => {
    const c = write(key);
    let p = pipes.get(c);
    if (p === undefined) {
      p = c.pipeline();
      pipes.set(c, p);
    }
    return p;
  };
  let n = 0;
  for (let i = 0; i < GROUPS.counter; i++) {
    const k = keyOf('counter', i);
    pipe(k).set(k, String(i));
    expected.counters.set(k, i);
    n++;
  }
  for (let i = 0; i < GROUPS.list; i++) {
    const k = keyOf('list', i);
    pipe(k).rpush(k, 'seed');
    expected.lists.set(k, ['seed']);
    n++;
  }
  for (let i = 0; i < GROUPS.hash; i++) {
    const k = keyOf('hash', i);
    pipe(k).hset(k, 'f0', '1');
    expected.hashes.set(k, new Map([['f0', 1]]));
    n++;
  }
  for (let i = 0; i < GROUPS.append; i++) {
    const k = keyOf('append', i);
    pipe(k).set(k, '|seed');
    expected.appends.set(k, ['seed']);
    n++;
  }
  for (let i = 0; i < GROUPS.ttl; i++) {
    const k = keyOf('ttl', i);
    pipe(k).set(k, 'v', 'EX', 5000);
    expected.ttls.set(k, [{ secs: 5000, sent: 0, acked: 0 }]);
    n++;
  }
  for (let i = 0; i < GROUPS.deletable; i++) {
    const k = keyOf('deletable', i);
    pipe(k).set(k, 'd');
    n++;
  }
  for (const p of pipes.values()) {
    for (const [err] of (await p.exec()) ?? []) if (err !== null) throw err;
  }
  return n;
}

/** Clients running the load until paused; `resume` starts them again. */
export class MixedLoad {
  private running = false;
  private loops: Promise<void>[] = [];
  private nextDeletable = 0;
  private seq = 0;
  /** The operation each client is running, to name it in an error. */
  private readonly currentOp = new Map<Redis, string>();

  /** `consumers`: clients that only pop jobs from the queues with BLPOP, while the others push them. */
  constructor(private readonly clients: Redis[], readonly expected: Expected, private readonly seedValue = 1, private readonly consumers: Redis[] = []) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loops = [...this.clients.map((c, i) => this.loop(c, i)), ...this.consumers.map((c, i) => this.consume(c, i))];
  }

  private async consume(client: Redis, index: number): Promise<void> {
    const rnd = xorshift32(this.seedValue * 7000 + index + this.seq);
    while (this.running) {
      const k = keyOf('queue', Math.floor(rnd() * GROUPS.queue));
      try {
        const got = await client.blpop(k, 0.2);
        if (got !== null) this.expected.poppedJobs.push(got[1]);
        this.expected.ops++;
      } catch (err) {
        this.expected.errors.push(`BLPOP ${k}: ${err instanceof Error ? err.message : String(err)}`);
        if (this.expected.errors.length > 20) return;
      }
    }
  }

  async pause(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async loop(client: Redis, index: number): Promise<void> {
    const rnd = xorshift32(this.seedValue * 1000 + index + this.seq);
    while (this.running) {
      try {
        await this.one(client, index, rnd);
        this.expected.ops++;
      } catch (err) {
        const previous = (err as { previousErrors?: Error[] }).previousErrors?.map((x) => x.message) ?? [];
        this.expected.errors.push(`${this.currentOp.get(client) ?? '?'}: ${err instanceof Error ? err.message : String(err)}${previous.length > 0 ? ` ${JSON.stringify(previous)}` : ''}`);
        if (this.expected.errors.length > 20) return;
      }
    }
  }

  /** MULTI-based rate limiting, a WATCH-based counter, a job pushed for the BLPOP consumers, a PUBLISH. */
  private async transactional(c: Redis, token: string, rnd: () => number): Promise<void> {
    const e = this.expected;
    const k = keyOf('counter', Math.floor(rnd() * GROUPS.counter));
    const r = rnd();
    if (r < 0.3) {
      this.currentOp.set(c, 'multi');
      const reply = await c.multi().incr(k).expire(k, 100_000).exec();
      if (reply === null || reply[0][0] !== null) throw new Error(`MULTI INCR ${k}: ${JSON.stringify(reply)}`);
      e.counters.set(k, (e.counters.get(k) ?? 0) + 1);
    } else if (r < 0.55) {
      // WATCH, read, write back: retried until no other client touched the key in between.
      for (;;) {
        this.currentOp.set(c, 'watch');
        await c.watch(k);
        const v = Number(await c.get(k));
        this.currentOp.set(c, 'multi');
        const reply = await c.multi().set(k, String(v + 1)).exec();
        if (reply === null) continue;
        e.counters.set(k, (e.counters.get(k) ?? 0) + 1);
        return;
      }
    } else if (r < 0.9) {
      const q = keyOf('queue', Math.floor(rnd() * GROUPS.queue));
      e.pushedJobs.add(token);
      this.currentOp.set(c, 'lpush');
      await c.lpush(q, token);
      e.ackedJobs.add(token);
    } else {
      this.currentOp.set(c, 'publish');
      const n = await c.publish(`news:${token}`, 'hello');
      if (typeof n !== 'number') throw new Error(`PUBLISH answered ${String(n)}`);
    }
  }

  private async one(c: Redis, client: number, rnd: () => number): Promise<void> {
    const e = this.expected;
    const pick = (g: Group): string => keyOf(g, Math.floor(rnd() * GROUPS[g]));
    const token = `c${client}-${this.seq++}`;
    if (rnd() < 0.2) return this.transactional(c, token, rnd);
    const r = rnd();
    if (r < 0.25) {
      const k = pick('counter');
      this.currentOp.set(c, 'incr');
      await c.incr(k);
      e.counters.set(k, (e.counters.get(k) ?? 0) + 1);
    } else if (r < 0.32) {
      const k = pick('counter');
      this.currentOp.set(c, 'eval');
      await c.eval(INCR_SCRIPT, 1, k, 2);
      e.counters.set(k, (e.counters.get(k) ?? 0) + 2);
    } else if (r < 0.5) {
      const k = pick('list');
      this.currentOp.set(c, 'lpush');
      await c.lpush(k, token);
      e.lists.get(k)?.push(token);
    } else if (r < 0.65) {
      const k = pick('hash');
      const f = `f${Math.floor(rnd() * 4)}`;
      this.currentOp.set(c, 'hincrby');
      await c.hincrby(k, f, 3);
      const h = e.hashes.get(k) ?? new Map<string, number>();
      h.set(f, (h.get(f) ?? 0) + 3);
      e.hashes.set(k, h);
    } else if (r < 0.8) {
      const k = pick('append');
      this.currentOp.set(c, 'append');
      await c.append(k, `|${token}`);
      e.appends.get(k)?.push(token);
    } else if (r < 0.9) {
      const k = pick('ttl');
      const secs = 4000 + Math.floor(rnd() * 1000);
      const write: TtlWrite = { secs, sent: e.tick(), acked: Infinity };
      e.ttls.get(k)?.push(write);
      this.currentOp.set(c, 'expire');
      await c.expire(k, secs);
      write.acked = e.tick();
    } else if (r < 0.96) {
      if (this.nextDeletable >= GROUPS.deletable) return;
      const k = keyOf('deletable', this.nextDeletable++);
      // Marked first: a DEL whose reply is lost may still have run.
      e.deleted.add(k);
      this.currentOp.set(c, 'del');
      await c.del(k);
    } else {
      // Reads, so read routing (A, then B) is exercised under the same load.
      const k = pick('counter');
      this.currentOp.set(c, 'get');
      const v = await c.get(k);
      if (v === null) throw new Error(`counter ${k} read as missing`);
    }
  }
}

/** Difference between what the queues' producers pushed and what consumers popped plus what is left. */
export async function checkQueues(c: Redis, e: Expected): Promise<string[]> {
  const problems: string[] = [];
  const seen = new Map<string, number>();
  const left: string[] = [];
  for (let i = 0; i < GROUPS.queue; i++) left.push(...(await c.lrange(keyOf('queue', i), 0, -1)));
  for (const job of [...e.poppedJobs, ...left]) seen.set(job, (seen.get(job) ?? 0) + 1);
  for (const [job, n] of seen) {
    if (n > 1) problems.push(`job ${job} seen ${n} times`);
    if (!e.pushedJobs.has(job)) problems.push(`job ${job} never pushed`);
  }
  for (const job of e.ackedJobs) if (!seen.has(job)) problems.push(`job ${job} lost`);
  return problems;
}

/** Differences between the expected state and what `c` (a proxy) reads now. */
export async function checkState(c: Redis, e: Expected): Promise<string[]> {
  const problems: string[] = [];
  const p = c.pipeline();
  const checks: ((v: unknown) => void)[] = [];
  for (const [k, n] of e.counters) {
    p.get(k);
    checks.push((v) => v !== String(n) && problems.push(`counter ${k}: ${String(v)} != ${n}`));
  }
  for (const [k, items] of e.lists) {
    p.lrange(k, 0, -1);
    checks.push((v) => {
      const got = [...(v as string[])].sort();
      const want = [...items].sort();
      if (got.join(',') !== want.join(',')) problems.push(`list ${k}: ${got.length} items, ${want.length} acknowledged`);
    });
  }
  for (const [k, fields] of e.hashes) {
    p.hgetall(k);
    checks.push((v) => {
      const got = v as Record<string, string>;
      for (const [f, n] of fields) if (got[f] !== String(n)) problems.push(`hash ${k}.${f}: ${got[f]} != ${n}`);
    });
  }
  for (const [k, tokens] of e.appends) {
    p.get(k);
    checks.push((v) => {
      const got = String(v).split('|').filter((s) => s !== '').sort();
      if (got.join(',') !== [...tokens].sort().join(',')) problems.push(`append ${k}: ${got.length} parts, ${tokens.length} acknowledged`);
    });
  }
  for (const [k, writes] of e.ttls) {
    p.ttl(k);
    const possible = possibleTtls(writes);
    checks.push((v) => {
      const ttl = Number(v);
      if (!possible.some((secs) => ttl > secs - 120 && ttl <= secs)) problems.push(`ttl ${k}: ${ttl} s, expected about ${possible.join(' or ')}`);
    });
  }
  for (let i = 0; i < GROUPS.deletable; i++) {
    const k = keyOf('deletable', i);
    p.exists(k);
    const gone = e.deleted.has(k);
    checks.push((v) => Number(v) !== (gone ? 0 : 1) && problems.push(`deletable ${k}: exists=${String(v)}, deleted=${gone}`));
  }
  const results = (await p.exec()) ?? [];
  results.forEach(([err, v], i) => {
    if (err !== null) problems.push(`read failed: ${err.message}`);
    else checks[i](v);
  });
  return problems;
}

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function switchPhase(admins: Redis[], name: string): Promise<void> {
  for (const a of admins) expect(await a.call('PROXY', 'MIGRATION', 'PHASE', name)).toBe('OK');
}

/** What a migration test drives through the phases: two proxies' admin clients, the load, the tools. */
export interface PhaseWalk {
  admins: [Redis, Redis];
  load: MixedLoad;
  expected: Expected;
  /** `migrate copy` (side A to side B), run under the load in double-write. */
  copy: () => Promise<{ scanned: number; copied: number; skippedNewer: number }>;
  /** `migrate verify` in read-new. */
  verify: () => Promise<{ compared: number; differing: number; examples: string[] }>;
  /** Runs alongside the copy (a failover of a target master, say). */
  alongsideCopy?: () => Promise<void>;
  /** Runs in double-write under the load, before the copy (a failover of a source master, say). */
  beforeCopy?: () => Promise<void>;
}

/**
 * The walk every migration test takes, under the mixed load: double-write and the copy, read-new,
 * back to double-write, read-new, checked (verify finds nothing, every acknowledged effect is
 * there, no job lost or popped twice, no error); then `done` under the load, one proxy half a
 * second behind the other, checked again. Resolves with the copy's and verify's results.
 */
export async function walkPhases(w: PhaseWalk): Promise<{ copied: Awaited<ReturnType<PhaseWalk['copy']>>; verified: Awaited<ReturnType<PhaseWalk['verify']>> }> {
  const { admins, load, expected } = w;
  load.start();
  await pause(300);
  await w.beforeCopy?.();
  const [copied] = await Promise.all([w.copy(), w.alongsideCopy?.()]);
  await pause(300);
  await switchPhase(admins, 'read-new');
  await pause(500);
  // Back and forth under load: A stays where writes land, so nothing can be lost.
  await switchPhase(admins, 'double-write');
  await pause(300);
  await switchPhase(admins, 'read-new');
  await pause(500);
  await load.pause();
  expect(expected.errors).toEqual([]);
  const verified = await w.verify();
  expect(verified.examples).toEqual([]);
  expect(verified.differing).toBe(0);
  expect(await checkState(admins[0], expected)).toEqual([]);
  expect(await checkState(admins[1], expected)).toEqual([]);
  expect(await checkQueues(admins[0], expected)).toEqual([]);

  // Into done under load, the second proxy lagging half a second behind: B is fenced first, so
  // the lagging proxy's writes still reach B exactly once.
  load.start();
  await pause(200);
  await switchPhase([admins[0]], 'done');
  await pause(500);
  await switchPhase([admins[1]], 'done');
  await pause(400);
  await load.pause();
  expect(expected.errors).toEqual([]);
  expect(await checkState(admins[0], expected)).toEqual([]);
  expect(await checkState(admins[1], expected)).toEqual([]);
  expect(await checkQueues(admins[1], expected)).toEqual([]);
  await expect(admins[0].call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).rejects.toThrow('done is final');
  return { copied, verified };
}
