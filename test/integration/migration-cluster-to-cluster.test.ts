// A live migration from one Redis Cluster (3 masters with replicas) to another, with two
// cluster-mode proxies serving a mixed load (SET, INCR, LPUSH, HINCRBY, APPEND, EXPIRE, DEL, a
// writing script, MULTI/EXEC, WATCH, BLPOP consumers, PUBLISH) through double-write (a source
// master fails over under it), copy (a target master fails over under it), read-new, back to
// double-write, read-new, done and cleanup. The final state must equal what clients were told.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { manualFailover } from '../helpers/cluster';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { verifyMoved } from '../../proxy/migration/tools/verify';
import { cleanupMoved } from '../../proxy/migration/tools/cleanup';
import { setLogLevel } from '../../proxy/telemetry/log';
import { readFleet } from '../../proxy/migration/fleet';
import { carriedToB, carryOf } from '../helpers/carried';
import { Expected, GROUPS, MixedLoad, checkQueues, checkState, keyOf, seed, walkPhases } from './migration-load';

let source: RedisCluster | undefined;
let target: RedisCluster | undefined;
let ring: StandaloneNodes | undefined;

beforeAll(async () => {
  setLogLevel('silent');
  // Twelve nodes share two cores with the proxies and the load: a longer node timeout keeps a
  // starved node from being taken for failed in the middle of the test.
  const opts = { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 5000 };
  [source, target, ring] = await Promise.all([RedisCluster.start(opts), RedisCluster.start(opts), StandaloneNodes.start(2)]);
}, 120_000);

afterAll(async () => {
  killAllProxies();
  await Promise.all([source?.stop(), target?.stop(), ring?.stop()]);
}, 30_000);

/** The source cluster, migrating into the target one or not, as a config file would say it. */
function raw(withMigration: boolean, carry?: 'feeds'): Record<string, unknown> {
  return {
    listen: '127.0.0.1:0',
    mode: 'cluster',
    // Rides out a cluster that is briefly down while one of its masters fails over.
    cluster: { seeds: [source!.masters[0].address], retryWindowMs: 15_000 },
    ...(withMigration ? { migration: { phase: 'double-write', ...(carry === undefined ? {} : { carry }), to: { cluster: { seeds: [target!.masters[0].address] } } } } : {}),
    log: { level: 'silent' },
  };
}

function clusterConfig(withMigration: boolean, carry?: 'feeds'): Config {
  return parseConfig(raw(withMigration, carry));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
}



test('cluster of 3 into another cluster of 3 under load, with failovers on both sides', async () => {
  const cfg = clusterConfig(true);
  const rawConfig = raw(true);
  const direct = new NodeClient(cfg);
  await direct.start();
  const placement = direct.placement();
  const proxies: { proxy: ProxyProcess; port: number }[] = [];
  const dir = tempDir('slotproxy-migration-');
  const clients: Redis[] = [];
  const seeder = await ProxyServer.start(clusterConfig(false));
  try {
    const expected = new Expected();
    const seedClient = connect(seeder.address.port);
    clients.push(seedClient);
    const seeded = await seed(() => seedClient, expected);
    // Two proxy processes, each with its own event loop and connections.
    for (let i = 0; i < 2; i++) proxies.push(await startProxyProcess(rawConfig, dir));
    const admins = proxies.map((p) => connect(p.port));
    const loadClients = proxies.flatMap((p) => [connect(p.port), connect(p.port), connect(p.port)]);
    const consumers = proxies.map((p) => connect(p.port));
    clients.push(...admins, ...loadClients, ...consumers);
    const load = new MixedLoad(loadClients, expected, 7, consumers);

    // Both proxies are registered on the source cluster's masters, where `migrate copy` and
    // `migrate phase` look for them.
    // A proxy registers right after it starts listening: read until the last one's name is there.
    const registered = proxies.map((p) => [`127.0.0.1:${p.port}`, 'double-write']).sort();
    const readRegistered = async (): Promise<string[][]> => (await readFleet((addr, args) => direct.call(addr, args), placement.from.masters())).map((r) => [r.addr, r.phase]);
    let fleet = await readRegistered();
    for (const until = Date.now() + 5000; fleet.length < registered.length && Date.now() < until; fleet = await readRegistered()) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(fleet).toEqual(registered);

    const { copied, verified } = await walkPhases({
      admins: [admins[0], admins[1]],
      load,
      expected,
      // A source master fails over while every write is double-written, a target master during the copy.
      beforeCopy: () => manualFailover(source!, 100),
      copy: () => copyHistory(direct, placement, { rate: 1500, batch: 100, restart: false, progress: false }),
      alongsideCopy: () => manualFailover(target!, 200),
      verify: () => verifyMoved(direct, placement.withPhase('read-new'), { ttlToleranceMs: 2000, batch: 500, show: 5, progress: false }),
    });

    const cleaned = await cleanupMoved(direct, placement.withPhase('done'), { batch: 500, progress: false });
    for (const m of source!.masters) expect(await m.command('DBSIZE')).toBe(0);
    for (const m of target!.masters) expect(await m.command('KEYS', '__slotproxy*')).toEqual([]);
    let queues = 0;
    for (let i = 0; i < GROUPS.queue; i++) queues += await admins[0].exists(keyOf('queue', i));
    expect(await admins[0].dbsize()).toBe(seeded - expected.deleted.size + queues);
    console.log(
      `cluster -> cluster: ${seeded} keys before, ${expected.ops} acknowledged operations through 2 proxies across a failover on each side; ` +
        `copy scanned ${copied.scanned}, copied ${copied.copied} (${copied.skippedNewer} already newer); verify compared ${verified.compared}, ` +
        `${verified.differing} differ; cleanup deleted ${cleaned.deleted}; ${expected.ackedJobs.size} jobs, ${expected.poppedJobs.length} popped`,
    );
  } finally {
    for (const c of clients) c.disconnect();
    for (const p of proxies) p.proxy.kill('SIGTERM');
    await Promise.all([...proxies.map((p) => p.proxy.exitCode()), seeder.close(500)]);
    fs.rmSync(dir, { recursive: true, force: true });
    direct.close();
  }
}, 150_000);

test('cluster of 3 into a ring of 2, one proxy process switched by SIGHUP, back and forth', async () => {
  const intoRing = (phase: string): Record<string, unknown> => ({
    ...raw(false),
    migration: { phase, to: { nodes: ring!.addresses.map((addr, i) => ({ name: `r${i}`, addr, weight: 1 })) } },
  });
  const direct = new NodeClient(parseConfig(intoRing('double-write')));
  await direct.start();
  const placement = direct.placement();
  const dir = tempDir('slotproxy-migration-');
  const clients: Redis[] = [];
  const seeder = await ProxyServer.start(clusterConfig(false));
  let started: { proxy: ProxyProcess; port: number; file: string } | undefined;
  try {
    await Promise.all(source!.masters.map((m) => m.command('FLUSHALL')));
    const expected = new Expected();
    const seedClient = connect(seeder.address.port);
    clients.push(seedClient);
    const seeded = await seed(() => seedClient, expected);
    started = await startProxyProcess(intoRing('double-write'), dir);
    const { proxy, port, file } = started;
    const admin = connect(port);
    const loadClients = [connect(port), connect(port)];
    const consumers = [connect(port)];
    clients.push(admin, ...loadClients, ...consumers);
    const load = new MixedLoad(loadClients, expected, 11, consumers);
    /** Rewrites the file with `phase` and reloads it, as an operator would. */
    const reload = async (phase: string): Promise<void> => {
      fs.writeFileSync(file, JSON.stringify({ ...intoRing(phase), listen: `127.0.0.1:${port}`, log: { level: 'info' } }));
      proxy.kill('SIGHUP');
      for (let i = 0; i < 200 && !String(await admin.call('PROXY', 'MIGRATION', 'STATUS')).startsWith(`phase:${phase}`); i++) await sleep(25);
      expect(String(await admin.call('PROXY', 'MIGRATION', 'STATUS'))).toMatch(new RegExp(`^phase:${phase}\\r\\nfrom_cluster:`));
    };

    load.start();
    await sleep(300);
    const copied = await copyHistory(direct, placement, { rate: 0, batch: 200, restart: true, progress: false });
    await reload('read-new');
    await sleep(300);
    await reload('double-write');
    await sleep(200);
    await reload('read-new');
    await sleep(300);
    await load.pause();
    expect(expected.errors).toEqual([]);
    const verified = await verifyMoved(direct, placement.withPhase('read-new'), { ttlToleranceMs: 2000, batch: 500, show: 5, progress: false });
    expect(verified.examples).toEqual([]);
    load.start();
    await sleep(200);
    await reload('done');
    await sleep(300);
    await load.pause();
    expect(expected.errors).toEqual([]);
    expect(await checkState(admin, expected)).toEqual([]);
    expect(await checkQueues(admin, expected)).toEqual([]);
    await cleanupMoved(direct, placement.withPhase('done'), { batch: 500, progress: false });
    for (const m of source!.masters) expect(await m.command('DBSIZE')).toBe(0);
    for (const n of ring!.nodes) expect(await n.command('KEYS', '__slotproxy*')).toEqual([]);
    let queues = 0;
    for (let i = 0; i < GROUPS.queue; i++) queues += await admin.exists(keyOf('queue', i));
    expect(await admin.dbsize()).toBe(seeded - expected.deleted.size + queues);
    console.log(`cluster -> ring: ${seeded} keys before, ${expected.ops} acknowledged operations; copy copied ${copied.copied}; verify compared ${verified.compared}, ${verified.differing} differ`);
  } finally {
    for (const c of clients) c.disconnect();
    started?.proxy.kill('SIGTERM');
    await Promise.all([started?.proxy.exitCode(), seeder.close(500)]);
    fs.rmSync(dir, { recursive: true, force: true });
    direct.close();
  }
}, 120_000);

/**
 * Moves `slot` of `c` from its master to another one, keys and all, as `redis-cli --cluster
 * reshard` does: IMPORTING/MIGRATING, MIGRATE every key (again while writes add some), then the
 * new owner everywhere.
 */
async function moveSlot(c: RedisCluster, slot: number): Promise<void> {
  const from = await c.masterFor(slot);
  const to = c.masters.find((m) => m !== from) as typeof from;
  const [fromId, toId] = await Promise.all([from, to].map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
  await to.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await from.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  for (;;) {
    const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
    if (keys.length === 0) break;
    await from.command('MIGRATE', to.host, to.port, '', 0, 5000, 'KEYS', ...keys);
  }
  for (const m of c.masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
}

// On both carries. On the replication carry B's node refuses the applies of keys it no longer
// serves: their states are carried to the slot's new owner (docs/migration.md); a reshard inside
// cluster A alone is covered in migration-replication-reshard.test.ts.
test.each(['replication', 'feeds'] as const)('a slot moving inside the source and inside the target under writes of its keys loses nothing (%s)', async (carry) => {
  const cfg = clusterConfig(true, carry === 'feeds' ? 'feeds' : undefined);
  const direct = new NodeClient(cfg);
  await direct.start();
  const placement = direct.placement();
  const proxy = await ProxyServer.start(cfg);
  const writers = [connect(proxy.address.port), connect(proxy.address.port)];
  try {
    await Promise.all([...source!.masters, ...target!.masters].map((m) => m.command('FLUSHALL')));
    const counter = '{moving-slot}counter';
    const list = '{moving-slot}list';
    const slot = placement.from.shardOf(Buffer.from(counter));
    let running = true;
    let increments = 0;
    let pushes = 0;
    const errors: string[] = [];
    const loops = writers.map(async (w, n) => {
      while (running) {
        try {
          if (n === 0) {
            await w.incr(counter);
            increments++;
          } else {
            await w.multi().rpush(list, 'x').incr(counter).exec();
            pushes++;
            increments++;
          }
        } catch (err) {
          errors.push(String(err));
        }
      }
    });
    await sleep(100);
    // The slot changes masters in the source (writes land there) and in the target (applies land there).
    await moveSlot(source!, slot);
    await moveSlot(target!, slot);
    await sleep(100);
    running = false;
    await Promise.all(loops);
    expect(errors).toEqual([]);
    // Answered after A in double-write: on the replication carry on B once A's streams carried it
    // (the source masters of now, the slot's new owner among them).
    if ((await carryOf(writers[0])) === 'replication') await carriedToB(source!.masters.map((m) => m.address));
    const verified = await verifyMoved(direct, placement, { ttlToleranceMs: 2000, batch: 500, show: 5, progress: false });
    expect(verified.examples).toEqual([]);
    const onTarget = await target!.masterFor(slot);
    expect(await onTarget.command('GET', counter)).toBe(String(increments));
    expect(await onTarget.command('LLEN', list)).toBe(pushes);
    console.log(`moving slot ${slot}: ${increments} increments and ${pushes} transactions kept across a reshard on each side`);
  } finally {
    for (const w of writers) w.disconnect();
    await proxy.close(200);
    direct.close();
  }
}, 60_000);
