// What client-side caching costs the proxy per tracked key (issue 23): one RESP3 client with
// CLIENT TRACKING ON reads N distinct keys through a cluster-mode slotproxy (pipelined GETs of
// keys that do not exist: a read is remembered whatever it returns), and the proxy's heap (INFO
// proxy proxy_used_memory_heap, after the process settles) is compared with its heap before. Appended to
// BENCHMARKS.md by `npm run bench`; alone: `node dist/bench/tracking-memory.js`.

import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { TargetLauncher, startBackends, stopBackends } from './targets';
import { ReplyFramer } from '../proxy/resp/reply-framer';

const COUNTS = [100_000, 500_000, 1_000_000];
const BATCH = 10_000;

/** One connection; `send` resolves with the replies of the requests it wrote. */
class Conn {
  private readonly framer = new ReplyFramer();
  private waiting: { left: number; frames: Buffer[]; resolve: (f: Buffer[]) => void } | null = null;
  constructor(private readonly socket: net.Socket) {
    socket.on('data', (d: Buffer) =>
      this.framer.push(d, (f) => {
        if (f[0] === 62 /* > */ || this.waiting === null) return; // invalidation pushes
        this.waiting.frames.push(f);
        if (--this.waiting.left === 0) {
          const w = this.waiting;
          this.waiting = null;
          w.resolve(w.frames);
        }
      }),
    );
  }
  send(requests: string[][]): Promise<Buffer[]> {
    return new Promise((resolve) => {
      this.waiting = { left: requests.length, frames: [], resolve };
      this.socket.write(requests.map((r) => `*${r.length}\r\n${r.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`).join(''));
    });
  }
}

async function heapOf(conn: Conn): Promise<number> {
  // Let the proxy's GC settle: a few INFO round trips apart.
  let heap = 0;
  for (let i = 0; i < 5; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const [info] = await conn.send([['INFO', 'proxy']]);
    heap = Number(/proxy_used_memory_heap:(\d+)/.exec(info.toString())?.[1]);
  }
  return heap;
}

export async function runTrackingMemoryBench(): Promise<string> {
  const backends = await startBackends();
  const tmpDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-tracking-'));
  const launcher = new TargetLauncher(backends, tmpDir);
  const rows: string[] = [];
  try {
    for (const n of COUNTS) {
      process.stderr.write(`tracking-memory: ${n} keys\n`);
      const target = await launcher.start('cluster');
      try {
        const socket = net.connect(target.port, '127.0.0.1');
        await new Promise((r) => socket.once('connect', r));
        const conn = new Conn(socket);
        await conn.send([['HELLO', '3'], ['CLIENT', 'TRACKING', 'ON']]);
        const before = await heapOf(conn);
        for (let i = 0; i < n; i += BATCH) {
          await conn.send(Array.from({ length: Math.min(BATCH, n - i) }, (_, j) => ['GET', `tracked:key:${i + j}`]));
        }
        const after = await heapOf(conn);
        const [info] = await conn.send([['INFO', 'proxy']]);
        const tracked = Number(/proxy_tracking_total_keys:(\d+)/.exec(info.toString())?.[1]);
        rows.push(`| ${n.toLocaleString('en-US')} | ${tracked.toLocaleString('en-US')} | ${((after - before) / 2 ** 20).toFixed(1)} MiB | ${((after - before) / n).toFixed(0)} B |`);
        socket.destroy();
      } finally {
        await target.stop();
      }
    }
  } finally {
    await stopBackends(backends);
    await fsp.rm(tmpDir, { recursive: true, force: true });
  }
  return [
    '## Client-side caching: memory per tracked key',
    '',
    'One RESP3 client with `CLIENT TRACKING ON` reads N distinct keys (`tracked:key:<i>`, 15-21 bytes) through slotproxy (cluster mode, 3 masters); the proxy\'s V8 heap (`INFO proxy` `proxy_used_memory_heap`) after, less before. One client per key; a key read by several clients also holds a small Set of their ids.',
    '',
    '| Keys read | Keys tracked | Heap growth | Per key |',
    '| --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

if (require.main === module) {
  runTrackingMemoryBench().then(
    (md) => process.stdout.write(`${md}\n`),
    (err: Error) => {
      process.stderr.write(`${err.stack ?? err.message}\n`);
      process.exit(1);
    },
  );
}
