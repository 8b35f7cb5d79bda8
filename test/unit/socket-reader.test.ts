// The proxy reads plain TCP sockets into one shared buffer (proxy/net/socket-reader.ts). For
// accepted sockets that relies on net.Socket's internal onread fields: this fails loudly the day a
// Node release changes them, instead of the proxy silently falling back to slower 'data' events.
import net from 'node:net';
import { once } from 'node:events';
import { onreadOption, readAccepted } from '../../proxy/net/socket-reader';

async function serverWith(onSocket: (socket: net.Socket) => void): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer({ pauseOnConnect: true }, onSocket);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as net.AddressInfo).port };
}

describe('reading sockets into the shared buffer', () => {
  test('an accepted socket takes the fast path on this Node, and every chunk is a copy the reader may keep', async () => {
    const chunks: Buffer[] = [];
    const fast: boolean[] = [];
    const gotAll = new Promise<void>((resolve) => {
      void serverWith((socket) => {
        fast.push(readAccepted(socket, (chunk) => {
          chunks.push(chunk);
          if (Buffer.concat(chunks).toString() === 'first|second|third') resolve();
        }));
      }).then(async ({ server, port }) => {
        const client = net.connect(port, '127.0.0.1');
        await once(client, 'connect');
        client.setNoDelay(true);
        for (const part of ['first|', 'second|', 'third']) {
          client.write(part);
          // One read per part: wait until the server has it before sending the next.
          while (!Buffer.concat(chunks).toString().endsWith(part)) await new Promise((r) => setImmediate(r));
        }
        await gotAll;
        client.destroy();
        server.close();
      });
    });
    await gotAll;
    expect(fast).toEqual([true]);
    // Later reads overwrite the shared buffer; earlier chunks must be untouched.
    expect(chunks.map((c) => c.toString())).toEqual(['first|', 'second|', 'third']);
  });

  test('pause stops reading and resume starts it again, end and close still come', async () => {
    const received: string[] = [];
    let serverSide: net.Socket | null = null;
    const { server, port } = await serverWith((socket) => {
      serverSide = socket;
      readAccepted(socket, (chunk) => received.push(chunk.toString()));
    });
    const client = net.connect(port, '127.0.0.1');
    await once(client, 'connect');
    while (serverSide === null) await new Promise((r) => setImmediate(r));
    const accepted = serverSide as net.Socket;
    accepted.pause();
    client.write('while paused');
    await new Promise((r) => setTimeout(r, 50)); // a read would have come by now; nothing may arrive
    expect(received).toEqual([]);
    accepted.resume();
    while (received.join('') !== 'while paused') await new Promise((r) => setImmediate(r));
    const closed = once(accepted, 'close');
    client.end();
    await closed;
    server.close();
  });

  test('a connecting socket with the onread option gets each read as its own buffer', async () => {
    const { server, port } = await serverWith((socket) => {
      socket.resume();
      socket.write('hello ');
      setImmediate(() => socket.end('world'));
    });
    const chunks: Buffer[] = [];
    const client = net.connect({ port, host: '127.0.0.1', onread: onreadOption((chunk) => chunks.push(chunk)) });
    await once(client, 'close');
    server.close();
    expect(Buffer.concat(chunks).toString()).toBe('hello world');
  });
});
