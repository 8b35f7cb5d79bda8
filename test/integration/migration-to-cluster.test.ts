// A live migration from a ring of 2 standalone redis-servers into a Redis Cluster of 3 masters
// (each with a replica), with two proxies serving a mixed load (SET, INCR, LPUSH, HINCRBY, APPEND,
// EXPIRE, DEL, a writing script, MULTI/EXEC, WATCH, BLPOP consumers, PUBLISH) through
// double-write, copy (with a manual failover of a cluster master under it), read-new, back to
// double-write, read-new, done and cleanup. The final state must equal what clients were told.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ProxyProcess, killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { RingModeConfig } from '../../config/schema';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { manualFailover } from '../helpers/cluster';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { verifyMoved } from '../../proxy/migration/tools/verify';
import { cleanupMoved } from '../../proxy/migration/tools/cleanup';
import { Expected, GROUPS, MixedLoad, checkState, keyOf, seed, walkPhases } from './migration-load';
import { Placement } from '../../sharding/migration';
import { ownerOfKey } from '../../sharding/key-space';
import { setLogLevel } from '../../proxy/telemetry/log';

let ring: StandaloneNodes | undefined;
let cluster: RedisCluster | undefined;

beforeAll(async () => {
  setLogLevel('silent');
  [ring, cluster] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start({ masters: 3, replicasPerMaster: 1 })]);
}, 90_000);

afterAll(async () => {
  killAllProxies();
  await Promise.all([ring?.stop(), cluster?.stop()]);
}, 30_000);

/** The ring of standalone nodes migrating into the cluster, as a config file would say it. */
function raw(): Record<string, unknown> {
  return {
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'fnv1a_64', nodes: ring!.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) },
    migration: { phase: 'double-write', to: { cluster: { seeds: [cluster!.masters[0].address] } } },
    log: { level: 'silent' },
  };
}

function config(): RingModeConfig {
  const cfg = parseConfig(raw());
  if (cfg.mode !== 'ring') throw new Error('expected a ring config');
  return cfg;
}


function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
}



test('ring of 2 into a cluster of 3 masters under load, with two proxies and a failover during copy', async () => {
  const cfg = config();
  const rawConfig = raw();
  const direct = new NodeClient(cfg);
  await direct.start();
  const placement = direct.placement();
  const proxies: { proxy: ProxyProcess; port: number }[] = [];
  const dir = tempDir('slotproxy-migration-');
  const clients: Redis[] = [];
  const seeders = new Map<string, Redis>();
  try {
    const expected = new Expected();
    const seeded = await seed((key) => {
      const addr = ownerOfKey(placement.from, Buffer.from(key)) as string;
      let c = seeders.get(addr);
      if (c === undefined) {
        c = connect(Number(addr.split(':')[1]));
        seeders.set(addr, c);
      }
      return c;
    }, expected);
    // Two proxy processes, each with its own event loop and connections.
    for (let i = 0; i < 2; i++) proxies.push(await startProxyProcess(rawConfig, dir));
    const admins = proxies.map((p) => connect(p.port));
    const loadClients = proxies.flatMap((p) => [connect(p.port), connect(p.port), connect(p.port)]);
    const consumers = proxies.map((p) => connect(p.port));
    clients.push(...admins, ...loadClients, ...consumers);
    const load = new MixedLoad(loadClients, expected, 42, consumers);

    const { copied, verified } = await walkPhases({
      admins: [admins[0], admins[1]],
      load,
      expected,
      // The copy runs while a master of the target cluster fails over to its replica.
      copy: () => copyHistory(direct, placement, { rate: 1500, batch: 100, restart: false, progress: false }),
      alongsideCopy: () => manualFailover(cluster!, 0),
      verify: () => verifyMoved(direct, placement.withPhase('read-new'), { ttlToleranceMs: 2000, batch: 500, show: 5, progress: false }),
    });

    const cleaned = await cleanupMoved(direct, placement.withPhase('done'), { batch: 500, progress: false });
    // Every key left the ring, and no bookkeeping is left on either side.
    for (const node of ring!.nodes) expect(await node.command('DBSIZE')).toBe(0);
    for (const m of cluster!.masters) expect(await m.command('KEYS', '__slotproxy*')).toEqual([]);
    let queues = 0;
    for (let i = 0; i < GROUPS.queue; i++) queues += await admins[0].exists(keyOf('queue', i));
    expect(await admins[0].dbsize()).toBe(seeded - expected.deleted.size + queues);
    // A cluster-mode proxy in front of the cluster alone now serves the same data.
    const after = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'cluster', cluster: { seeds: [cluster!.masters[0].address] }, log: { level: 'silent' } }));
    const viaCluster = connect(after.address.port);
    try {
      expect(await checkState(viaCluster, expected)).toEqual([]);
    } finally {
      viaCluster.disconnect();
      await after.close(200);
    }
    console.log(
      `ring -> cluster: ${seeded} keys before, ${expected.ops} acknowledged operations through 2 proxies; copy scanned ${copied.scanned}, ` +
        `copied ${copied.copied} (${copied.skippedNewer} already newer) across a failover; verify compared ${verified.compared}, ` +
        `${verified.differing} differ; cleanup deleted ${cleaned.deleted}; ${expected.ackedJobs.size} jobs, ${expected.poppedJobs.length} popped`,
    );
  } finally {
    for (const c of [...clients, ...seeders.values()]) c.disconnect();
    for (const p of proxies) p.proxy.kill('SIGTERM');
    await Promise.all(proxies.map((p) => p.proxy.exitCode()));
    fs.rmSync(dir, { recursive: true, force: true });
    direct.close();
  }
}, 120_000);

test('a placement into a cluster needs keys of one slot and one ring node for a multi-key command', async () => {
  const cfg = config();
  const direct = new NodeClient(cfg);
  await direct.start();
  const placement: Placement = direct.placement();
  const proxy = await ProxyServer.start(cfg);
  const c = connect(proxy.address.port);
  try {
    // Two keys on one ring node but in different slots: refused, as the cluster would refuse them.
    let a = 'x0';
    let b = '';
    for (let i = 1; b === ''; i++) {
      const k = `x${i}`;
      if (placement.from.shardOf(Buffer.from(k)) === placement.from.shardOf(Buffer.from(a))) b = k;
    }
    await expect(c.mset(a, '1', b, '2')).rejects.toThrow('CROSSSLOT');
    await expect(c.mset(a, '1', b, '2')).rejects.toThrow('CROSSSLOT');
    await expect(c.multi().set(a, '1').set(b, '2').exec()).rejects.toThrow('CROSSSLOT');
    expect(await c.mset(`{${a}}1`, '1', `{${a}}2`, '2')).toBe('OK');
    expect(await c.mget(`{${a}}1`, `{${a}}2`)).toEqual(['1', '2']);
    // Keys of two ring nodes are refused by the source's rules too: not counted as the target's.
    let other = '';
    for (let i = 1; other === ''; i++) if (placement.from.shardOf(Buffer.from(`y${i}`)) !== placement.from.shardOf(Buffer.from(a))) other = `y${i}`;
    await expect(c.mget(a, other)).rejects.toThrow('CROSSSLOT');
    // The operator sees what the cluster would refuse, by command, before read-new.
    const info = String(await c.info('proxy'));
    expect(/migration_target_refused:(\S+)/.exec(info)?.[1]).toBe('mset=2,set=1');
  } finally {
    c.disconnect();
    direct.close();
    await proxy.close(200);
  }
}, 30_000);
