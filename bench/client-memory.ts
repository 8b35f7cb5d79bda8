// What a client costs in memory (issue 32, part 2): slotproxy's RSS per client beside a bare Node
// server whose sockets each answered one command (bench/answered-floor.ts), in one run, rounds
// interleaved. Each client connects, sends one GET, reads its reply and goes idle; RSS is read once
// every reply is in and the process has settled. Then each client sends one GET a second ("active").
// Per client = (RSS with the clients - RSS before they came) / clients.
// Run: `npm run build && node dist/bench/client-memory.js [--counts 1000,10000] [--rounds 3] [--seconds 5]`.
// The clients live in this process, so a count is bounded by its open-file limit (`ulimit -n`).

import net from 'node:net';
import os from 'node:os';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { NODE_FLAGS } from '../cmd/node-flags';
import { ManagedProcess } from './children';
import { startProxy } from './targets';
import { connectAll } from './client-cost';
import { RssSampler, treeStats } from './process-stats';

const GET = Buffer.from('*2\r\n$3\r\nGET\r\n$9\r\nbench:key\r\n');
const KIB = 1024;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : process.argv[i + 1];
}

interface Target {
  label: string;
  start(): Promise<{ proc: ManagedProcess; port: number }>;
}

interface Sample {
  idlePerClient: number;
  activePerClient: number;
  connected: number;
}

/** `n` clients (connected as bench/client-cost.ts connects them); each sends one GET and reads its reply. */
async function connectAndServeOnce(port: number, n: number): Promise<net.Socket[]> {
  const sockets = await connectAll(port, n);
  await Promise.all(sockets.map((s) => new Promise<void>((resolve) => {
    s.once('data', () => resolve());
    s.once('close', () => resolve());
    s.write(GET);
  })));
  return sockets.filter((s) => !s.destroyed);
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

/** One fresh process of `target` with `n` clients: idle and active cost per client. */
async function measure(target: Target, n: number, seconds: number): Promise<Sample> {
  const { proc, port } = await target.start();
  const pid = proc.child.pid ?? 0;
  try {
    const before = await settledRss(pid);
    const sockets = await connectAndServeOnce(port, n);
    const idle = await settledRss(pid);
    // Each client sends one GET a second, spread evenly over the second; RSS peak sampled meanwhile.
    const sampler = new RssSampler(pid);
    const timers: NodeJS.Timeout[] = [];
    sockets.forEach((s, i) => {
      s.on('data', () => undefined);
      timers.push(setTimeout(() => timers.push(setInterval(() => s.write(GET), 1000)), (i * 1000) / sockets.length));
    });
    await sleep(seconds * 1000);
    for (const t of timers) clearTimeout(t);
    const active = sampler.stop();
    for (const s of sockets) s.destroy();
    const connected = Math.max(1, sockets.length);
    return { idlePerClient: (idle - before) / connected, activePerClient: (active - before) / connected, connected: sockets.length };
  } finally {
    await proc.stop();
  }
}

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
      start: () => startProxy('answered floor', async (port) => ({ bin: process.execPath, args: [...NODE_FLAGS, path.join(dist, 'bench', 'answered-floor.js'), String(port)] }), async () => ''),
    },
    {
      label: 'slotproxy ring',
      start: () =>
        startProxy('slotproxy', async (port) => {
          const file = path.join(tmp, `ring-${port}.yaml`);
          const text = ['listen: 127.0.0.1:' + String(port), 'mode: ring', 'ring:', '  nodes:', `    - { name: a, addr: ${nodes.addresses[0]}, weight: 1 }`, 'limits:', '  maxClients: 100000', 'log:', '  level: warn', ''].join('\n');
          await fsp.writeFile(file, text);
          return { bin: process.execPath, args: [...NODE_FLAGS, path.join(dist, 'cmd', 'slotproxy.js'), 'start', '-c', file] };
        }, async () => ''),
    },
  ];
  const samples = new Map<string, Sample[]>();
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const n of counts) {
        for (const t of targets) {
          const s = await measure(t, n, seconds);
          process.stderr.write(`[round ${round}] ${t.label} ${n} clients: idle ${(s.idlePerClient / KIB).toFixed(2)} KiB, active ${(s.activePerClient / KIB).toFixed(2)} KiB per client (${s.connected} connected)\n`);
          const key = `${t.label}|${n}`;
          samples.set(key, [...(samples.get(key) ?? []), s]);
        }
      }
    }
  } finally {
    await nodes.stop();
    await fsp.rm(tmp, { recursive: true, force: true });
  }
  const lines = ['| Clients | Target | Per idle client (KiB) | Per active client, 1 GET/s (KiB) | Idle ratio to the floor |', '| ---: | --- | ---: | ---: | ---: |'];
  for (const n of counts) {
    const floorIdle = median((samples.get(`${targets[0].label}|${n}`) ?? []).map((s) => s.idlePerClient));
    for (const t of targets) {
      const ss = samples.get(`${t.label}|${n}`) ?? [];
      const idle = median(ss.map((s) => s.idlePerClient));
      const active = median(ss.map((s) => s.activePerClient));
      lines.push(`| ${n.toLocaleString('en')} | ${t.label} | ${(idle / KIB).toFixed(2)} | ${(active / KIB).toFixed(2)} | ${(idle / floorIdle).toFixed(2)}x |`);
    }
  }
  return [
    '## What a client costs',
    '',
    `slotproxy (ring mode, one node) beside a bare Node server whose sockets each answered one command (bench/answered-floor.ts), both run with slotproxy's V8 flags. Each client connects, sends one \`GET\`, reads its reply and stays connected (idle); then each sends one \`GET\` a second for ${seconds} s (active, RSS peak). Per client = (RSS with the clients - RSS before) / clients. Medians of ${rounds} interleaved rounds, a fresh process per measurement. Clients live in the bench process, so a count is bounded by its open-file limit.`,
    '',
    ...lines,
    '',
  ].join('\n');
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
