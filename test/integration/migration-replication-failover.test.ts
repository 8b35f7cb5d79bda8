// The replication carry through failovers of side A's masters (real redis-server and redis-sentinel
// processes, a real slotproxy process): a Sentinel-managed ring of 2 moving into a Redis Cluster of
// 3 while clients write through the proxy. A planned SENTINEL FAILOVER and a kill -9 of a master:
// the follower moves to the promoted replica and continues with PSYNC <old replid> <applied + 1>
// (+CONTINUE through the replica's second replication id, no new full sync), and B ends equal to A's
// new masters with every acknowledged write. The follower shows in SENTINEL REPLICAS announced on
// port 0, is never promoted (not even when it is the only replica left), and SENTINEL RESET forgets it.
import fs from 'node:fs';
import Redis, { Cluster } from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { SentinelGroups } from '../helpers/sentinel-groups';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { eventually } from '../helpers/eventually';
import { NodeClients } from '../helpers/node-clients';

const NAMES = ['a1', 'a2'];

let groups: SentinelGroups | undefined;
let target: RedisCluster | undefined;
let proxy: { proxy: ProxyProcess; port: number } | undefined;
let dir = '';
const nodeClients = new NodeClients();
const clients: (Redis | Cluster)[] = [];

beforeAll(async () => {
  dir = tempDir('slotproxy-follow-failover-');
  [groups, target] = await Promise.all([SentinelGroups.start({ names: NAMES }), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
  const config = {
    mode: 'ring',
    ring: { hash: 'fnv1a_64', sentinels: groups.sentinelAddresses, nodes: NAMES.map((master) => ({ master })) },
    migration: { phase: 'double-write', carry: 'replication', to: { cluster: { seeds: [target.nodes[0].address] } } },
  };
  proxy = await startProxyProcess(config, dir);
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  nodeClients.closeAll();
  killAllProxies();
  await Promise.all([groups?.stop(), target?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

function open(address: string): Redis {
  return nodeClients.open(address);
}

function viaProxy(): Redis {
  const c = new Redis({ host: '127.0.0.1', port: proxy!.port, maxRetriesPerRequest: 0, disableClientInfo: true, commandTimeout: 20_000 });
  clients.push(c);
  return c;
}

function sideB(): Cluster {
  const c = new Cluster([{ host: '127.0.0.1', port: target!.nodes[0].port }], { redisOptions: { disableClientInfo: true } });
  clients.push(c);
  return c;
}

async function info(): Promise<string> {
  return String(await open(`127.0.0.1:${proxy!.port}`).info('proxy'));
}

function field(text: string, name: string): string {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1].trim() ?? '';
}

/** Until both current masters are followed live and B holds everything each has written. */
async function caughtUp(): Promise<string> {
  const masters = await Promise.all(NAMES.map((n) => groups!.masterOf(n)));
  await eventually(info, (t) => masters.every((m) => field(t, 'migration_follows').includes(`${m}=live`)), 60_000);
  const offsets = await Promise.all(masters.map(async (m) => Number(((await open(m).call('ROLE')) as unknown[])[1])));
  return eventually(info, (t) => {
    const applied = new Map(field(t, 'migration_follow_applied').split(',').map((e) => [e.slice(0, e.lastIndexOf('=')), Number(e.slice(e.lastIndexOf('=') + 1))]));
    return masters.every((m, i) => (applied.get(m) ?? -1) >= offsets[i]);
  }, 30_000);
}

/** Keys of A's current masters whose value differs on B, and keys on B that A does not hold. */
async function differences(): Promise<string[]> {
  const b = sideB();
  const out: string[] = [];
  const onA = new Set<string>();
  for (const name of NAMES) {
    const node = open(await groups!.masterOf(name));
    for (const key of await node.keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      onA.add(key);
      const type = await node.type(key);
      const read = (r: Redis | Cluster): Promise<unknown> => (type === 'list' ? r.lrange(key, 0, -1) : r.get(key));
      const [a, bv] = await Promise.all([read(node), read(b)]);
      if (JSON.stringify(a) !== JSON.stringify(bv)) out.push(`${key}: A ${JSON.stringify(a)} / B ${JSON.stringify(bv)}`);
    }
  }
  for (const n of target!.nodes) for (const key of await open(n.address).keys('*')) if (!key.startsWith('__slotproxy:') && !onA.has(key)) out.push(`${key}: on B only`);
  return out;
}

interface Load {
  stop(): Promise<void>;
  /** Unique keys whose SET was acknowledged, and each counter's acknowledged increments. */
  acked: Set<string>;
  incrs: Map<string, number>;
  errors: number;
  /** The first errors' messages. */
  messages: string[];
  done(): number;
}

/** Clients writing through the proxy: a unique key per SET, counters, lists. */
function writeLoad(clientsCount = 4): Load {
  const acked = new Set<string>();
  const incrs = new Map<string, number>();
  let running = true;
  let errors = 0;
  const messages: string[] = [];
  let n = 0;
  const loops = Array.from({ length: clientsCount }, async (_, w) => {
    const c = viaProxy();
    for (let i = 0; running; i++) {
      const key = `k:${w}:${i}`;
      const counter = `c:${(w * 7 + i) % 30}`;
      try {
        await c.set(key, `v${i}`);
        acked.add(key);
        await c.incr(counter);
        incrs.set(counter, (incrs.get(counter) ?? 0) + 1);
        await c.rpush(`l:${i % 5}`, `${w}:${i}`);
        n++;
      } catch (err) {
        if (messages.length < 5) messages.push(String(err));
        errors++; // an error is allowed (a request on the wire to a killed master); a wrong value is not
      }
    }
  });
  return { acked, incrs, messages, get errors() { return errors; }, done: () => n, stop: async () => { running = false; await Promise.all(loops); } };
}

/** Every acknowledged SET is on A's masters and on B; every counter holds at least its acknowledged increments. */
async function lostWrites(load: Load): Promise<string[]> {
  const b = sideB();
  const out: string[] = [];
  for (const key of load.acked) if ((await b.exists(key)) !== 1) out.push(`${key} acknowledged, not on B`);
  for (const [key, n] of load.incrs) if (Number(await b.get(key)) < n) out.push(`${key}: ${n} increments acknowledged, B holds ${await b.get(key)}`);
  return out;
}

/** The addresses whose records the follow of `node` continued from (+CONTINUE), from the proxy's log. */
function continuedFrom(node: string): string[] {
  return proxy!.proxy.log
    .split('\n')
    .filter((l) => l.includes('resumed (+CONTINUE)') && l.includes(`"node":"${node}"`))
    .map((l) => /"recordedAs":"([^"]+)"/.exec(l)?.[1] ?? '');
}

/** The follower as side A's master and Sentinel see it: a replica announced on port 0. */
async function followerSeen(name: string): Promise<void> {
  const master = await groups!.masterOf(name);
  const repl = String(await open(master).info('replication'));
  expect(repl).toMatch(/slave\d+:ip=127\.0\.0\.1,port=0,state=online/);
  const replicas = await eventually(
    async () => (await groups!.sentinels[0].command('SENTINEL', 'REPLICAS', name)) as unknown[],
    (r) => r.some((e) => Array.isArray(e) && e.includes('port') && e[e.indexOf('port') + 1] === '0'),
    20_000,
  );
  const entry = replicas.find((e) => Array.isArray(e) && e[e.indexOf('port') + 1] === '0') as string[];
  // Sentinel cannot reach port 0: the entry is down and disconnected, so never a candidate.
  expect(entry[entry.indexOf('flags') + 1]).toMatch(/disconnected/);
}

test('a planned SENTINEL FAILOVER mid-stream: the follower continues on the promoted replica with +CONTINUE, B exact', async () => {
  const env = groups!;
  const before = await caughtUp();
  expect(field(before, 'migration_follow_full_syncs')).toBe('2');
  const load = writeLoad();
  await eventually(async () => load.done(), (n) => n > 200, 20_000);
  await followerSeen('a1');
  const old = await env.masterOf('a1');
  await env.sentinels[0].command('SENTINEL', 'FAILOVER', 'a1');
  const promoted = await env.failoverFrom('a1', old);
  // Sentinel promoted the real replica, not the follower.
  expect(env.group('a1').nodes.map((n) => n.address)).toContain(promoted);
  await eventually(info, (t) => field(t, 'migration_follows').includes(`${promoted}=live`), 30_000);
  const mark = load.done();
  await eventually(async () => load.done(), (n) => n > mark + 200, 20_000);
  await load.stop();
  const after = await caughtUp();
  console.log(`planned failover ${old} -> ${promoted}: ${load.done()} rounds, ${load.errors} errors; ${field(after, 'migration_follows')}`);
  // Continued through the second replication id: the new master's follower made no full sync (the
  // counts keep the old master's stopped follow's, so they stay as they were).
  expect(field(after, 'migration_follow_full_syncs')).toBe(field(before, 'migration_follow_full_syncs'));
  expect(continuedFrom(promoted)).toEqual([old]);
  expect(load.errors).toBe(0); // the proxy held writes while Sentinel promoted
  expect(await differences()).toEqual([]);
  expect(await lostWrites(load)).toEqual([]);
  await followerSeen('a1');
}, 120_000);

test('kill -9 of a master mid-stream: the follower continues on the replica Sentinel promotes, B exact', async () => {
  const env = groups!;
  await caughtUp();
  const syncs = field(await info(), 'migration_follow_full_syncs');
  const load = writeLoad();
  await eventually(async () => load.done(), (n) => n > 200, 20_000);
  const old = await env.masterOf('a2');
  env.node(old).kill('SIGKILL');
  const promoted = await env.failoverFrom('a2', old);
  expect(env.group('a2').nodes.map((n) => n.address)).toContain(promoted);
  await eventually(info, (t) => field(t, 'migration_follows').includes(`${promoted}=live`), 30_000);
  const mark = load.done();
  await eventually(async () => load.done(), (n) => n > mark + 200, 20_000);
  await load.stop();
  const after = await caughtUp();
  console.log(`kill -9 ${old} -> ${promoted}: ${load.done()} rounds, ${load.errors} errors; ${field(after, 'migration_follows')}`);
  // The follower may have received from the killed master bytes the replica never got: then the
  // promoted node's history does not cover the follower's offset and one full sync is the right
  // answer. Otherwise it continues on the old master's records with no full sync.
  const fullSyncsNow = Number(field(after, 'migration_follow_full_syncs')) - Number(syncs); // counts never go back
  expect([0, 1]).toContain(fullSyncsNow);
  if (fullSyncsNow === 0) expect(continuedFrom(promoted)).toEqual([old]);
  // B is A's new master exactly; what the killed master acknowledged and never replicated is gone from both.
  expect(await differences()).toEqual([]);
  await followerSeen('a2');
  // The killed master comes back as a replica of the promoted one (Sentinel reconfigures it).
  await env.node(old).restart();
  await env.waitForRole(env.node(old), 'slave');
}, 120_000);

test('read-new: a planned SENTINEL FAILOVER while each write waits for B: none is refused, and reads behind pipelined writes see them', async () => {
  const env = groups!;
  await caughtUp();
  const admin = viaProxy();
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).toBe('OK');
  const load = writeLoad();
  // Pipelined writes (they do not wait for each other to reach B) with reads of them behind.
  const piped = viaProxy();
  const stale: string[] = [];
  let pipelining = true;
  let rounds = 0;
  const pipelines = (async () => {
    for (let r = 0; pipelining; r++, rounds++) {
      const p = piped.pipeline();
      for (let k = 0; k < 8; k++) p.set(`p:${k}`, `r${r}`);
      for (let k = 0; k < 8; k++) p.get(`p:${k}`);
      const replies = ((await p.exec()) ?? []).map(([err, v]) => (err === null ? v : String(err)));
      replies.forEach((v, i) => {
        if (v !== (i < 8 ? 'OK' : `r${r}`)) stale.push(`round ${r} reply ${i}: ${String(v)}`);
      });
    }
  })();
  await eventually(async () => load.done(), (n) => n > 200, 20_000);
  const old = await env.masterOf('a1');
  // B held back for the failover: writes answered by the old master still wait for B when the proxy
  // drops its follow, and the promoted master's follow must confirm them.
  for (const n of target!.nodes) await open(n.address).call('CLIENT', 'PAUSE', '2000', 'WRITE');
  await env.sentinels[0].command('SENTINEL', 'FAILOVER', 'a1');
  const promoted = await env.failoverFrom('a1', old);
  await eventually(info, (t) => field(t, 'migration_follows').includes(`${promoted}=live`), 30_000);
  const mark = load.done();
  await eventually(async () => load.done(), (n) => n > mark + 200, 20_000);
  pipelining = false;
  await Promise.all([load.stop(), pipelines]);
  console.log(`read-new, planned failover ${old} -> ${promoted}: ${load.done()} rounds and ${rounds} pipelines, ${load.errors} errors ${load.messages.join('; ')}`);
  expect(stale).toEqual([]);
  expect(load.errors).toBe(0);
  expect(await lostWrites(load)).toEqual([]);
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).toBe('OK');
  await caughtUp();
  expect(await differences()).toEqual([]);
}, 120_000);

test('Sentinel never promotes the follower, even as the only replica left; SENTINEL RESET forgets it', async () => {
  const env = groups!;
  await caughtUp();
  const name = 'a1';
  const master = await env.masterOf(name);
  const replica = env.group(name).nodes.find((n) => n.address !== master)!;
  await followerSeen(name);
  // The real replica down first (marked down), then the master: only the follower still replicates.
  // Whichever sentinel leads the failover announces that it found no replica to promote.
  const abort = Promise.race(
    env.sentinels.map(async (s) => {
      const sub = new Redis({ host: '127.0.0.1', port: s.port, disableClientInfo: true });
      clients.push(sub);
      await sub.subscribe('-failover-abort-no-good-slave');
      return new Promise<string>((resolve) => sub.on('message', (_ch, msg: string) => resolve(msg)));
    }),
  );
  replica.kill('SIGKILL');
  await eventually(
    async () => (await env.sentinels[0].command('SENTINEL', 'REPLICAS', name)) as unknown[],
    (r) => r.some((e) => Array.isArray(e) && e[e.indexOf('port') + 1] === String(replica.port) && /s_down/.test(String(e[e.indexOf('flags') + 1]))),
    20_000,
  );
  env.node(master).kill('SIGKILL');
  expect(await abort).toContain(name);
  // Asked to fail over, a sentinel answers that it has no replica to promote (INPROG while one of them tries).
  await eventually(() => env.sentinels[1].command('SENTINEL', 'FAILOVER', name).then(String, (e: Error) => e.message), (r) => /NOGOODSLAVE/.test(r), 20_000);
  expect(await env.masterOf(name)).toBe(master);

  // After the migration (the proxy gone), SENTINEL RESET drops the follower's entry for good.
  proxy!.proxy.kill('SIGTERM');
  await proxy!.proxy.exitCode();
  for (const s of env.sentinels) await s.command('SENTINEL', 'RESET', 'a2');
  await eventually(
    async () => (await env.sentinels[0].command('SENTINEL', 'REPLICAS', 'a2')) as unknown[],
    (r) => r.some((e) => Array.isArray(e) && /^slave$/.test(String(e[e.indexOf('flags') + 1]))) && !r.some((e) => Array.isArray(e) && e[e.indexOf('port') + 1] === '0'),
    // A reset sentinel learns the replicas again from the master's INFO, asked every 10 s.
    45_000,
  );
}, 120_000);
