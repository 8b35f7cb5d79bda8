// Issue 37 item 6, as a user reported it: a Sentinel-managed ring of 2 moving into a cluster of 3
// masters with replicas, two proxy processes in read-new, lock clients doing SET key token NX PX
// 2000 and a compare-and-delete release through both proxies, and a kill -9 of the cluster master
// owning the lock keys' slot while its replica takes over. Every acquired lock's token must read
// back through the other proxy, and its release must find it; a failed request may fail, but only
// with an error, never with a wrong value.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { SentinelGroups } from '../helpers/sentinel-groups';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { keySlot } from '../../sharding/slot';

const NAMES = ['a1', 'a2'];
const TTL_MS = 2000;
const RELEASE = "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
/** One key per lock client, all in one slot: the slot whose master is killed. */
const KEYS = ['{lock}:w0', '{lock}:w1'];
/** Locks each client releases after the promotion before it stops. */
const AFTER_PROMOTION = 10;

let groups: SentinelGroups | undefined;
let cluster: RedisCluster | undefined;

beforeAll(async () => {
  [groups, cluster] = await Promise.all([SentinelGroups.start({ names: NAMES }), RedisCluster.start({ masters: 3, replicasPerMaster: 1 })]);
}, 90_000);

afterAll(async () => {
  killAllProxies();
  await Promise.all([groups?.stop(), cluster?.stop()]);
}, 30_000);

interface Step {
  /** ms since the test's start, when the request was sent and when its reply came. */
  sent: number;
  replied: number;
  proxy: number;
  op: 'acquire' | 'read' | 'release';
  token: string;
  reply: string;
}

/** What a lock client saw, and every answer no correct proxy could give. */
interface LockTrace {
  key: string;
  steps: Step[];
  wrong: string[];
  acquired: number;
  released: number;
  errors: number;
}

const t0 = Date.now();
const now = (): number => Date.now() - t0;

function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, enableOfflineQueue: true, disableClientInfo: true, commandTimeout: 20_000 });
}

/** One request: its reply as text, or `ERR:` and the error, recorded in the trace. */
async function step(trace: LockTrace, proxy: number, c: Redis, op: Step['op'], token: string, run: () => Promise<unknown>): Promise<Step> {
  const sent = now();
  let reply: string;
  try {
    const r = await run();
    reply = r === null ? 'nil' : String(r);
  } catch (err) {
    reply = `ERR:${err instanceof Error ? err.message : String(err)}`;
    trace.errors++;
  }
  const s = { sent, replied: now(), proxy, op, token, reply };
  trace.steps.push(s);
  return s;
}

/**
 * A lock client: acquire through one proxy, read the token back and release through the other,
 * until `stop()` says so. `unsure` marks a lock state an error left unknown (an acquire or release
 * that may have run): SET NX may then find the key held, until its PX runs out.
 */
async function lockClient(key: string, clients: Redis[], stop: () => boolean, started: (t: LockTrace) => void): Promise<LockTrace> {
  const trace: LockTrace = { key, steps: [], wrong: [], acquired: 0, released: 0, errors: 0 };
  started(trace);
  let unsureUntil = 0;
  for (let i = 0; !stop(); i++) {
    const a = i % 2;
    const b = 1 - a;
    const token = `${key}#${i}`;
    const set = await step(trace, a, clients[a], 'acquire', token, () => clients[a].set(key, token, 'PX', TTL_MS, 'NX'));
    if (set.reply.startsWith('ERR:')) {
      unsureUntil = set.replied + TTL_MS + 500;
      continue;
    }
    if (set.reply === 'nil') {
      if (set.sent > unsureUntil) trace.wrong.push(`acquire ${token} found the key held with no lock of ours left unsure`);
      continue;
    }
    if (set.reply !== 'OK') {
      trace.wrong.push(`acquire ${token} answered ${set.reply}`);
      continue;
    }
    trace.acquired++;
    // Until its PX may have run out (counted from when SET was sent), the lock is ours.
    const heldUntil = set.sent + TTL_MS;
    const read = await step(trace, b, clients[b], 'read', token, () => clients[b].get(key));
    if (!read.reply.startsWith('ERR:') && read.reply !== token && !(read.reply === 'nil' && read.replied >= heldUntil)) {
      trace.wrong.push(`read back ${read.reply} ${read.replied - set.replied} ms after acquiring ${token}`);
    }
    const rel = await step(trace, b, clients[b], 'release', token, () => clients[b].eval(RELEASE, 1, key, token));
    if (rel.reply.startsWith('ERR:')) {
      unsureUntil = rel.replied + TTL_MS + 500;
    } else if (rel.reply === '1') {
      trace.released++;
    } else if (!(rel.reply === '0' && rel.replied >= heldUntil)) {
      trace.wrong.push(`release of ${token} answered ${rel.reply} ${rel.replied - set.replied} ms after acquiring it`);
    }
  }
  return trace;
}

/** Locks acquired and released (release answered 1) from `at` on. */
function afterPromotion(trace: LockTrace, at: number): number {
  return trace.steps.filter((s) => s.op === 'release' && s.reply === '1' && s.sent > at).length;
}

/** The steps around each wrong answer, for the failure message. */
function around(trace: LockTrace): string {
  const lines: string[] = [];
  for (const w of trace.wrong.slice(0, 3)) {
    const token = /of (\S+)|acquiring (\S+)|acquire (\S+)/.exec(w)?.slice(1).find((x) => x !== undefined) ?? '';
    const at = trace.steps.findIndex((s) => s.token === token);
    lines.push(`${trace.key}: ${w}`);
    for (const s of trace.steps.slice(Math.max(0, at - 4), at + 4)) lines.push(`  ${s.sent}-${s.replied} ms proxy${s.proxy} ${s.op} ${s.token} -> ${s.reply}`);
  }
  return lines.join('\n');
}

async function switchToReadNew(admin: Redis): Promise<void> {
  for (const deadline = Date.now() + 30_000; ; ) {
    const reply = await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new').catch((err: Error) => err.message);
    if (reply === 'OK') return;
    if (Date.now() > deadline) throw new Error(`read-new refused: ${String(reply)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('read-new: a kill -9 of the lock slot\'s cluster master loses no acknowledged lock', async () => {
  const env = groups!;
  const target = cluster!;
  const dir = tempDir('slotproxy-lock-failover-');
  const proxies: { proxy: ProxyProcess; port: number }[] = [];
  const clients: Redis[] = [];
  try {
    const config = {
      mode: 'ring',
      ring: { hash: 'fnv1a_64', sentinels: env.sentinelAddresses, nodes: NAMES.map((master) => ({ master })) },
      migration: { phase: 'double-write', to: { cluster: { seeds: [target.masters[0].address] } } },
    };
    for (let i = 0; i < 2; i++) proxies.push(await startProxyProcess(config, dir));
    const admins = proxies.map((p) => connect(p.port));
    const lockClients = KEYS.map(() => proxies.map((p) => connect(p.port)));
    clients.push(...admins, ...lockClients.flat());
    for (const admin of admins) await switchToReadNew(admin);

    // Each client stops once it has released AFTER_PROMOTION locks taken after the promotion (a
    // loaded machine gets more time, up to 15 s): the promoted master served the lock slot.
    let promotedAt = Infinity;
    const running = KEYS.map((key, i) => {
      const trace: { t: LockTrace | null } = { t: null };
      const stop = (): boolean => now() > promotedAt + 15_000 || (trace.t !== null && afterPromotion(trace.t, promotedAt) >= AFTER_PROMOTION);
      return lockClient(key, lockClients[i], stop, (t) => (trace.t = t));
    });
    await new Promise((r) => setTimeout(r, 1500));
    const master = await target.masterFor(keySlot(Buffer.from(KEYS[0])));
    const killedAt = now();
    master.kill('SIGKILL');
    await target.waitForClusterOk();
    promotedAt = now();
    const traces = await Promise.all(running);

    const after = (t: LockTrace): number => afterPromotion(t, promotedAt);
    console.log(
      `lock failover: killed ${master.address} at ${killedAt} ms, promoted by ${promotedAt} ms; ` +
        traces.map((t) => `${t.key}: ${t.acquired} acquired, ${t.released} released (${after(t)} after the promotion), ${t.errors} errors`).join('; ') +
        `; proxy warnings: ${proxies.map((p) => (p.proxy.log.match(/not confirmed on side B/g) ?? []).length).join('/')}`,
    );
    expect(traces.map(around).filter((x) => x !== '')).toEqual([]);
    for (const t of traces) {
      // The scenario ran: locks before the kill, and through the promoted master after it.
      expect(t.steps.some((s) => s.op === 'release' && s.reply === '1' && s.replied < killedAt)).toBe(true);
      expect(after(t)).toBeGreaterThanOrEqual(AFTER_PROMOTION);
    }
  } finally {
    for (const c of clients) c.disconnect();
    for (const p of proxies) p.proxy.kill('SIGTERM');
    await Promise.all(proxies.map((p) => p.proxy.exitCode()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
