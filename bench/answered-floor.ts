// The per-client floor of issue 32: a bare Node server whose sockets each answer what they read
// with a null bulk reply (`$-1`, what a GET of a missing key gets; `+PONG` to a lone PING), parsing nothing and keeping no
// state of its own. A client that sent one command and went idle costs this server its socket, the
// socket's listeners and what Node kept from the read and the write: the least any Node proxy pays
// for an idle client that has been served once. bench/client-memory.ts measures it beside slotproxy.
// Usage: node dist/bench/answered-floor.js PORT
import net from 'node:net';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node dist/bench/answered-floor.js PORT');
  process.exit(2);
}

const NULL_BULK = Buffer.from('$-1\r\n');
const PONG = Buffer.from('+PONG\r\n');
/** The bench's readiness probe (a lone PING); every other read gets the null bulk. */
const isPing = (chunk: Buffer): boolean => chunk.length < 20 && chunk.includes('PING');
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
