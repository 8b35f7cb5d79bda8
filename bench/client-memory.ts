// What a client costs in memory (issue 32, part 2): slotproxy's RSS per client beside a bare Node
// server whose sockets each answered one command (bench/answered-floor.ts), in one run, rounds
// interleaved. Each client connects, sends one GET, reads its reply and goes idle; RSS is read once
// every reply is in and the process has settled. Then each client sends one GET a second ("active").
// Per client = (RSS with the clients - RSS before they came) / clients, RSS summed over the server's
// process tree.
// Run: `npm run build && node dist/bench/client-memory.js [--counts 1000,10000,50000] [--rounds 3] [--seconds 5]`.
// Up to ONE_PROCESS_MAX clients live in this process and each server is one process, as always.
// Above it, no one process can hold them (the open-file limit, `ulimit -Hn`, 20,000 where this was
// written, cannot be raised): the clients come from child processes (bench/client-swarm.ts), each
// from its own source address, and both servers run as the same number of Node cluster workers.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { parseInfo, sendCommand } from '../cmd/sandbox/resp-client';
import { NODE_FLAGS } from '../cmd/node-flags';
import { ManagedProcess } from './children';
import { IDLE_SAMPLE_AFTER_MS, startProxy } from './targets';
import { connectAll } from './client-cost';
import { RssSampler, processTree, treeStats } from './process-stats';

const GET = Buffer.from('*2\r\n$3\r\nGET\r\n$9\r\nbench:key\r\n');
const KIB = 1024;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The most clients measured as before: in this process, against a one-process server. */
const ONE_PROCESS_MAX = 19_000;
/** Clients per process once they are spread, below the limit with room for an uneven spread. */
const PER_PROCESS = 15_000;
/** Server processes (and client processes) for `n` clients: 1 up to ONE_PROCESS_MAX. */
export const processesFor = (n: number): number => (n <= ONE_PROCESS_MAX ? 1 : Math.ceil(n / PER_PROCESS));

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

interface Target {
  label: string;
  /** One server process, or `workers` cluster workers sharing the port. */
  start(workers: number): Promise<{ proc: ManagedProcess; port: number }>;
  /** Resolves once all `workers` workers accept clients (a PING answered only says one does). */
  allServing(proc: ManagedProcess, port: number, workers: number): Promise<void>;
}

interface Sample {
  idlePerClient: number;
  activePerClient: number;
  connected: number;
  /** Clients whose connection or first reply failed. */
  failed: number;
  /** Sockets each worker gained with the clients (empty with one server process). */
  perWorker: number[];
}

/** Clients connected and answered once; then 1 GET/s each until stopped. */
interface Clients {
  connected: number;
  failed: number;
  active(): void;
  stop(): Promise<void>;
}

/** `n` clients in this process (connected as bench/client-cost.ts connects them), each answered once. */
async function inProcessClients(port: number, n: number): Promise<Clients> {
  const all = await connectAll(port, n);
  await Promise.all(all.map((s) => new Promise<void>((resolve) => {
    s.once('data', () => resolve());
    s.once('close', () => resolve());
    s.write(GET);
  })));
  const sockets = all.filter((s) => !s.destroyed);
  const timers: NodeJS.Timeout[] = [];
  return {
    connected: sockets.length,
    failed: n - sockets.length,
    // Each client sends one GET a second, spread evenly over the second.
    active: () => sockets.forEach((s, i) => {
      s.on('data', () => undefined);
      timers.push(setTimeout(() => timers.push(setInterval(() => s.write(GET), 1000)), (i * 1000) / sockets.length));
    }),
    stop: async () => {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.destroy();
    },
  };
}

/** Until `proc`'s stdout has a line matching `re` (its match), or it exits, or `timeoutMs` passes. */
async function stdoutLine(proc: ManagedProcess, re: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = re.exec(proc.stdout);
    if (m !== null) return m;
    if (!proc.running) throw new Error(`${proc.description} ${proc.describeExit()} before printing ${re.source}:\n${proc.stderr.slice(-2000)}`);
    if (Date.now() >= deadline) throw new Error(`${proc.description}: no ${re.source} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** `n` clients over `processes` swarm processes, the i-th from 127.0.0.(2+i), started one after another. */
async function swarmClients(port: number, n: number, processes: number): Promise<Clients> {
  const script = path.join(__dirname, 'client-swarm.js');
  const swarm: ManagedProcess[] = [];
  const stop = async (): Promise<void> => {
    for (const p of swarm) p.child.stdin?.end('stop\n');
    await Promise.all(swarm.map(async (p) => {
      await Promise.race([p.exited, sleep(10_000)]);
      await p.stop();
    }));
    // What the swarm sent and got back over its life (the GET each and the active second): for the log.
    const done = swarm.map((p) => /^done (\d+) (\d+)$/m.exec(p.stdout)).filter((m): m is RegExpExecArray => m !== null);
    const total = (i: number): number => done.reduce((sum, m) => sum + Number(m[i]), 0);
    process.stderr.write(`  swarm of ${swarm.length}: ${total(1)} GETs sent, ${total(2)} reads with replies (${done.length} of them reported)\n`);
  };
  let connected = 0;
  try {
    for (let i = 0; i < processes; i++) {
      const k = Math.floor(((i + 1) * n) / processes) - Math.floor((i * n) / processes);
      const proc = ManagedProcess.start(process.execPath, [script, String(port), String(k), `127.0.0.${2 + i}`], { stdin: 'pipe' });
      swarm.push(proc);
      proc.child.stdin?.on('error', () => undefined); // EPIPE if it died: its exit is reported instead
      const ready = await stdoutLine(proc, /^ready (\d+) (\d+)$/m, 120_000);
      connected += Number(ready[1]);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { connected, failed: n - connected, active: () => swarm.forEach((p) => p.child.stdin?.write('active\n')), stop };
}

/** Open sockets of each process of `pid`'s tree, from /proc/PID/fd. */
function socketsPerProcess(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const p of processTree(pid)) {
    let n = 0;
    try {
      for (const fd of fs.readdirSync(`/proc/${p}/fd`)) {
        try {
          if (fs.readlinkSync(`/proc/${p}/fd/${fd}`).startsWith('socket:')) n++;
        } catch {
          // closed meanwhile
        }
      }
    } catch {
      continue; // exited
    }
    out.set(p, n);
  }
  return out;
}

/** RSS once it has stopped falling or rising by more than 1% a quarter second (at most 5 s). */
async function settledRss(pid: number): Promise<number> {
  let last = treeStats(pid).rssBytes;
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const now = treeStats(pid).rssBytes;
    if (Math.abs(now - last) < last * 0.01) return now;
    last = now;
  }
  return last;
}

/** One fresh server of `target` with `n` clients: idle and active cost per client. */
async function measure(target: Target, n: number, seconds: number): Promise<Sample> {
  const workers = processesFor(n);
  const { proc, port } = await target.start(workers);
  const pid = proc.pid;
  let clients: Clients | null = null;
  try {
    if (workers > 1) await target.allServing(proc, port, workers);
    await sleep(IDLE_SAMPLE_AFTER_MS);
    const before = await settledRss(pid);
    const socketsBefore = workers > 1 ? socketsPerProcess(pid) : null;
    clients = workers > 1 ? await swarmClients(port, n, workers) : await inProcessClients(port, n);
    const idle = await settledRss(pid);
    // Sockets each worker gained: how the primary spread the clients.
    const perWorker: number[] = [];
    if (socketsBefore !== null) for (const [p, count] of socketsPerProcess(pid)) if (p !== pid) perWorker.push(count - (socketsBefore.get(p) ?? 0));
    // Each client sends one GET a second, spread evenly over the second; RSS peak sampled meanwhile.
    const sampler = new RssSampler(pid);
    clients.active();
    await sleep(seconds * 1000);
    const active = sampler.stop();
    const { connected, failed } = clients;
    await clients.stop();
    clients = null;
    const per = Math.max(1, connected);
    return { idlePerClient: (idle - before) / per, activePerClient: (active - before) / per, connected, failed, perWorker };
  } finally {
    await clients?.stop();
    await proc.stop();
  }
}

/** slotproxy's workers: INFO proxy on fresh connections (the primary hands them round) until W proxy_process_ids answered. */
async function slotproxyWorkersServing(port: number, workers: number): Promise<void> {
  const seen = new Set<string>();
  const deadline = Date.now() + 60_000;
  while (seen.size < workers) {
    if (Date.now() >= deadline) throw new Error(`slotproxy --workers ${workers}: only ${seen.size} workers answered INFO within 60 s`);
    try {
      const info = await sendCommand(port, ['INFO', 'proxy'], { timeoutMs: 2_000 });
      if (typeof info === 'string') seen.add(parseInfo(info).get('proxy_process_id') ?? '');
    } catch {
      await sleep(100);
    }
  }
}

/** No flag with one process, so 1,000 and 10,000 run the command they always ran. */
const workersFlag = (workers: number): string[] => (workers > 1 ? ['--workers', String(workers)] : []);

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Every count and target, rounds interleaved; returns the Markdown section. */
export async function runClientMemoryBench(counts: readonly number[], rounds: number, seconds: number): Promise<string> {
  const nodes = await StandaloneNodes.start(1);
  const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-client-memory-'));
  const dist = path.join(__dirname, '..');
  const targets: Target[] = [
    {
      label: 'Node floor (answered once)',
      start: (workers) =>
        startProxy('answered floor', async (port) => ({ bin: process.execPath, args: [...NODE_FLAGS, path.join(dist, 'bench', 'answered-floor.js'), String(port), ...workersFlag(workers)] }), async () => ''),
      allServing: async (proc) => {
        await stdoutLine(proc, /^workers listening/m, 60_000);
      },
    },
    {
      label: 'slotproxy ring',
      start: (workers) =>
        startProxy('slotproxy', async (port) => {
          const file = path.join(tmp, `ring-${port}.yaml`);
          const text = ['listen: 127.0.0.1:' + String(port), 'mode: ring', 'ring:', '  nodes:', `    - { name: a, addr: ${nodes.addresses[0]}, weight: 1 }`, 'limits:', '  maxClients: 100000', 'log:', '  level: warn', ''].join('\n');
          await fsp.writeFile(file, text);
          return { bin: process.execPath, args: [...NODE_FLAGS, path.join(dist, 'cmd', 'slotproxy.js'), 'start', '-c', file, ...workersFlag(workers)] };
        }, async () => ''),
      allServing: (_proc, port, workers) => slotproxyWorkersServing(port, workers),
    },
  ];
  const samples = new Map<string, Sample[]>();
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const n of counts) {
        for (const t of targets) {
          const s = await measure(t, n, seconds);
          const spread = s.perWorker.length === 0 ? '' : `, per worker ${s.perWorker.join('/')}`;
          process.stderr.write(`[round ${round}] ${t.label} ${n} clients, ${processesFor(n)} server process(es): idle ${(s.idlePerClient / KIB).toFixed(2)} KiB, active ${(s.activePerClient / KIB).toFixed(2)} KiB per client (${s.connected} connected, ${s.failed} failed${spread})\n`);
          const key = `${t.label}|${n}`;
          samples.set(key, [...(samples.get(key) ?? []), s]);
        }
      }
    }
  } finally {
    await nodes.stop();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
  const lines = ['| Clients | Target | Server processes | Connected (fewest of the rounds) | Per idle client (KiB) | Per active client, 1 GET/s (KiB) | Idle ratio to the floor |', '| ---: | --- | ---: | ---: | ---: | ---: | ---: |'];
  for (const n of counts) {
    const floorIdle = median((samples.get(`${targets[0].label}|${n}`) ?? []).map((s) => s.idlePerClient));
    for (const t of targets) {
      const ss = samples.get(`${t.label}|${n}`) ?? [];
      const idle = median(ss.map((s) => s.idlePerClient));
      const active = median(ss.map((s) => s.activePerClient));
      const connected = Math.min(...ss.map((s) => s.connected));
      lines.push(`| ${n.toLocaleString('en')} | ${t.label} | ${processesFor(n)} | ${connected.toLocaleString('en')} | ${(idle / KIB).toFixed(2)} | ${(active / KIB).toFixed(2)} | ${(idle / floorIdle).toFixed(2)}x |`);
    }
  }
  return [
    '## What a client costs',
    '',
    `slotproxy (ring mode, one node) beside a bare Node server whose sockets each answered one command (bench/answered-floor.ts), both run with slotproxy's V8 flags. Each client connects, sends one \`GET\`, reads its reply and stays connected (idle); then each sends one \`GET\` a second for ${seconds} s (active, RSS peak). Per client = (RSS with the clients - RSS before) / clients connected, RSS summed over the server's processes. Medians of ${rounds} interleaved rounds, a fresh server per measurement.`,
    '',
    processesText(counts, targets, samples),
    '',
    ...lines,
    '',
  ].join('\n');
}

/** Which counts ran on one process and which on several, why, and how the clients spread over the workers. */
function processesText(counts: readonly number[], targets: readonly Target[], samples: Map<string, Sample[]>): string {
  const list = (ns: readonly number[]): string => ns.map((n) => n.toLocaleString('en')).join(', ');
  const single = counts.filter((n) => processesFor(n) === 1);
  const split = counts.filter((n) => processesFor(n) > 1);
  const parts: string[] = [];
  if (single.length > 0) parts.push(`At ${list(single)} clients: one server process each, the clients in the bench process.`);
  if (split.length === 0) return parts.join(' ');
  let limits = 'unknown';
  try {
    limits = execFileSync('sh', ['-c', 'echo "$(ulimit -Sn) soft, $(ulimit -Hn) hard"'], { encoding: 'utf8' }).trim();
  } catch {
    // no sh: leave it unknown
  }
  parts.push(
    `At ${list(split)} clients no one process can hold the sockets (open files per process here: ${limits}, and the hard limit cannot be raised; one source address also has only about 28,000 ephemeral ports toward one destination), so both servers ran as the same number W of Node cluster workers sharing the port, W = ceil(clients / ${PER_PROCESS.toLocaleString('en')}) (${split.map((n) => `W = ${processesFor(n)} at ${n.toLocaleString('en')}`).join(', ')}): slotproxy with \`--workers W\`, the floor with \`--workers W\` (node:cluster as cmd/workers.ts, Node's default round-robin hand-off by the primary). RSS is summed over the primary and its workers. The clients came from W processes (bench/client-swarm.ts), each from its own source address (127.0.0.2, 127.0.0.3, ...).`,
  );
  for (const n of split) {
    const spread = targets.map((t) => `${t.label} ${(samples.get(`${t.label}|${n}`) ?? []).map((s) => s.perWorker.join('/')).join(', ')}`);
    parts.push(`Clients per worker at ${n.toLocaleString('en')} (sockets each worker gained, one group per round): ${spread.join('; ')}.`);
  }
  return parts.join(' ');
}

if (require.main === module) {
  const counts = arg('--counts', '1000,10000').split(',').map(Number);
  runClientMemoryBench(counts, Number(arg('--rounds', '3')), Number(arg('--seconds', '5'))).then(
    (text) => {
      process.stdout.write(text);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`bench/client-memory: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
