// Ring servers managed by Redis Sentinel (SPEC 6), on real processes: three master+replica groups
// watched by three redis-sentinel processes (quorum 2, down-after 1 s), a ring proxy whose nodes are
// the three master names. The tests share the processes and run in order: each failover leaves the
// groups as the next test finds them.
import net from 'node:net';
import Redis from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { Ring } from '../../sharding/ring';
import { SentinelGroups, SentinelProcess } from '../helpers/sentinel-groups';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { FailoverLoad, Outcome } from '../helpers/failover-load';

const NAMES = ['shard1', 'shard2', 'shard3'];
/** Where every key belongs: the ring of the master names (the addresses play no part in placement). */
const BY_NAME = new Ring({ hash: 'md5', hashTag: '{}', nodes: NAMES.map((name) => ({ name, addr: `${name}:1`, weight: 1 })) });
const shardOf = (key: string): string => BY_NAME.nodeOf(Buffer.from(key)).name;
/** The errors of a command written to a connection that then failed: it may have run. */
const ON_THE_WIRE = /may or may not have run|unreachable \(Connection reset by peer\)/;

let env: SentinelGroups | undefined;
/** The first test's killed master, restarted: sentinel makes it a replica (checked by a later test). */
let oldMaster: { node: RedisNode; commands: string[]; back: Promise<void> } | null = null;
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

/** Each shard's master, as the sentinels say now. */
async function mastersNow(): Promise<Map<string, string>> {
  return new Map(await Promise.all(NAMES.map(async (n) => [n, await groups().masterOf(n)] as [string, string])));
}

/** Keys of each shard's master (`masters`, else as the sentinels say now), by pattern. */
async function keysByShard(pattern: string, masters?: Map<string, string>): Promise<Map<string, Set<string>>> {
  const out = new Map<string, Set<string>>();
  const at = masters ?? (await mastersNow());
  for (const name of NAMES) {
    const master = groups().node(at.get(name)!);
    out.set(name, new Set((await master.command('KEYS', pattern)) as string[]));
  }
  return out;
}

/** Every acknowledged key of `outcomes` is on its own shard's master and on no other one (except `mayLose`, counted). */
async function placedByName(pattern: string, outcomes: Outcome[], mayLose: (o: Outcome) => boolean = () => false, masters?: Map<string, string>): Promise<number> {
  const held = await keysByShard(pattern, masters);
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

/**
 * Every command `node` runs from now until its next reconfiguration (Sentinel's CLIENT KILL ends
 * MONITOR), as "ip:port command args..." lines.
 */
function monitor(node: RedisNode): string[] {
  const lines: string[] = [];
  const socket = net.connect({ host: node.host, port: node.port });
  socket.on('error', () => undefined);
  socket.write('MONITOR\r\n');
  let rest = '';
  socket.on('data', (chunk) => {
    rest += chunk.toString('latin1');
    const parts = rest.split('\r\n');
    rest = parts.pop() ?? '';
    // +1690000000.123456 [0 127.0.0.1:50000] "set" "k" "v"
    for (const line of parts) {
      const m = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
      if (m !== null) lines.push(`${m[1]} ${m[2]}`);
    }
  });
  socket.unref();
  return lines;
}

/** A load through `p` while `act` fails a master over; resolves with the load once writes to `shard` sent after the act have landed. */
async function underLoad(p: ProxyServer, prefix: string, shard: string, act: () => Promise<void>): Promise<{ load: FailoverLoad; actedAt: number; settledAt: number }> {
  const load = FailoverLoad.start(p.address.port, prefix, 12);
  try {
    await load.acked(150);
    const actedAt = Date.now();
    await act();
    const settledAt = Date.now();
    await load.acked(60, (o) => shardOf(o.key) === shard && o.sentAt > actedAt);
    await load.acked(100);
    return { load, actedAt, settledAt };
  } finally {
    await load.stop();
  }
}

/** What clients saw of a failover of `shard`: writes, errors, the longest wait of a write to it sent from `from` on. */
function seen(load: FailoverLoad, shard: string, from: number): Record<string, number> {
  const waits = load.outcomes.filter((o) => o.error === null && shardOf(o.key) === shard && o.sentAt >= from).map((o) => o.waitedMs);
  const others = load.outcomes.filter((o) => shardOf(o.key) !== shard && o.sentAt >= from).map((o) => o.waitedMs);
  return { writes: load.outcomes.length, errors: load.errors().length, longestWaitMs: Math.max(...waits), othersLongestWaitMs: Math.max(0, ...others) };
}

/** Only commands on the wire to a failed master got errors: at most one per client, all of its shard. */
function onlyOnTheWire(load: FailoverLoad, shard: string): void {
  const failed = load.outcomes.filter((o) => o.error !== null);
  // More than one per client: the errors themselves are printed (a count alone says nothing of why).
  expect(failed.length <= 12 ? [] : failed.map((o) => `${o.key} (sent at ${o.sentAt}): ${o.error}`)).toEqual([]);
  for (const o of failed) expect([o.key, shardOf(o.key), o.error]).toEqual([o.key, shard, expect.stringMatching(ON_THE_WIRE)]);
}

beforeAll(async () => {
  env = await SentinelGroups.start({ names: NAMES });
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
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
  onlyOnTheWire(load, 'shard1');
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
  // Back from the crash with no data, still calling itself master: Sentinel turns it into a replica.
  const node = groups().node(old);
  const restartedAt = Date.now();
  const restarted = node.restart();
  const back = restarted.then(() => groups().waitForRole(node, 'slave', 60_000)).then(() => void (measured.oldMasterReplicaAfterRestartMs = Date.now() - restartedAt));
  oldMaster = { node, commands: [], back };
  const o = oldMaster;
  void restarted.then(() => (o.commands = monitor(node)), () => undefined);
}, 60_000);

test('a sentinel killed: the others answer, and the next failover is followed', async () => {
  const p = proxies[0];
  const first = groups().sentinels[0];
  await first.kill();
  try {
    const old = await groups().masterOf('shard2');
    const { load, actedAt, settledAt } = await underLoad(p, 'kill2', 'shard2', async () => {
      groups().node(old).kill('SIGKILL');
      await groups().failoverFrom('shard2', old);
    });
    onlyOnTheWire(load, 'shard2');
    await placedByName('kill2:*', load.outcomes, (o) => o.sentAt < actedAt + 50 && shardOf(o.key) === 'shard2');
    measured.killMasterOneSentinelDown = { sentinelFailoverMs: settledAt - actedAt, ...seen(load, 'shard2', actedAt) };
    void groups().node(old).restart();
  } finally {
    await first.start();
  }
}, 60_000);

test('every sentinel down: the last known masters go on serving; back up, a manual failover (old master demoted, READONLY) is followed', async () => {
  const p = proxies[0];
  const masters = await mastersNow();
  await Promise.all(groups().sentinels.map((x) => x.kill()));
  try {
    const quiet = FailoverLoad.start(p.address.port, 'nosentinel', 4);
    try {
      await quiet.acked(300);
    } finally {
      await quiet.stop();
    }
    expect(quiet.errors()).toEqual([]);
    await placedByName('nosentinel:*', quiet.outcomes, undefined, masters);
  } finally {
    await Promise.all(groups().sentinels.map((x) => x.start()));
  }
  await groups().waitUntilWatched();
  // The proxy is subscribed again (it tries every 500 ms): it hears the promotion start.
  for (const deadline = Date.now() + 10_000; !/ sub=3 /.test(String(await groups().sentinels[1].command('CLIENT', 'LIST'))); ) {
    if (Date.now() > deadline) throw new Error('the proxy did not subscribe to the restarted sentinel again');
    await new Promise((r) => setTimeout(r, 50));
  }

  const old = await groups().masterOf('shard3');
  const { load, actedAt, settledAt } = await underLoad(p, 'manual', 'shard3', async () => {
    await failover(groups().sentinels[1], 'shard3');
    await groups().failoverFrom('shard3', old);
  });
  // Sentinel ends the demoted master's client connections (CLIENT KILL TYPE normal): what was on the wire there fails.
  onlyOnTheWire(load, 'shard3');
  // SENTINEL FAILOVER promotes the replica while the old master still takes writes, and drops what
  // it took when it makes it a replica. The proxy holds writes from the moment the promotion starts
  // (+failover-state-send-slaveof-noone), so only writes already on the wire then may be lost.
  const lost = await placedByName('manual:*', load.outcomes, (o) => o.sentAt < settledAt && shardOf(o.key) === 'shard3');
  expect(lost).toBeLessThanOrEqual(12);
  measured.manualFailover = { sentinelFailoverMs: settledAt - actedAt, ...seen(load, 'shard3', actedAt), lostBeforeDemotion: lost };
  // The demoted master refused nothing it got from the proxy as a replica, or it would have said READONLY to someone.
  const demoted = groups().node(old);
  await groups().waitForRole(demoted, 'slave');
  measured.manualFailover = { ...(measured.manualFailover as object), readonlyRefusalsOnDemoted: readonlyErrors(await demoted.info('errorstats')) };
}, 60_000);

/** SENTINEL FAILOVER, again while the sentinel has not yet seen a replica it may promote. */
async function failover(sentinel: SentinelProcess, name: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; ; ) {
    try {
      await sentinel.command('SENTINEL', 'FAILOVER', name);
      return;
    } catch (err) {
      if (Date.now() > deadline || !/NOGOODSLAVE|INPROG/.test(String(err))) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

function readonlyErrors(info: Map<string, string>): number {
  const m = /count=(\d+)/.exec(info.get('errorstat_READONLY') ?? '');
  return m === null ? 0 : Number(m[1]);
}

test('the killed master, back as a replica, got no write from the proxy', async () => {
  if (oldMaster === null) throw new Error('the first failover test did not run');
  const { node, back } = oldMaster;
  await back;
  // More writes to its shard, through the proxy: they reach it only through replication.
  const c = connect(proxies[0]);
  const keys = Array.from({ length: 200 }, (_, i) => `after:${i}`).filter((k) => shardOf(k) === 'shard1');
  for (const k of keys) expect(await c.set(k, k)).toBe('OK');
  const master = groups().node(await groups().masterOf('shard1'));
  expect(master.address).not.toBe(node.address);
  // While it called itself master (restart to conversion), no client ran a write on it.
  const writes = oldMaster.commands.filter((l) => / "(set|incr|del)" /i.test(l));
  expect(writes).toEqual([]);
  // Since, a write sent to it would have been refused with READONLY.
  expect(readonlyErrors(await node.info('errorstats'))).toBe(0);
  expect((await node.info('replication')).get('master_port')).toBe(String(master.port));
}, 90_000);

test('a grow migration (2 masters -> 3) across a failover of a master both rings share: every key where its names put it', async () => {
  // The first proxy is done; it would count as a proxy of ring A that never joined the migration.
  for (const p of proxies.splice(0)) await p.close(200);
  await groups().waitUntilWatched();
  const p = await startProxy({ nodes: [{ master: 'shard1' }, { master: 'shard2' }] }, { migration: { phase: 'double-write', to: { nodes: NAMES.map((n) => ({ master: n })) } } });
  const c = connect(p);
  const keys = Array.from({ length: 300 }, (_, i) => `grow:${i}`);
  for (const k of keys) expect(await c.set(k, '1')).toBe('OK');

  const old = await groups().masterOf('shard1');
  const { load, actedAt, settledAt } = await underLoad(p, 'growload', 'shard1', async () => {
    groups().node(old).kill('SIGKILL');
    await groups().failoverFrom('shard1', old);
  });
  measured.failoverDuringMigration = { sentinelFailoverMs: settledAt - actedAt, ...seen(load, 'shard1', actedAt) };
  // A converging write (double-write) waits for the failover as a plain one does: only writes on
  // the wire to the killed master failed (of its keys in ring A, which double-writes from there).
  const aOwner = new Ring({ hash: 'md5', hashTag: '{}', nodes: ['shard1', 'shard2'].map((name) => ({ name, addr: `${name}:1`, weight: 1 })) });
  const failed = load.outcomes.filter((x) => x.error !== null);
  expect(failed.length).toBeLessThanOrEqual(12);
  for (const o of failed) expect([o.key, aOwner.nodeOf(Buffer.from(o.key)).name, o.error]).toEqual([o.key, 'shard1', expect.stringMatching(ON_THE_WIRE)]);
  for (const k of keys) expect([k, await c.incr(k)]).toEqual([k, 2]);

  // The promoted master took writes before its change feed was up: it is re-walked before read-new.
  const admin = connect(p);
  const switchTo = async (phase: string): Promise<void> => {
    for (const deadline = Date.now() + 20_000; ; ) {
      const reply = await admin.call('PROXY', 'MIGRATION', 'PHASE', phase).catch((err: Error) => err.message);
      if (reply === 'OK') return;
      if (Date.now() > deadline) throw new Error(`${phase} refused: ${String(reply)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await switchTo('read-new');
  for (const k of keys) expect([k, await c.get(k)]).toEqual([k, '2']);
  await switchTo('done');
  const held = await keysByShard('grow:*');
  for (const k of keys) {
    expect([k, await c.get(k)]).toEqual([k, '2']);
    expect([k, held.get(shardOf(k))!.has(k)]).toEqual([k, true]);
  }
  // Writes the load made once the sentinels had named the new master are on ring B too.
  for (const o of load.outcomes.filter((x) => x.error === null && x.sentAt > settledAt + 200)) expect([o.key, await c.get(o.key)]).toEqual([o.key, o.key]);
}, 90_000);
