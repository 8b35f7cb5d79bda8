// The per-client floor of issue 32: a bare Node server whose sockets each answer what they read
// with a null bulk reply (`$-1`, what a GET of a missing key gets; `+PONG` to a lone PING), parsing nothing and keeping no
// state of its own. A client that sent one command and went idle costs this server its socket, the
// socket's listeners and what Node kept from the read and the write: the least any Node proxy pays
// for an idle client that has been served once. bench/client-memory.ts measures it beside slotproxy.
// With `--workers W` (counts above one process's open-file limit), W such servers as Node cluster
// workers sharing the port, set up as slotproxy's `--workers` (cmd/workers.ts): cluster.fork() with
// Node's default scheduling (round robin by the primary on Linux) and the primary's execArgv (the
// V8 flags); the primary prints "workers listening W" once all W listen.
// Usage: node dist/bench/answered-floor.js PORT [--workers W]
import cluster from 'node:cluster';
import net from 'node:net';

const port = Number(process.argv[2]);
const flag = process.argv.indexOf('--workers');
const workers = flag < 0 ? 1 : Number(process.argv[flag + 1]);
if (!Number.isInteger(port) || port <= 0 || !Number.isInteger(workers) || workers < 1) {
  console.error('usage: node dist/bench/answered-floor.js PORT [--workers W]');
  process.exit(2);
}

const NULL_BULK = Buffer.from('$-1\r\n');
const PONG = Buffer.from('+PONG\r\n');
/** The bench's readiness probe (a lone PING); every other read gets the null bulk. */
const isPing = (chunk: Buffer): boolean => chunk.length < 20 && chunk.includes('PING');

function serve(): void {
  // As slotproxy's listener: sockets come paused and are read from the first byte (no 'connection'
  // closure beyond the one listener per socket), replies written with setNoDelay as the proxy does.
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => socket.write(isPing(chunk) ? PONG : NULL_BULK));
    socket.on('error', () => undefined);
  });
  server.maxConnections = 100_000;
  server.listen(port, '127.0.0.1');
  process.on('SIGTERM', () => process.exit(0));
}

/** The primary only forks and stops: SIGTERM to every worker, exit once all have exited. */
function supervise(): void {
  let listening = 0;
  cluster.on('listening', () => {
    if (++listening === workers) process.stdout.write(`workers listening ${workers}\n`);
  });
  cluster.on('exit', () => {
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  });
  for (let i = 0; i < workers; i++) cluster.fork();
  process.on('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
  });
}

if (workers > 1 && cluster.isPrimary) supervise();
else serve();
