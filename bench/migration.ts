// The migration's own benchmark: `migrate copy` throughput over a large key space (into a ring,
// and from a ring into a Redis Cluster), and what double-write costs a client's write load (the
// same redis-benchmark load through one proxy with no migration, then in double-write, into a
// ring and into a cluster). Run: `npm run build && node dist/bench/migration.js [--keys 1000000]
// [--requests 200000]`; it prints a Markdown section. `npm run bench` (not --quick) appends the
// same section to BENCHMARKS.md.

import { execFile } from 'node:child_process';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { parseConfig } from '../config/load';
import { RingModeConfig } from '../config/schema';
import { ProxyServer } from '../proxy/server/server';
import { NodeClient } from '../proxy/migration/tools/node-client';
import { sendCommand } from '../cmd/sandbox/resp-client';
import { CopyResult, copyMoved } from '../proxy/migration/tools/copy';
import { findRedisExecutable } from './children';
import { setLogLevel } from '../proxy/telemetry/log';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

type Target = { nodes: string[] } | { cluster: string } | null;

export function ringConfig(nodes: string[], to: Target, phase: 'double-write' | 'read-new' = 'double-write', carry: 'feeds' | 'replication' = 'feeds'): RingModeConfig {
  const named = (addrs: string[]) => addrs.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
  const migrationTo = to === null ? null : 'nodes' in to ? { nodes: named(to.nodes) } : { cluster: { seeds: [to.cluster] } };
  const cfg = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: named(nodes) },
    ...(migrationTo === null ? {} : { migration: { phase, carry, to: migrationTo } }),
    log: { level: 'silent' },
  });
  if (cfg.mode !== 'ring') throw new Error('expected a ring config');
  return cfg;
}

/** Under the replication carry: every node of A followed live, and (with `idle`) nothing left to apply. */
export async function followsLive(port: number, idle = false, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const info = String(await sendCommand(port, ['INFO', 'proxy']));
    const states = /migration_follows:(\S+)/.exec(info)?.[1] ?? '';
    const lags = /migration_follow_lag_bytes:(\S+)/.exec(info)?.[1] ?? '';
    const live = states !== '' && states.split(',').every((s) => s.endsWith('=live'));
    if (live && (!idle || lags.split(',').every((s) => s.endsWith('=0')))) return;
    if (Date.now() > until) throw new Error(`the proxy on port ${port} does not follow side A live: ${states} ${lags}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A proxy in double-write answers writes after side A alone once its fleet check found no proxy
 * reading from B (proxy/migration/read-barrier.ts, about a second after it starts): measure that.
 */
export async function answeringAfterA(port: number, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!/migration_write_answer:after-side-a/.test(String(await sendCommand(port, ['INFO', 'proxy'])))) {
    if (Date.now() > until) throw new Error(`the proxy on port ${port} still converges its writes after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** requests/s of redis-benchmark's SET and INCR against `port`, `-c 50 -P pipeline`. */
function writeLoad(port: number, requests: number, pipeline: number): Promise<{ set: number; incr: number }> {
  const bin = findRedisExecutable('redis-benchmark');
  if (bin === null) throw new Error('redis-benchmark is not installed');
  const args = ['-p', String(port), '-t', 'set,incr', '-n', String(requests), '-r', '100000', '-c', '50', '-P', String(pipeline), '-d', '32', '--csv'];
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: 600_000 }, (err, stdout) => {
      if (err !== null) return reject(err);
      const rps = (name: string): number => Number(new RegExp(`"${name}","([\\d.]+)"`).exec(stdout)?.[1] ?? NaN);
      resolve({ set: rps('SET'), incr: rps('INCR') });
    });
  });
}

/** Copies every key of one ring node holding `keys` keys of `size` bytes into `to`. */
async function copyRun(nodes: StandaloneNodes, keys: number, size: number, to: Target): Promise<CopyResult> {
  await Promise.all(nodes.nodes.map((n) => n.command('FLUSHALL')));
  await nodes.nodes[0].command('DEBUG', 'POPULATE', keys, 'key', size);
  const direct = new NodeClient(ringConfig([nodes.addresses[0]], to));
  try {
    await direct.start();
    return await copyMoved(direct, direct.placement(), { rate: 0, batch: 1000, restart: true, progress: process.stderr.isTTY === true });
  } finally {
    direct.close();
  }
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en');
const ROUNDS = 3;

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Runs every measurement on its own redis-servers and returns the Markdown section. */
export async function runMigrationBench(keys: number, requests: number): Promise<string> {
  setLogLevel('silent');
  // DEBUG POPULATE fills a node with a million keys in about a second.
  const nodes = await StandaloneNodes.start(3, { extraArgs: ['--enable-debug-command', 'yes'] });
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  try {
    const [a, b, c] = nodes.addresses;
    const intoCluster = { cluster: cluster.masters[0].address };
    const flushAll = (): Promise<unknown> => Promise.all([...nodes.nodes, ...cluster.masters].map((n) => n.command('FLUSHALL')));

    // Copy: ring A = one node holding every key; into a ring of that node and another (about
    // half the keys move), and into a cluster (every key moves).
    const intoRing = await copyRun(nodes, keys, 16, { nodes: [a, b] });
    await flushAll();
    const toCluster = await copyRun(nodes, keys, 100, intoCluster);
    await flushAll();

    // Double-write cost: the same write load without a migration, then double-writing.
    const targets = [
      ['ring a, b (no migration)', ringConfig([a, b], null)],
      ['double-write a, b -> a, b, c', ringConfig([a, b], { nodes: [a, b, c] })],
      ['double-write a, b -> cluster of 3', ringConfig([a, b], intoCluster)],
    ] as const;
    // Interleaved rounds (every target once per round, per shape), medians: the machine is noisy.
    const samples: { label: string; pipeline: number; set: number; incr: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const pipeline of [1, 16]) {
        for (const [label, config] of targets) {
          const proxy = await ProxyServer.start(config);
          try {
            if (config.migration !== undefined) await answeringAfterA(proxy.address.port);
            samples.push({ label, pipeline, ...(await writeLoad(proxy.address.port, pipeline === 1 ? requests / 4 : requests, pipeline)) });
          } finally {
            await proxy.close(500);
          }
          await flushAll();
        }
      }
    }
    const rows = [1, 16].flatMap((pipeline) =>
      targets.map(([label]) => {
        const mine = samples.filter((x) => x.pipeline === pipeline && x.label === label);
        return { label, pipeline, set: median(mine.map((x) => x.set)), incr: median(mine.map((x) => x.incr)) };
      }),
    );
    const copyLine = (what: string, r: CopyResult, size: number): string =>
      `- ${what}: ${fmt(r.scanned)} keys of ${size} bytes scanned, ${fmt(r.copied)} copied in ${r.seconds.toFixed(1)} s: **${fmt(r.copied / r.seconds)} keys/s copied** (${fmt(r.scanned / r.seconds)} scanned).`;
    const lines = [
      '## Migration',
      '',
      '`migrate copy` from one ring node (no --rate cap; SCAN batches of 1000; one snapshot and one apply script per moved key, pipelined):',
      '',
      copyLine('into a ring of that node and another (about half the keys move)', intoRing, 16),
      copyLine('into a Redis Cluster of 3 masters (every key moves)', toCluster, 100),
      '',
      `Double-write cost, redis-benchmark -c 50 -r 100000 -d 32 (${fmt(requests / 4)} requests per test at -P 1, ${fmt(requests)} at -P 16), one proxy, medians of ${ROUNDS} interleaved rounds; ratio = ops/s in double-write / ops/s without a migration:`,
      '',
      '| Shape | Target | SET ops/s | INCR ops/s | SET ratio | INCR ratio |',
      '| --- | --- | ---: | ---: | ---: | ---: |',
      ...rows.map((r) => {
        const base = rows.find((x) => x.pipeline === r.pipeline && x.label === targets[0][0]) ?? r;
        return `| -P ${r.pipeline} | ${r.label} | ${fmt(r.set)} | ${fmt(r.incr)} | ${(r.set / base.set).toFixed(2)} | ${(r.incr / base.incr).toFixed(2)} |`;
      }),
      '',
      'In double-write the writes of one turn to one node of A go as one MULTI, the writes, one snapshot script for all their moving keys, EXEC; then one apply script per node of B, before their replies (one more round trip, two Lua scripts per burst); each node\'s change feed checks every moving key once more ("only if changed"). Into a ring of 3 about a third of the keys move; into a cluster every key does. `node dist/bench/migration-profile.js` shows where the time goes (CPU per request of the proxy and the nodes, INFO commandstats).',
      '',
    ];
    return lines.join('\n');
  } finally {
    await Promise.all([nodes.stop(), cluster.stop()]);
  }
}

if (require.main === module) {
  runMigrationBench(arg('--keys', 1_000_000), arg('--requests', 200_000)).then(
    (text) => {
      process.stdout.write(text);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`bench/migration: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
