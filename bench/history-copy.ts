// The history copy's speed, three ways over the same nodes in one run: a ring of 2 standalone
// nodes holding N small keys into a Redis Cluster of 3 (B flushed between the ways):
//   naive   : pipelined SCAN + DUMP on A, RESTORE on B's owner (no versions, no bookkeeping)
//   copy    : `slotproxy migrate copy` (the versioned copy of the change-feed carry)
//   follow  : the replication carry's full sync (a proxy with migration.carry: replication, from
//             its start until every node's snapshot is restored on B)
//   floor   : bench/follow-floor.ts on every node of A at once (PSYNC, each entry RESTOREd as the
//             link reads it, nothing else): the least the replication carry's full sync costs
// Run: `npm run build && node dist/bench/history-copy.js [--keys 300000]`; prints a Markdown table.
import Redis from 'ioredis';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { ProxyServer } from '../proxy/server/server';
import { NodeClient } from '../proxy/migration/tools/node-client';
import { copyMoved } from '../proxy/migration/tools/copy';
import { setLogLevel } from '../proxy/telemetry/log';
import { ringConfig, followsLive } from './migration';
import { ownerOfKey } from '../sharding/key-space';
import { sendCommand } from '../cmd/sandbox/resp-client';
import { FloorFollower } from './follow-floor';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

function client(addr: string): Redis {
  const [host, port] = addr.split(':');
  return new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, enableAutoPipelining: false });
}

async function populate(addr: string, keys: number, prefix: string): Promise<void> {
  const c = client(addr);
  for (let i = 0; i < keys; i += 10_000) {
    const p = c.pipeline();
    for (let k = i; k < Math.min(keys, i + 10_000); k++) p.set(`${prefix}:${k}`, `value-${k}`);
    await p.exec();
  }
  c.disconnect();
}

/** Pipelined SCAN + DUMP + PTTL on each node of A, RESTORE REPLACE on the key's owner in B. */
async function naiveCopy(from: string[], owner: (key: Buffer) => string): Promise<number> {
  const targets = new Map<string, Redis>();
  let copied = 0;
  for (const a of from) {
    const src = client(a);
    let cursor = '0';
    do {
      const [next, keys] = await src.scanBuffer(cursor, 'COUNT', 1000);
      cursor = next.toString();
      const read = src.pipeline();
      for (const k of keys) read.dumpBuffer(k).pttl(k);
      const got = (await read.exec()) ?? [];
      const writes = new Map<string, ReturnType<Redis['pipeline']>>();
      keys.forEach((k, i) => {
        const dump = got[2 * i][1] as Buffer | null;
        const ttl = Number(got[2 * i + 1][1]);
        if (dump === null) return;
        const to = owner(k);
        let t = targets.get(to);
        if (t === undefined) targets.set(to, (t = client(to)));
        let p = writes.get(to);
        if (p === undefined) writes.set(to, (p = t.pipeline()));
        p.restore(k, ttl > 0 ? ttl : 0, dump, 'REPLACE');
        copied++;
      });
      await Promise.all([...writes.values()].map((p) => p.exec()));
    } while (cursor !== '0');
    src.disconnect();
  }
  for (const t of targets.values()) t.disconnect();
  return copied;
}

async function main(): Promise<void> {
  setLogLevel(process.env.BENCH_LOG ?? 'silent');
  const keys = arg('--keys', 300_000);
  const nodes = await StandaloneNodes.start(2);
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  const rows: string[] = [];
  try {
    const [a, b] = nodes.addresses;
    await Promise.all([populate(a, keys / 2, 'ka'), populate(b, keys / 2, 'kb')]);
    const flushB = async (): Promise<void> => void (await Promise.all(cluster.masters.map((m) => m.command('FLUSHALL'))));
    const feeds = ringConfig([a, b], { cluster: cluster.masters[0].address });
    const layout = new NodeClient(feeds);
    await layout.start();
    const placement = layout.placement();
    const to = placement.to;
    if (to === null) throw new Error('no side B');

    await flushB();
    let t0 = performance.now();
    const naive = await naiveCopy([a, b], (k) => ownerOfKey(to, k) ?? '');
    const naiveS = (performance.now() - t0) / 1000;
    rows.push(`| naive SCAN + DUMP + RESTORE | ${naive} | ${naiveS.toFixed(2)} | ${Math.round(naive / naiveS)} | 1.00x |`);

    await flushB();
    t0 = performance.now();
    const copy = await copyMoved(layout, placement, { rate: 0, batch: 1000, restart: true, progress: false });
    const copyS = (performance.now() - t0) / 1000;
    rows.push(`| migrate copy (versioned) | ${copy.copied} | ${copyS.toFixed(2)} | ${Math.round(copy.copied / copyS)} | ${(copy.copied / copyS / (naive / naiveS)).toFixed(2)}x |`);
    layout.close();

    await flushB();
    for (const n of nodes.nodes) await n.command('DEL', '__slotproxy:migration:versions', '__slotproxy:migration:digests', '__slotproxy:migration:copy');
    const base = ringConfig([a, b], { cluster: cluster.masters[0].address }, 'double-write', 'replication');
    const repl = process.env.BENCH_LOG === undefined ? base : { ...base, log: { ...base.log, level: 'info' as const } };
    t0 = performance.now();
    const proxy = await ProxyServer.start(repl);
    await followsLive(proxy.address.port, true, 600_000);
    const followS = (performance.now() - t0) / 1000;
    const info = String(await sendCommand(proxy.address.port, ['INFO', 'proxy']));
    const syncS = Math.max(...(/migration_follow_snapshot_ms:(\S+)/.exec(info)?.[1] ?? '').split(',').map((p) => Number(p.split('=')[1]))) / 1000;
    await proxy.close(500);
    rows.push(`| replication full sync (PSYNC to every snapshot restored, nodes in parallel) | ${naive} | ${syncS.toFixed(2)} | ${Math.round(naive / syncS)} | ${(naive / syncS / (naive / naiveS)).toFixed(2)}x |`);
    rows.push(`| the same, from the proxy's start (fleet registration, copier leases first) | ${naive} | ${followS.toFixed(2)} | ${Math.round(naive / followS)} | ${(naive / followS / (naive / naiveS)).toFixed(2)}x |`);

    await flushB();
    t0 = performance.now();
    const floors = [a, b].map((n) => new FloorFollower(n, to));
    await Promise.all(floors.map((f) => f.caughtUp()));
    const floorWallS = (performance.now() - t0) / 1000;
    const floorS = Math.max(...floors.map((f) => f.snapshotMs)) / 1000;
    const floorKeys = floors.reduce((n, f) => n + f.restored, 0);
    for (const f of floors) f.close();
    if (floorKeys !== naive) throw new Error(`the floor restored ${floorKeys} keys, the naive copy ${naive}`);
    rows.push(`| floor full sync (bench/follow-floor.ts: PSYNC to every entry RESTOREd, no spool, nodes in parallel) | ${floorKeys} | ${floorS.toFixed(2)} | ${Math.round(floorKeys / floorS)} | ${(floorKeys / floorS / (naive / naiveS)).toFixed(2)}x |`);
    rows.push(`| the same, from the followers' start | ${floorKeys} | ${floorWallS.toFixed(2)} | ${Math.round(floorKeys / floorWallS)} | ${(floorKeys / floorWallS / (naive / naiveS)).toFixed(2)}x |`);
  } finally {
    await cluster.stop();
    await nodes.stop();
  }
  process.stdout.write(`### History copy: ${keys} small keys, a ring of 2 into a Redis Cluster of 3\n\n| Way | keys | seconds | keys/s | vs naive |\n| --- | ---: | ---: | ---: | ---: |\n${rows.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench/history-copy: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
