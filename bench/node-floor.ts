// The floor for any Node.js proxy: each client's bytes piped raw to a connection of its own to one
// Redis and back, no parsing, no routing, no batching. Its CPU per request is the cost of Node's
// event machinery alone (see bench/NOTES.md). Usage: node dist/bench/node-floor.js PORT REDIS_HOST:PORT
import net from 'node:net';

const [listenPort, redis] = process.argv.slice(2);
const [host, port] = (redis ?? '').split(':');
if (!listenPort || !host || !port) {
  console.error('usage: node dist/bench/node-floor.js PORT REDIS_HOST:PORT');
  process.exit(2);
}
net
  .createServer({ noDelay: true }, (client) => {
    const backend = net.connect({ host, port: Number(port), noDelay: true });
    client.pipe(backend);
    backend.pipe(client);
    client.on('error', () => backend.destroy());
    backend.on('error', () => client.destroy());
  })
  .listen(Number(listenPort), '127.0.0.1');
