// The least memory a Node server spends per connected client: it accepts sockets and holds them
// paused, reading nothing, with no state of its own (bench/NOTES.md, round 6, uses it as the floor
// of the per-client cost). Run: `npm run build && node --expose-gc dist/bench/bare-sockets.js [N]`;
// the N clients connect from a child process so only the server's RSS is measured.

import net from 'node:net';
import { spawn } from 'node:child_process';

const n = Number(process.argv[2] ?? 10_000);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const gc = (globalThis as { gc?: () => void }).gc ?? ((): void => undefined);

const held: net.Socket[] = [];
const server = net.createServer({ pauseOnConnect: true }, (s) => {
  held.push(s);
  s.on('error', () => undefined);
});

server.listen(0, '127.0.0.1', async () => {
  const { port } = server.address() as net.AddressInfo;
  gc();
  await sleep(300);
  const before = process.memoryUsage().rss;
  const clients = spawn(
    process.execPath,
    ['-e', `const net=require('net');const k=[];for(let i=0;i<${n};i++)k.push(net.connect(${port},'127.0.0.1').on('error',()=>{}));setInterval(()=>{},1000)`],
    { stdio: 'ignore' },
  );
  for (let waited = 0; held.length < n; waited += 50) {
    if (waited > 30_000) throw new Error(`only ${held.length} of ${n} clients connected`);
    await sleep(50);
  }
  await sleep(500);
  gc();
  await sleep(300);
  const after = process.memoryUsage().rss;
  process.stdout.write(`${n} clients held: ${((after - before) / n / 1024).toFixed(2)} KiB of RSS per client\n`);
  clients.kill();
  process.exit(0);
});
