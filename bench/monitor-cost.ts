// What MONITOR costs (issue 38, item 3): redis-benchmark SET and GET through slotproxy in cluster
// mode, at -P 1 and -P 16, for a baseline build (a checkout without MONITOR), this build with no
// monitor attached, and this build with one monitor attached (a client that reads and drops every
// line). The three run in turn within each round (in a rotating order), so their ratios come from
// the same minutes. Besides throughput, the proxy process's CPU time per request (user + system,
// from /proc), which depends less on what else the machine runs.
// Usage: node dist/bench/monitor-cost.js --baseline DIR [--requests N] [--rounds R]
//   DIR: a checkout whose dist/ is built (its dist/cmd/slotproxy.js is the baseline).
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { NODE_FLAGS } from '../cmd/node-flags';
import { ManagedProcess } from './children';
import { slotproxyClusterConfig, startProxy } from './targets';
import { TestName, invocations, redisBenchmarkBin, runInvocation } from './redis-benchmark';
import { treeStats } from './process-stats';

const TESTS: TestName[] = ['SET', 'GET'];
const CLIENTS = 50;
const PIPELINES = [1, 16];
const RUN_TIMEOUT_MS = 300_000;

function option(name: string, fallback: string | null): string {
  const i = process.argv.indexOf(name);
  const value = i < 0 ? fallback : process.argv[i + 1];
  if (value === null || value === undefined) {
    console.error('usage: node dist/bench/monitor-cost.js --baseline DIR [--requests N] [--rounds R]');
    process.exit(2);
  }
  return value;
}

/** A client in MONITOR mode that reads and drops every line, counting them. */
async function attachMonitor(port: number): Promise<{ lines: () => number; close: () => void }> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let lines = 0;
  socket.on('data', (chunk: Buffer) => {
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
  });
  socket.on('error', () => undefined);
  socket.write('MONITOR\r\n');
  return { lines: () => lines, close: () => socket.destroy() };
}

async function main(): Promise<void> {
  const baselineDir = path.resolve(option('--baseline', null));
  const requests = Number(option('--requests', '200000'));
  const rounds = Number(option('--rounds', '3'));
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-monitor-cost-'));
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
  const procs: ManagedProcess[] = [];
  try {
    const start = async (label: string, script: string): Promise<{ port: number; pid: number }> => {
      const started = await startProxy(
        label,
        async (port) => {
          const file = path.join(tmp, `${label}.yaml`);
          await fsp.writeFile(file, slotproxyClusterConfig(port, cluster.seeds));
          return { bin: process.execPath, args: [...NODE_FLAGS, script, 'start', '-c', file] };
        },
        async () => '',
      );
      procs.push(started.proc);
      return { port: started.port, pid: started.proc.pid };
    };
    const base = await start('baseline', path.join(baselineDir, 'dist', 'cmd', 'slotproxy.js'));
    const current = await start('this', path.resolve(__dirname, '..', 'cmd', 'slotproxy.js'));
    const bin = redisBenchmarkBin();
    const targets = [
      { label: 'baseline', ...base, monitor: false },
      { label: 'this, no monitor', ...current, monitor: false },
      { label: 'this, a monitor attached', ...current, monitor: true },
    ];
    // `pipeline|test|target`: one figure per round.
    const rps = new Map<string, number[]>();
    // `pipeline|target`: the proxy's CPU seconds and the requests, over every round and both tests.
    const cpu = new Map<string, { seconds: number; requests: number }>();
    for (let round = 1; round <= rounds; round++) {
      for (const pipeline of PIPELINES) {
        for (let k = 0; k < targets.length; k++) {
          const t = targets[(k + round) % targets.length];
          const monitor = t.monitor ? await attachMonitor(t.port) : null;
          const before = treeStats(t.pid).cpuSeconds;
          for (const inv of invocations(t.port, { clients: CLIENTS, pipeline }, TESTS, requests)) {
            const outcomes = await runInvocation(bin, inv, RUN_TIMEOUT_MS);
            for (const [test, outcome] of outcomes) {
              if (!outcome.ok) throw new Error(`${t.label} -P ${pipeline} ${test}: ${outcome.error}`);
              const key = `${pipeline}|${test}|${t.label}`;
              rps.set(key, [...(rps.get(key) ?? []), outcome.result.rps]);
            }
          }
          const used = cpu.get(`${pipeline}|${t.label}`) ?? { seconds: 0, requests: 0 };
          cpu.set(`${pipeline}|${t.label}`, { seconds: used.seconds + treeStats(t.pid).cpuSeconds - before, requests: used.requests + requests * TESTS.length });
          if (monitor !== null) {
            console.error(`round ${round} -P ${pipeline}: the monitor read ${monitor.lines()} lines`);
            monitor.close();
          }
        }
      }
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`| shape | test | ${targets.map((t) => t.label).join(' | ')} | no monitor / baseline | monitor / baseline |`);
    console.log(`| --- | --- | ${targets.map(() => '---:').join(' | ')} | ---: | ---: |`);
    for (const pipeline of PIPELINES) {
      for (const test of TESTS) {
        const m = targets.map((t) => median(rps.get(`${pipeline}|${test}|${t.label}`) ?? [0]));
        console.log(`| -c ${CLIENTS} -P ${pipeline} | ${test} | ${m.map((x) => Math.round(x).toLocaleString('en-US')).join(' | ')} | ${(m[1] / m[0]).toFixed(2)} | ${(m[2] / m[0]).toFixed(2)} |`);
      }
    }
    console.log('');
    console.log(`| shape | ${targets.map((t) => `${t.label}, CPU µs/request`).join(' | ')} | no monitor / baseline | monitor / baseline |`);
    console.log(`| --- | ${targets.map(() => '---:').join(' | ')} | ---: | ---: |`);
    for (const pipeline of PIPELINES) {
      const us = targets.map((t) => {
        const c = cpu.get(`${pipeline}|${t.label}`) ?? { seconds: 0, requests: 1 };
        return (c.seconds * 1e6) / c.requests;
      });
      console.log(`| -c ${CLIENTS} -P ${pipeline} | ${us.map((x) => x.toFixed(2)).join(' | ')} | ${(us[1] / us[0]).toFixed(2)} | ${(us[2] / us[0]).toFixed(2)} |`);
    }
    console.log(`(medians of ${rounds} rounds of ${requests} requests each; redis-benchmark -r 100000 -d 32)`);
  } finally {
    for (const p of procs) await p.stop();
    await cluster.stop();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
