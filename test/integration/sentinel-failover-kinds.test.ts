// Every kind of request waits out a Sentinel failover of its ring server the same way: two proxies
// in front of two master+replica groups (three redis-sentinel processes), and through each proxy
// two clients per kind (plain SET, a pipeline, MULTI/EXEC, WATCH + MULTI/EXEC, EVAL, EVALSHA,
// FCALL, BLPOP) keeps one request in flight on keys of shard1 while shard1's master is killed
// (kill -9). An error is allowed only for a request sent before the master was gone (on the wire
// when it died) and must say it may have run; every request sent after waits for the promotion and
// succeeds: no "unreachable", no "no longer where its requests go". Then a planned failover
// (SENTINEL FAILOVER) of shard2 under the same load: no error at all, and every write a client saw
// acknowledged (MULTI, pipelines, scripts, FCALL: each sets a key of its own and increments its
// kind's counter) is on the new master, unless it was sent before the proxies could know of the
// promotion: Redis replicates asynchronously, and what the old master acknowledged after its
// replica left is dropped when Sentinel makes it a replica (docs/ring-mode.md, "A planned failover").
import Redis from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { Ring } from '../../sharding/ring';
import { SentinelGroups } from '../helpers/sentinel-groups';
import { waitFor } from '../helpers/master-keys';

const NAMES = ['shard1', 'shard2'];
const BY_NAME = new Ring({ hash: 'md5', hashTag: '{}', nodes: NAMES.map((name) => ({ name, addr: `${name}:1`, weight: 1 })) });
/** A hash tag whose keys the ring of names places on `shard`. */
function tagOf(shard: string): string {
  for (let i = 0; ; i++) if (BY_NAME.nodeOf(Buffer.from(`{t${i}}`)).name === shard) return `t${i}`;
}
/** What a request on the wire to a master that died may get: it may have run. */
const ON_THE_WIRE = /may or may not have run|unreachable \(Connection reset by peer\)/;
/** Clients per kind and proxy, each with one request in flight. */
const CLIENTS_PER_KIND = 2;
/** KEYS[1] the kind's counter, KEYS[2] the request's own key. */
const INCR_SCRIPT = "redis.call('SET', KEYS[2], 'v') return redis.call('INCR', KEYS[1])";
const LIBRARY = "#!lua name=kinds\nredis.register_function('kinds_incr', function(keys) redis.call('SET', keys[2], 'v') return redis.call('INCR', keys[1]) end)";
/** The kinds that write a key of their own per request: the prefix of that key, and their counter. */
const MARKED: Record<string, { own: string; counter: string }> = {
  multi: { own: 'm', counter: 'mcount' },
  pipeline: { own: 'p', counter: 'pcount' },
  eval: { own: 'e', counter: 'eval' },
  evalsha: { own: 's', counter: 'evalsha' },
  fcall: { own: 'f', counter: 'fcall' },
};

let env: SentinelGroups | undefined;
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];

interface Outcome {
  kind: string;
  /** The request's number: its own key is `${MARKED[kind].own}${i}`. */
  i: number;
  sentAt: number;
  doneAt: number;
  error: string | null;
}

/** A client that never retries or queues: what the proxy answers is what is recorded. */
async function connect(p: ProxyServer): Promise<Redis> {
  const c = new Redis({ port: p.address.port, maxRetriesPerRequest: 0, commandTimeout: 30_000, disableClientInfo: true, enableOfflineQueue: false, lazyConnect: true, retryStrategy: () => null });
  clients.push(c);
  await c.connect();
  return c;
}

/** One request of each kind at a time on its own connection, until stopped; every outcome kept. */
class KindsLoad {
  readonly outcomes: Outcome[] = [];
  /** The key `name` of this load (its own, on its shard). */
  readonly key: (name: string) => string;
  private stopping = false;
  private readonly loops: Promise<void>[];

  constructor(p: ProxyServer, id: string, sha: string, readonly shard: string) {
    const tag = tagOf(shard);
    const key = (name: string): string => `{${tag}}:${id}:${name}`;
    this.key = key;
    const kinds: Record<string, (c: Redis, i: number) => Promise<unknown>> = {
      set: (c, i) => c.set(key(`set${i}`), 'v'),
      pipeline: async (c, i) => {
        const results = (await c.pipeline().set(key(`p${i}`), 'v').incr(key('pcount')).get(key(`p${i}`)).rpush(key('queue'), String(i)).exec()) ?? [];
        const failed = results.find(([err]) => err !== null);
        if (failed !== undefined) throw failed[0];
      },
      multi: async (c, i) => {
        const results = await c.multi().set(key(`m${i}`), 'v').incr(key('mcount')).exec();
        const failed = (results ?? []).find(([err]) => err !== null);
        if (failed !== undefined) throw failed[0];
      },
      // A nil EXEC (a watched key touched, or its watch lost with the dead master) is no error: the client starts over.
      watch: async (c) => {
        await c.watch(key('w'));
        const n = Number(await c.get(key('w')));
        await c.multi().set(key('w'), String(n + 1)).exec();
      },
      eval: (c, i) => c.eval(INCR_SCRIPT, 2, key('eval'), key(`e${i}`)),
      evalsha: (c, i) => c.evalsha(sha, 2, key('evalsha'), key(`s${i}`)),
      fcall: (c, i) => c.call('FCALL', 'kinds_incr', '2', key('fcall'), key(`f${i}`)),
      blpop: (c) => c.blpop(key('queue'), 0.2),
    };
    const each = Object.entries(kinds).flatMap(([kind, run]) => Array.from({ length: CLIENTS_PER_KIND }, (_, n) => [kind, run, n] as const));
    this.loops = each.map(async ([kind, run, n]) => {
      const c = await connect(p);
      for (let i = n * 1_000_000; !this.stopping; i++) {
        const sentAt = Date.now();
        const error = await run(c, i).then(() => null, (err: Error) => err.message);
        this.outcomes.push({ kind, i, sentAt, doneAt: Date.now(), error });
      }
    });
  }

  /** Requests of every kind sent after `t` answered without error. */
  succeededAfter(t: number): Set<string> {
    return new Set(this.outcomes.filter((o) => o.error === null && o.sentAt > t).map((o) => o.kind));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.loops);
  }
}

function groups(): SentinelGroups {
  if (env === undefined) throw new Error('the sentinel groups did not start');
  return env;
}

beforeAll(async () => {
  env = await SentinelGroups.start({ names: NAMES });
  for (let i = 0; i < 2; i++) {
    proxies.push(
      await ProxyServer.start(
        parseConfig({
          listen: '127.0.0.1:0',
          mode: 'ring',
          ring: { hash: 'md5', hashTag: '{}', sentinels: env.sentinelAddresses, sentinel: { failoverWaitMs: 15_000 }, nodes: NAMES.map((name) => ({ master: name })) },
          log: { level: 'silent' },
        }),
      ),
    );
  }
  // FCALL's library on every master (their replicas get it by replication).
  await (await connect(proxies[0])).call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const p of proxies) await p.close(200);
  await env?.stop();
}, 60_000);

test('kill -9 of a master: MULTI/EXEC, WATCH, EVAL, EVALSHA, FCALL, BLPOP and pipelines wait for the promotion through two proxies; errors only on the wire', async () => {
  // The script is healed by the proxy on the promoted replica (NOSCRIPT there).
  const sha = String(await (await connect(proxies[0])).script('LOAD', INCR_SCRIPT));
  const old = await groups().masterOf('shard1');
  const oldNode = groups().node(old);
  await groups().waitUntilWatched();

  const loads = proxies.map((p, i) => new KindsLoad(p, `p${i}`, sha, 'shard1'));
  try {
    await waitFor('every kind served before the kill', async () => loads.every((l) => l.succeededAfter(0).size === 8));
    const killedAt = Date.now();
    oldNode.kill('SIGKILL');
    await oldNode.waitForExit();
    const goneAt = Date.now();
    await groups().failoverFrom('shard1', old);
    const switchedAt = Date.now();
    // Every kind sent after the kill has been served, through both proxies.
    await waitFor('every kind served after the kill', async () => loads.every((l) => l.succeededAfter(goneAt).size === 8), 30_000);
    await Promise.all(loads.map((l) => l.stop()));

    const all = loads.flatMap((l) => l.outcomes);
    const errorsByKind: Record<string, number> = {};
    for (const o of all) if (o.error !== null) errorsByKind[o.kind] = (errorsByKind[o.kind] ?? 0) + 1;
    const longestWait: Record<string, number> = {};
    for (const o of all) if (o.sentAt >= killedAt) longestWait[o.kind] = Math.max(longestWait[o.kind] ?? 0, o.doneAt - o.sentAt);
    // Seen in the test's output: errors per kind, and how long each kind waited.
    // eslint-disable-next-line no-console
    console.log(`failover of shard1 in ${switchedAt - killedAt} ms; errors per kind ${JSON.stringify(errorsByKind)}; longest wait per kind (ms) ${JSON.stringify(longestWait)}`);
    for (const o of all.filter((x) => x.error !== null)) {
      // Sent before the master was gone, and saying it may have run.
      expect({ kind: o.kind, sentBeforeGone: o.sentAt <= goneAt, error: o.error }).toEqual({ kind: o.kind, sentBeforeGone: true, error: expect.stringMatching(ON_THE_WIRE) });
    }
    // At most the one request each client had in flight.
    expect(Math.max(0, ...Object.values(errorsByKind))).toBeLessThanOrEqual(2 * CLIENTS_PER_KIND);
    // And the requests did wait across the failover: some kind sent right after the kill was
    // answered after the promotion. From the kill on, not from goneAt: on a busy machine the
    // clients' errors (and so their next requests) may come before this process sees the exit.
    expect(all.some((o) => o.error === null && o.sentAt > killedAt && o.sentAt < goneAt + 500 && o.doneAt >= switchedAt - 200)).toBe(true);
  } finally {
    await Promise.all(loads.map((l) => l.stop()));
  }
}, 90_000);

/** When `sentinel` is first heard publishing on `channel` (a subscriber kept for afterAll). */
async function heardFrom(sentinel: { port: number }, channel: string): Promise<() => number | null> {
  const sub = new Redis({ port: sentinel.port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  clients.push(sub);
  await sub.connect();
  let at: number | null = null;
  sub.on('message', (ch: string) => {
    if (ch === channel) at ??= Date.now();
  });
  await sub.subscribe(channel);
  return () => at;
}

test('SENTINEL FAILOVER: every kind is held while the replica is promoted, no error, no write lost that the proxies could hold', async () => {
  const old = await groups().masterOf('shard2');
  await groups().waitUntilWatched();
  const sha = String(await (await connect(proxies[0])).script('LOAD', INCR_SCRIPT));
  // The leader (the sentinel asked) publishes +failover-state-send-slaveof-noone, on which the
  // proxies hold writes, then one of its ticks later (50-100 ms) sends SLAVEOF NO ONE and
  // publishes this: once it is heard here, the proxies (in this process, subscribed to the same
  // sentinel) have heard the first, so every write sent from then on is held.
  const promotionSent = await heardFrom(groups().sentinels[0], '+failover-state-wait-promotion');
  const loads = proxies.map((p, i) => new KindsLoad(p, `f${i}`, sha, 'shard2'));
  try {
    await waitFor('every kind served before the failover', async () => loads.every((l) => l.succeededAfter(0).size === 8));
    const askedAt = Date.now();
    expect(await groups().sentinels[0].command('SENTINEL', 'FAILOVER', 'shard2')).toBe('OK');
    await groups().failoverFrom('shard2', old);
    const switchedAt = Date.now();
    await waitFor('every kind served after the failover', async () => loads.every((l) => l.succeededAfter(switchedAt).size === 8), 30_000);
    await Promise.all(loads.map((l) => l.stop()));
    const all = loads.flatMap((l) => l.outcomes);
    expect(all.filter((o) => o.error !== null).map((o) => `${o.kind}: ${o.error}`)).toEqual([]);
    const knownAt = promotionSent();
    expect(knownAt).not.toBeNull();
    // Every acknowledged write is on the new master, but one the old master may have taken after
    // its replica left (sent before the proxies heard of the promotion: Redis' own window).
    const check = await connect(proxies[1]);
    const lost: string[] = [];
    for (const l of loads) {
      for (const [kind, { own, counter }] of Object.entries(MARKED)) {
        const acked = l.outcomes.filter((o) => o.kind === kind && o.error === null);
        const present = await Promise.all(acked.map((o) => check.exists(l.key(`${own}${o.i}`))));
        const missing = acked.filter((_, n) => present[n] === 0);
        for (const o of missing) {
          lost.push(`${kind} ${o.i} sent ${o.sentAt - (knownAt ?? 0)} ms after the promotion was known`);
          expect({ kind, i: o.i, sentBeforePromotionKnown: o.sentAt < (knownAt ?? 0) }).toEqual({ kind, i: o.i, sentBeforePromotionKnown: true });
        }
        // The counter agrees: one increment per acknowledged write on the new master. A pipeline's
        // SET and INCR are separate writes: either may be the one dropped, but only in a pipeline
        // answered after the failover was asked and sent before the proxies could hold it.
        const count = Number(await check.get(l.key(counter)));
        if (kind !== 'pipeline') expect([kind, count]).toEqual([kind, acked.length - missing.length]);
        else {
          const exposed = acked.filter((o) => o.doneAt >= askedAt && o.sentAt < (knownAt ?? 0)).length;
          expect([kind, count >= acked.length - exposed && count <= acked.length]).toEqual([kind, true]);
        }
      }
    }
    // Seen in the test's output: the acknowledged writes Redis dropped (usually none; under load, one per client at most).
    // eslint-disable-next-line no-console
    console.log(`SENTINEL FAILOVER of shard2: ${all.length} requests, acknowledged writes lost (sent before the proxies could hold them): ${lost.length === 0 ? 'none' : lost.join('; ')}`);
  } finally {
    await Promise.all(loads.map((l) => l.stop()));
  }
}, 90_000);
