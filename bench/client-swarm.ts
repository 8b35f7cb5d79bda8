// Clients for bench/client-memory.ts at counts one process cannot hold (its open-file limit): each
// swarm process connects COUNT clients to 127.0.0.1:PORT from its own source address (one source
// address has about 28,000 ephemeral ports toward one destination), 500 at a time; each client sends
// one GET and reads its reply. Then, on stdin:
//   "active": each client sends one GET a second, the clients spread evenly over the second;
//   "stop" (or stdin's end, the parent gone): every socket reset, exit.
// stdout: "ready ANSWERED FAILED" once every client has its reply (or failed); on stop, "done SENT READS"
// (GETs sent, reads that brought replies: two replies read at once count one).
// Usage: node dist/bench/client-swarm.js PORT COUNT LOCAL_ADDRESS
import net from 'node:net';
import readline from 'node:readline';

const GET = Buffer.from('*2\r\n$3\r\nGET\r\n$9\r\nbench:key\r\n');
const BATCH = 500;

const [port, count] = [Number(process.argv[2]), Number(process.argv[3])];
const localAddress = process.argv[4];
if (!Number.isInteger(port) || port <= 0 || !Number.isInteger(count) || count <= 0 || localAddress === undefined) {
  console.error('usage: node dist/bench/client-swarm.js PORT COUNT LOCAL_ADDRESS');
  process.exit(2);
}

let replies = 0;
let sent = 0;

/** One client: connects, sends one GET; resolves with its socket once the reply is in, null if it failed. */
function serveOnce(): Promise<net.Socket | null> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1', localAddress });
    s.on('error', () => resolve(null));
    s.once('close', () => resolve(null));
    s.once('connect', () => {
      sent++;
      s.write(GET);
    });
    s.once('data', () => resolve(s));
    s.on('data', () => replies++);
  });
}

async function connectAll(): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i += BATCH) {
    const batch = await Promise.all(Array.from({ length: Math.min(BATCH, count - i) }, serveOnce));
    for (const s of batch) if (s !== null && !s.destroyed) sockets.push(s);
  }
  return sockets;
}

let stopping = false;

function stop(sockets: readonly net.Socket[], timers: readonly NodeJS.Timeout[]): void {
  if (stopping) return;
  stopping = true;
  for (const t of timers) clearTimeout(t);
  // Reset, not closed: a closed socket stays in TIME_WAIT for 60 s, and while it does, its port is
  // barred from every connect() that does not bind (the kernel skips ports taken by bind(), on any
  // address): after 50,000 such sockets, the next in-process run could not connect 10,000 clients.
  for (const s of sockets) s.resetAndDestroy();
  process.stdout.write(`done ${sent} ${replies}\n`, () => process.exit(0));
}

async function main(): Promise<void> {
  const sockets = await connectAll();
  const timers: NodeJS.Timeout[] = [];
  const send = (s: net.Socket): void => {
    sent++;
    s.write(GET);
  };
  const lines = readline.createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line.trim() === 'active') {
      // clearTimeout also clears an interval, so one list holds both.
      sockets.forEach((s, i) => timers.push(setTimeout(() => timers.push(setInterval(() => send(s), 1000)), (i * 1000) / sockets.length)));
    } else if (line.trim() === 'stop') stop(sockets, timers);
  });
  lines.on('close', () => stop(sockets, timers));
  process.stdout.write(`ready ${sockets.length} ${count - sockets.length}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench/client-swarm: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
