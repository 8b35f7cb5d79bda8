// Where a double-written write's cost goes (issue 32): the write load of bench/migration.ts, one
// command at a time, with per request the CPU of the proxy (this process: the proxy runs in it)
// and of every redis-server (/proc/<pid>/stat), and each node's `INFO commandstats` (calls and
// microseconds per command). Interleaved rounds, medians; the machine is shared, so compare the
// targets within one run. Run: `npm run build && node dist/bench/migration-profile.js
// [--requests 100000] [--rounds 3] [--pipelines 1,16] [--tests set,incr] [--targets none,ring,cluster]`
// (also `ring-read-new`, `cluster-read-new`: the same proxy in read-new, whose writes converge).
// The replication targets also show a sustained ratio: requests over the load's time plus the
// time B then took to catch up (a follower that falls behind during the load pays it there).
// With `node --cpu-prof` the proxy's own profile comes with it. The floor targets (`floor`,
// `floor-ring`, `floor-cluster`, `floor-ring-versions`, `floor-cluster-versions`, `floor-ring-feed`,
// `floor-cluster-feed`, and `floor-ring-feed-versions`, `floor-cluster-feed-versions`: the feed's
// copies ordered by versions, one script per turn on each side) run bench/mux-floor.ts in
// a child process: the least a double-write costs on our connection model (ratios against `floor`).
// `ring-floor-follow`, `cluster-floor-follow`: slotproxy without a migration, beside it in this
// process bench/follow-floor.ts following both nodes of A into B: the least the replication carry
// (`ring-replication`, `cluster-replication`) costs (ratios against `none`, as the carry's).
// `--proxies N` starts N-1 more proxies of the same config beside the measured one (in this process,
// so their CPU counts too): a fleet whose other proxies hold change feeds while the load goes
// through one (issue 37 item 3: one copier per node of A for the fleet, copier-lease.ts).

import { execFile } from 'node:child_process';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { RedisNode } from '../cmd/sandbox/redis-node';
import { ProxyServer } from '../proxy/server/server';
import { RingModeConfig } from '../config/schema';
import { setLogLevel } from '../proxy/telemetry/log';
import { findRedisExecutable } from './children';
import { treeStats } from './process-stats';
import { answeringAfterA, followsLive, ringConfig } from './migration';
import { startProxy } from './targets';
import path from 'node:path';
import { NodeClient } from '../proxy/migration/tools/node-client';
import { FloorFollower } from './follow-floor';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

/** requests/s of one redis-benchmark test, `-c 50 -P pipeline` (the load of bench/migration.ts). */
function load(port: number, test: string, requests: number, pipeline: number): Promise<number> {
  const bin = findRedisExecutable('redis-benchmark');
  if (bin === null) throw new Error('redis-benchmark is not installed');
  const args = ['-p', String(port), '-t', test, '-n', String(requests), '-r', '100000', '-c', '50', '-P', String(pipeline), '-d', '32', '--csv'];
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: 600_000 }, (err, stdout) => {
      if (err !== null) return reject(err);
      resolve(Number(/"[A-Z]+","([\d.]+)"/.exec(stdout)?.[1] ?? NaN));
    });
  });
}

type Stats = Map<string, { calls: number; usec: number }>;

async function commandStats(node: RedisNode): Promise<Stats> {
  const text = String(await node.command('INFO', 'commandstats'));
  const out: Stats = new Map();
  for (const m of text.matchAll(/cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g)) out.set(m[1], { calls: Number(m[2]), usec: Number(m[3]) });
  // The node's socket reads and writes (how many requests each read brought): as pseudo-commands.
  const stats = String(await node.command('INFO', 'stats'));
  for (const [name, field] of [['(reads)', 'total_reads_processed'], ['(writes)', 'total_writes_processed']]) {
    const n = Number(new RegExp(`${field}:(\\d+)`).exec(stats)?.[1] ?? 0);
    out.set(name, { calls: n, usec: 0 });
  }
  return out;
}

interface Group {
  name: string;
  nodes: RedisNode[];
  pids: number[];
}

interface Sample {
  target: string;
  pipeline: number;
  test: string;
  rps: number;
  /** Requests over the load's time plus the time side B took to catch up after it: what a follower that lags cannot sustain. */
  sustained: number;
  /** CPU microseconds per request: the proxy, then each group of nodes. */
  cpu: Map<string, number>;
  /** Per group and command: calls and usec per request. */
  cmds: Map<string, Map<string, { calls: number; usec: number }>>;
}

/** The target a target's ratios are against: the mux floor's against `floor`, the rest against `none`. */
const baseName = (target: string): string => (target.startsWith('floor-') || target === 'floor' ? 'floor' : 'none');
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (n: number, digits = 1): string => n.toFixed(digits);

async function main(): Promise<void> {
  setLogLevel('silent');
  const requests = Number(arg('--requests', '100000'));
  const rounds = Number(arg('--rounds', '3'));
  const pipelines = arg('--pipelines', '1,16').split(',').map(Number);
  const tests = arg('--tests', 'set,incr').split(',');
  const wanted = arg('--targets', 'none,ring,cluster').split(',');
  const fleet = Number(arg('--proxies', '1'));
  const nodes = await StandaloneNodes.start(3);
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  try {
    const [a, b, c] = nodes.addresses;
    const pid = async (n: RedisNode): Promise<number> => Number(/process_id:(\d+)/.exec(String(await n.command('INFO', 'server')))?.[1]);
    const groups: Group[] = [
      { name: 'ring a, b', nodes: nodes.nodes.slice(0, 2), pids: [] },
      { name: 'ring c', nodes: nodes.nodes.slice(2), pids: [] },
      { name: 'cluster', nodes: cluster.masters, pids: [] },
    ];
    for (const g of groups) g.pids = await Promise.all(g.nodes.map(pid));
    const all = [...nodes.nodes, ...cluster.masters];
    const seed = cluster.masters[0].address;
    const targets: [string, Target][] = [
      ['none', ringConfig([a, b], null)],
      ['ring', ringConfig([a, b], { nodes: [a, b, c] })],
      ['cluster', ringConfig([a, b], { cluster: seed })],
      ['ring-read-new', ringConfig([a, b], { nodes: [a, b, c] }, 'read-new')],
      ['ring-replication', ringConfig([a, b], { nodes: [a, b, c] }, 'double-write', 'replication')],
      ['cluster-replication', ringConfig([a, b], { cluster: seed }, 'double-write', 'replication')],
      ['ring-replication-read-new', ringConfig([a, b], { nodes: [a, b, c] }, 'read-new', 'replication')],
      ['ring-floor-follow', { plain: ringConfig([a, b], null), follow: ringConfig([a, b], { nodes: [a, b, c] }) }],
      ['cluster-floor-follow', { plain: ringConfig([a, b], null), follow: ringConfig([a, b], { cluster: seed }) }],
      ['cluster-replication-read-new', ringConfig([a, b], { cluster: seed }, 'read-new', 'replication')],
      ['cluster-read-new', ringConfig([a, b], { cluster: seed }, 'read-new')],
      ['floor', [a, b]],
      ['floor-ring', [a, b, '--to-ring', c]],
      ['floor-cluster', [a, b, '--to-cluster', seed]],
      ['floor-ring-versions', [a, b, '--to-ring', c, '--versions']],
      ['floor-cluster-versions', [a, b, '--to-cluster', seed, '--versions']],
      ['floor-ring-feed', [a, b, '--to-ring', c, '--carry', 'feed']],
      ['floor-cluster-feed', [a, b, '--to-cluster', seed, '--carry', 'feed']],
      ['floor-ring-feed-versions', [a, b, '--to-ring', c, '--carry', 'feed', '--versions']],
      ['floor-cluster-feed-versions', [a, b, '--to-cluster', seed, '--carry', 'feed', '--versions']],
    ];
    const samples: Sample[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const pipeline of pipelines) {
        for (const test of tests) {
          for (const [target, config] of targets.filter(([t]) => wanted.includes(t))) {
            await Promise.all(all.map((n) => n.command('FLUSHALL')));
            const proxy = await startTarget(config, fleet);
            try {
              const n = pipeline === 1 ? requests / 4 : requests;
              await Promise.all(all.map((node) => node.command('CONFIG', 'RESETSTAT')));
              const cpu0 = groups.map((g) => g.pids.reduce((s, p) => s + treeStats(p).cpuSeconds, 0));
              const self0 = proxy.cpuSeconds();
              const rps = await load(proxy.port, test, n, pipeline);
              // The replication carry's lag counts: B must have caught up before the next round.
              let catchUpMs = 0;
              if (target.includes('replication') || target.includes('follow')) {
                const t0 = Date.now();
                await proxy.caughtUp();
                catchUpMs = Date.now() - t0;
                if (catchUpMs > 50) process.stderr.write(`${target} -P ${pipeline} ${test}: side B caught up ${catchUpMs} ms after the load\n`);
              }
              const sustained = n / (n / rps + catchUpMs / 1000);
              const cpu = new Map<string, number>([['proxy', ((proxy.cpuSeconds() - self0) * 1e6) / n]]);
              groups.forEach((g, i) => cpu.set(g.name, ((g.pids.reduce((s, p) => s + treeStats(p).cpuSeconds, 0) - cpu0[i]) * 1e6) / n));
              const cmds = new Map<string, Map<string, { calls: number; usec: number }>>();
              for (const g of groups) {
                const per = new Map<string, { calls: number; usec: number }>();
                for (const s of await Promise.all(g.nodes.map(commandStats))) {
                  for (const [name, v] of s) {
                    if (name === 'info' || name === 'config') continue;
                    const cur = per.get(name) ?? { calls: 0, usec: 0 };
                    per.set(name, { calls: cur.calls + v.calls / n, usec: cur.usec + v.usec / n });
                  }
                }
                cmds.set(g.name, per);
              }
              samples.push({ target, pipeline, test, rps, sustained, cpu, cmds });
              process.stderr.write(`round ${round + 1} -P ${pipeline} ${test} ${target}: ${Math.round(rps)} ops/s\n`);
            } finally {
              await proxy.close();
            }
          }
        }
      }
    }
    const out: string[] = [];
    for (const pipeline of pipelines) {
      for (const test of tests) {
        out.push(`### -P ${pipeline} ${test.toUpperCase()}`, '');
        out.push('| Target | ops/s | ratio | sustained ratio | CPU µs/request: proxy | ring a, b | ring c | cluster | total |', '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
        const baseOf = (target: string): number =>
          median(samples.filter((s) => s.pipeline === pipeline && s.test === test && s.target === baseName(target)).map((s) => s.rps));
        for (const [target] of targets) {
          const base = baseOf(target);
          const mine = samples.filter((s) => s.pipeline === pipeline && s.test === test && s.target === target);
          if (mine.length === 0) continue;
          const m = (k: string): number => median(mine.map((s) => s.cpu.get(k) ?? 0));
          const total = ['proxy', ...groups.map((g) => g.name)].reduce((s, k) => s + m(k), 0);
          out.push(`| ${target} | ${Math.round(median(mine.map((s) => s.rps)))} | ${fmt(median(mine.map((s) => s.rps)) / base, 2)} | ${fmt(median(mine.map((s) => s.sustained)) / base, 2)} | ${fmt(m('proxy'))} | ${fmt(m('ring a, b'))} | ${fmt(m('ring c'))} | ${fmt(m('cluster'))} | ${fmt(total)} |`);
        }
        out.push('', '| Target | Nodes | Command | calls/request | µs/request (commandstats) |', '| --- | --- | --- | ---: | ---: |');
        for (const [target] of targets) {
          const mine = samples.filter((s) => s.pipeline === pipeline && s.test === test && s.target === target);
          if (mine.length === 0) continue;
          for (const g of groups) {
            const names = new Set(mine.flatMap((s) => [...(s.cmds.get(g.name)?.keys() ?? [])]));
            for (const name of names) {
              const v = (k: 'calls' | 'usec'): number => median(mine.map((s) => s.cmds.get(g.name)?.get(name)?.[k] ?? 0));
              if (v('calls') < 0.001) continue;
              out.push(`| ${target} | ${g.name} | ${name} | ${v('calls').toPrecision(3)} | ${fmt(v('usec'), 2)} |`);
            }
          }
        }
        out.push('');
      }
    }
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await Promise.all([nodes.stop(), cluster.stop()]);
  }
}

/**
 * A target of the run: slotproxy in this process (a config), the floor in a child (its arguments
 * after PORT), or slotproxy without a migration in this process with bench/follow-floor.ts
 * following every node of its A into B (`follow`: the config whose migration.to is that B).
 */
type Target = RingModeConfig | string[] | { plain: RingModeConfig; follow: RingModeConfig };

interface Running {
  port: number;
  cpuSeconds(): number;
  /** Side B holds everything side A's nodes wrote (the replication carry and its floor). */
  caughtUp(): Promise<void>;
  close(): Promise<void>;
}

const selfCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function startTarget(target: Target, fleet: number): Promise<Running> {
  if ('plain' in target) {
    const layout = new NodeClient(target.follow);
    await layout.start();
    const to = layout.placement().to;
    layout.close();
    if (to === null) throw new Error('no side B');
    const proxy = await ProxyServer.start(target.plain);
    const followers = target.plain.ring.nodes.map((n) => new FloorFollower(n.addr ?? '', to));
    await Promise.all(followers.map((f) => f.caughtUp()));
    return {
      port: proxy.address.port,
      cpuSeconds: selfCpu,
      caughtUp: async () => void (await Promise.all(followers.map((f) => f.caughtUp()))),
      close: async () => {
        for (const f of followers) f.close();
        await proxy.close(500);
      },
    };
  }
  if (!Array.isArray(target)) {
    const proxy = await ProxyServer.start(target);
    const others: ProxyServer[] = [];
    for (let i = 1; i < fleet; i++) others.push(await ProxyServer.start(target));
    if (target.migration?.carry === 'replication') await followsLive(proxy.address.port);
    if (target.migration?.phase === 'double-write') await answeringAfterA(proxy.address.port);
    const port = proxy.address.port;
    return { port, cpuSeconds: selfCpu, caughtUp: () => followsLive(port, true), close: async () => void (await Promise.all([proxy, ...others].map((p) => p.close(500)))) };
  }
  const script = path.join(__dirname, 'mux-floor.js');
  const { proc, port } = await startProxy('mux-floor', async (p) => ({ bin: process.execPath, args: [script, String(p), ...target] }), async () => '');
  return { port, cpuSeconds: () => treeStats(proc.pid).cpuSeconds, caughtUp: async () => undefined, close: async () => void (await proc.stop()) };
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench/migration-profile: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
