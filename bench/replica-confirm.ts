// What the follow's replica check costs (proxy/migration/follow-replicated.ts: a batch counts as
// applied on B once a replica of its master holds it, WAIT 1). The same redis-benchmark write load
// through one proxy in read-new (its replies wait until B holds the write) from a ring of 2 into a
// Redis Cluster of 3 masters without replicas (no WAIT: ROLE lists none) and into one with a
// replica per master (WAIT on every batch), on the replication carry; interleaved rounds, medians.
// Run: `npm run build && node dist/bench/replica-confirm.js [--requests 40000] [--rounds 3]`.
import { execFile } from 'node:child_process';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { ProxyServer } from '../proxy/server/server';
import { findRedisExecutable } from './children';
import { followsLive, ringConfig } from './migration';
import { setLogLevel } from '../proxy/telemetry/log';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
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

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  setLogLevel('silent');
  const requests = arg('--requests', 40_000);
  const rounds = arg('--rounds', 3);
  const [ring, bare, replicated] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start({ masters: 3, replicasPerMaster: 0 }), RedisCluster.start({ masters: 3, replicasPerMaster: 1 })]);
  try {
    const targets = [
      ['read-new into a cluster of 3, no replicas', bare],
      ['read-new into a cluster of 3, a replica each (WAIT 1 per batch)', replicated],
    ] as const;
    const flush = (): Promise<unknown> => Promise.all([...ring.nodes, ...bare.masters, ...replicated.masters].map((n) => n.command('FLUSHALL')));
    const samples: { label: string; pipeline: number; set: number; incr: number }[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const pipeline of [1, 16]) {
        for (const [label, cluster] of targets) {
          const proxy = await ProxyServer.start(ringConfig(ring.addresses, { cluster: cluster.masters[0].address }, 'read-new', 'replication'));
          try {
            await followsLive(proxy.address.port);
            samples.push({ label, pipeline, ...(await writeLoad(proxy.address.port, pipeline === 1 ? requests / 4 : requests, pipeline)) });
          } finally {
            await proxy.close(500);
          }
          await flush();
        }
      }
    }
    const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
    const lines = [
      `Replica check on B, redis-benchmark -c 50 -r 100000 -d 32 (${fmt(requests / 4)} requests at -P 1, ${fmt(requests)} at -P 16), one proxy in read-new on the replication carry, ring of 2 -> cluster of 3, medians of ${rounds} interleaved rounds:`,
      '',
      '| Shape | Target | SET ops/s | INCR ops/s |',
      '| --- | --- | --- | --- |',
      ...[1, 16].flatMap((pipeline) =>
        targets.map(([label]) => {
          const mine = samples.filter((x) => x.pipeline === pipeline && x.label === label);
          return `| -P ${pipeline} | ${label} | ${fmt(median(mine.map((x) => x.set)))} | ${fmt(median(mine.map((x) => x.incr)))} |`;
        }),
      ),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await Promise.all([ring.stop(), bare.stop(), replicated.stop()]);
  }
}

void main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
