// Ring servers managed by Redis Sentinel (SPEC 6), on real processes: three master+replica groups
// watched by three redis-sentinel processes (quorum 2, down-after 1 s), a ring proxy whose nodes are
// the three master names. The tests share the processes and run in order: each failover leaves the
// groups as the next test finds them.
import Redis from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { Ring } from '../../sharding/ring';
import { SentinelGroups } from '../helpers/sentinel-groups';
import { FailoverLoad, Outcome } from '../helpers/failover-load';

const NAMES = ['shard1', 'shard2', 'shard3'];
/** Where every key belongs: the ring of the master names (the addresses play no part in placement). */
const BY_NAME = new Ring({ hash: 'md5', hashTag: '{}', nodes: NAMES.map((name) => ({ name, addr: `${name}:1`, weight: 1 })) });
const shardOf = (key: string): string => BY_NAME.nodeOf(Buffer.from(key)).name;
const ON_THE_WIRE = /may or may not have run/;

let env: SentinelGroups | undefined;
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];
/** Measured, for the docs: printed once at the end. */
const measured: Record<string, unknown> = {};

function groups(): SentinelGroups {
  if (env === undefined) throw new Error('the sentinel groups did not start');
  return env;
}

async function startProxy(ring: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<ProxyServer> {
  const p = await ProxyServer.start(
    parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', sentinels: groups().sentinelAddresses, sentinel: { failoverWaitMs: 15_000 }, ...ring }, log: { level: 'silent' }, ...extra }),
  );
  proxies.push(p);
  return p;
}

function connect(p: ProxyServer): Redis {
  const c = new Redis({ port: p.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

/** Keys of each shard's master now, by pattern. */
async function keysByShard(pattern: string): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  for (const name of NAMES) {
    const master = groups().node(await groups().masterOf(name));
    out.set(name, new Set((await master.command('KEYS', pattern)) as string[]));
  }
  return out;
}

/** Every acknowledged key of `outcomes` is on its own shard's master and on no other one (except `mayLose`, counted). */
async function placedByName(pattern: string, outcomes: Outcome[], mayLose: (o: Outcome) => boolean = () => false): Promise<number> {
  const held = await keysByShard(pattern);
  let lost = 0;
  for (const o of outcomes.filter((x) => x.error === null)) {
    const own = shardOf(o.key);
    if (!held.get(own)!.has(o.key)) {
      if (!mayLose(o)) throw new Error(`${o.key} (acknowledged at ${o.sentAt + o.waitedMs}) is not on ${own}'s master`);
      lost++;
    }
    for (const other of NAMES) if (other !== own) expect([o.key, held.get(other)!.has(o.key)]).toEqual([o.key, false]);
  }
  return lost;
}

beforeAll(async () => {
  env = await SentinelGroups.start({ names: NAMES });
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const p of proxies) await p.close(200);
  await env?.stop();
  // eslint-disable-next-line no-console
  console.log(`sentinel failover measurements: ${JSON.stringify(measured, null, 2)}`);
}, 60_000);

test('a ring of Sentinel master names: each key on the master of its name, wherever the config guessed it', async () => {
  // Guess every master at its replica's address: the sentinels' answer wins.
  const p = await startProxy({ nodes: NAMES.map((name) => ({ master: name, addr: groups().group(name).nodes[1].address })) });
  const c = connect(p);
  const keys = Array.from({ length: 300 }, (_, i) => `place:${i}`);
  for (const k of keys) expect(await c.set(k, k)).toBe('OK');
  const held = await keysByShard('place:*');
  for (const k of keys) for (const name of NAMES) expect([k, name, held.get(name)!.has(k)]).toEqual([k, name, name === shardOf(k)]);
  expect(new Set(keys.map(shardOf)).size).toBe(3);
});

test('kill -9 of a master under write load: errors only for commands on the wire to it, then writes land on the promoted replica, no key moved', async () => {
  const p = proxies[0];
  const load = FailoverLoad.start(p.address.port, 'kill1', 12);
  await load.acked(300);
  const old = await groups().masterOf('shard1');
  const killedAt = Date.now();
  groups().node(old).kill('SIGKILL');
  const promoted = await groups().failoverFrom('shard1', old);
  const switchedAt = Date.now();
  // Writes to shard1 sent after the kill have landed: the proxy followed.
  await load.acked(100, (o) => shardOf(o.key) === 'shard1' && o.sentAt > killedAt);
  await load.acked(200);
  await load.stop();

  const errors = load.errors();
  // Only commands on the wire to the dead master: each client has one in flight, so at most one per client.
  expect(errors.length).toBeLessThanOrEqual(12);
  for (const e of errors) expect(e).toMatch(ON_THE_WIRE);
  for (const o of load.outcomes.filter((x) => x.error !== null)) expect(shardOf(o.key)).toBe('shard1');
  // Writes acknowledged by the dead master just before the kill may not have reached its replica (Redis replicates asynchronously).
  const lost = await placedByName('kill1:*', load.outcomes, (o) => o.sentAt < killedAt + 50 && shardOf(o.key) === 'shard1');
  const waited = load.outcomes.filter((o) => o.sentAt >= killedAt && o.error === null && shardOf(o.key) === 'shard1').map((o) => o.waitedMs);
  measured.killMaster = {
    sentinelFailoverMs: switchedAt - killedAt,
    writes: load.outcomes.length,
    errors: errors.length,
    lostUnreplicated: lost,
    longestWaitMs: Math.max(...waited),
    others: { longestWaitMs: Math.max(...load.outcomes.filter((o) => shardOf(o.key) !== 'shard1' && o.sentAt >= killedAt).map((o) => o.waitedMs)) },
  };
  expect(promoted).not.toBe(old);
}, 60_000);
