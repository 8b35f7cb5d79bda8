// The cost of many clients (issue 24, part 3): RSS and CPU of each proxy with 1,000, 5,000 and
// 10,000 connected clients, idle and then each sending one GET a second, slotproxy's ring beside
// twemproxy and the Node floor in front of the same three standalone nodes. Run:
// `npm run build && node dist/bench/client-cost.js [--seconds 5]`; it prints a Markdown section.
// `npm run bench` (not --quick) appends the same section to BENCHMARKS.md.

import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { RssSampler, treeStats } from './process-stats';
import { IDLE_SAMPLE_AFTER_MS, RunningTarget, TargetLauncher, TargetUnavailable, startBackends, stopBackends } from './targets';

const COUNTS = [1000, 5000, 10_000];
const TARGETS = ['twemproxy', 'floor', 'ring'] as const;
const LABELS: Record<(typeof TARGETS)[number], string> = { twemproxy: 'twemproxy', floor: 'Node floor', ring: 'slotproxy ring' };
const GET = Buffer.from('*2\r\n$3\r\nGET\r\n$6\r\nbench:\r\n');
const MIB = 1024 * 1024;

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Row {
  target: string;
  clients: number;
  connected: number;
  idleRss: number;
  activeRss: number;
  cpuPercent: number;
  replies: number;
  expected: number;
  slowest: number;
}

/** `n` client connections, opened 500 at a time; the ones the proxy refused or closed are left out. */
export async function connectAll(port: number, n: number): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < n; i += 500) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(500, n - i) }, () => new Promise<net.Socket | null>((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.once('connect', () => resolve(s));
        s.once('error', () => resolve(null));
      })),
    );
    for (const s of batch) if (s !== null) sockets.push(s);
  }
  return sockets;
}

async function measure(target: RunningTarget, label: string, n: number, seconds: number): Promise<Row> {
  const pid = target.proc?.pid ?? 0;
  const sockets = await connectAll(target.port, n);
  await sleep(1000);
  const idleRss = treeStats(pid).rssBytes;
  // Each client sends one GET a second, the clients spread evenly over the second.
  let replies = 0;
  let sent = 0;
  let slowest = 0;
  const sentAt = new Array<number>(sockets.length).fill(0);
  sockets.forEach((s, i) => {
    s.on('data', () => {
      replies++;
      slowest = Math.max(slowest, performance.now() - sentAt[i]);
    });
  });
  const sampler = new RssSampler(pid);
  const cpuBefore = treeStats(pid).cpuSeconds;
  const started = performance.now();
  const timers = sockets.map((s, i) =>
    setTimeout(() => {
      const send = (): void => {
        sentAt[i] = performance.now();
        sent++;
        s.write(GET);
      };
      send();
      timers[i] = setInterval(send, 1000) as unknown as NodeJS.Timeout;
    }, (i * 1000) / sockets.length),
  );
  await sleep(seconds * 1000);
  for (const t of timers) clearInterval(t);
  await sleep(500);
  const cpuSeconds = treeStats(pid).cpuSeconds - cpuBefore;
  const activeRss = sampler.stop();
  const elapsed = (performance.now() - started) / 1000;
  for (const s of sockets) s.destroy();
  await sleep(500);
  return { target: label, clients: n, connected: sockets.length, idleRss, activeRss, cpuPercent: (cpuSeconds / elapsed) * 100, replies, expected: sent, slowest };
}

/** Runs every target and count; returns the Markdown section. */
export async function runClientCostBench(seconds: number): Promise<string> {
  const backends = await startBackends();
  const tmpDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-client-cost-'));
  const launcher = new TargetLauncher(backends, tmpDir);
  const rows: Row[] = [];
  const baseRss = new Map<string, number>();
  const skipped: string[] = [];
  try {
    for (const id of TARGETS) {
      let target: RunningTarget;
      try {
        target = await launcher.start(id);
      } catch (err) {
        if (err instanceof TargetUnavailable) {
          skipped.push(`${LABELS[id]}: ${err.message}`);
          continue;
        }
        throw err;
      }
      try {
        await sleep(IDLE_SAMPLE_AFTER_MS);
        baseRss.set(LABELS[id], treeStats(target.proc?.pid ?? 0).rssBytes);
        for (const n of COUNTS) {
          process.stderr.write(`client-cost: ${LABELS[id]} with ${n} clients\n`);
          rows.push(await measure(target, LABELS[id], n, seconds));
        }
      } finally {
        await target.stop();
      }
    }
  } finally {
    await stopBackends(backends);
    await fsp.rm(tmpDir, { recursive: true, force: true });
  }
  const mib = (b: number): string => (b / MIB).toFixed(1);
  const kib = (b: number): string => (b / 1024).toFixed(1);
  const lines = [
    '## The cost of many clients',
    '',
    `Each target in front of the same three standalone nodes; clients connected 500 at a time, RSS read 1 s later (idle), then each client sends one \`GET\` a second for ${seconds} s, spread evenly (RSS: peak sampled every 100 ms; CPU: the proxy's user + system time over that span). Per idle client = (idle RSS - RSS with no client) / clients.`,
    '',
    '| Target | Clients | Connected | RSS, no client (MiB) | RSS idle (MiB) | Per idle client (KiB) | RSS at 1 GET/s each (MiB) | CPU | Replies / sent | Slowest reply (ms) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) => {
      const base = baseRss.get(r.target) ?? 0;
      return `| ${r.target} | ${r.clients.toLocaleString('en')} | ${r.connected.toLocaleString('en')} | ${mib(base)} | ${mib(r.idleRss)} | ${kib((r.idleRss - base) / Math.max(1, r.connected))} | ${mib(r.activeRss)} | ${r.cpuPercent.toFixed(0)}% | ${r.replies.toLocaleString('en')} / ${r.expected.toLocaleString('en')} | ${r.slowest.toFixed(1)} |`;
    }),
    '',
    ...skipped.map((s) => `Not run: ${s}.`),
    '',
  ];
  return lines.join('\n');
}

if (require.main === module) {
  runClientCostBench(arg('--seconds', 5)).then(
    (text) => {
      process.stdout.write(text);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`bench/client-cost: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
