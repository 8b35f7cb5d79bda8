// Issue 7, abuse and limits: slow clients, 2,000 idle connections, a client pipelining 1,000,000
// commands without reading, limits.maxClients and limits.idleClientTimeoutMs. Each with a memory
// bound checked here, and a bystander client that must not notice.
//
// The proxy whose memory is measured runs as its own process (the built binary), so its RSS is not
// mixed with this test's sockets; the others run in this process.

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { startProxy } from '../helpers/proxy';
import { ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { ProxyServer } from '../../proxy/server/server';
import { freePort } from '../../cmd/sandbox/ports';
import { treeStats } from '../../bench/process-stats';
import { unreadPipeline } from '../../bench/memory-test';

const MiB = 1024 * 1024;
const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let dir: string;
const clients: Redis[] = [];
const sockets = new Set<net.Socket>();

beforeAll(() => {
  dir = tempDir('slotproxy-abuse-');
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  for (const s of sockets) s.destroy();
  killAllProxies();
  fs.rmSync(dir, { recursive: true, force: true });
});

function client(port: number): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0 });
  clients.push(c);
  return c;
}

function rawConnect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.once('error', reject);
    s.once('connect', () => {
      s.off('error', reject);
      s.on('error', () => undefined);
      resolve(s);
    });
  });
}

/** Everything a socket receives until it closes (or `ms` passes: then rejects). */
function untilClosed(s: net.Socket, ms = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = '';
    const timer = setTimeout(() => reject(new Error(`still open after ${ms} ms; got ${JSON.stringify(got)}`)), ms);
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
  });
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Runs INCRs until `done` resolves; resolves with their latencies. */
async function bystander(c: Redis, done: Promise<unknown>): Promise<number[]> {
  let finished = false;
  void done.finally(() => (finished = true));
  const latencies: number[] = [];
  while (!finished) {
    const t = Date.now();
    await c.incr('abuse:bystander');
    latencies.push(Date.now() - t);
    await new Promise((r) => setTimeout(r, 5));
  }
  return latencies;
}

describe('a proxy process under abuse (memory measured from outside)', () => {
  let proxy: ProxyProcess;
  let port: number;

  beforeAll(async () => {
    port = await freePort();
    const file = path.join(dir, 'abuse.yaml');
    fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds.join(', ')}]\nlog:\n  level: warn\n`);
    proxy = ProxyProcess.start(file, ['--log-level', 'info']);
    await proxy.waitForLog(/slotproxy is listening/);
    // Warm up, so that the baseline includes the back-end connections and a loaded command table.
    const warm = client(port);
    for (let i = 0; i < 100; i++) await warm.set(`abuse:warm:${i}`, 'x');
  }, 30_000);

  test('2,000 idle connections: under 40 MiB of proxy RSS (20 KiB each), others unaffected, all released', async () => {
    const rss = (): number => treeStats(proxy.pid).rssBytes;
    const before = rss();
    const idle: net.Socket[] = [];
    for (let i = 0; i < 2000; i += 100) {
      idle.push(...(await Promise.all(Array.from({ length: 100 }, () => rawConnect(port)))));
    }
    const c = client(port);
    await eventually(async () => /proxy_connected_clients:(\d+)/.exec(String(await c.call('INFO', 'proxy')))?.[1] === String(2000 + 2), 'all 2,000 connections accepted');
    const during = rss();
    process.stdout.write(`2,000 idle connections: proxy RSS ${(before / MiB).toFixed(1)} -> ${(during / MiB).toFixed(1)} MiB\n`);
    expect(during - before).toBeLessThan(40 * MiB);
    const t = Date.now();
    expect(await c.set('abuse:idle', 'v')).toBe('OK');
    expect(await c.get('abuse:idle')).toBe('v');
    // Served as usual: a loaded machine's scheduling, not the idle connections, bounds it.
    expect(Date.now() - t).toBeLessThan(2000);
    for (const s of idle) s.destroy();
    await eventually(async () => /proxy_connected_clients:(\d+)/.exec(String(await c.call('INFO', 'proxy')))?.[1] === '2', 'connections released');
  }, 60_000);

  test('a client pipelining 1,000,000 commands without reading is paused: proxy RSS stays bounded, a bystander is not slowed', async () => {
    const by = client(port);
    expect(await by.ping()).toBe('PONG');
    const run = unreadPipeline(port, proxy.pid, {
      commands: 1_000_000,
      maxMs: 20_000,
      stallMs: 2_000,
      settleMs: 1_000,
      capBytes: 512 * MiB,
    });
    const latencies = await bystander(by, run);
    const r = await run;
    process.stdout.write(
      `unread pipeline: ${r.commandsWritten} commands written before the proxy stopped reading (stalled: ${r.stalled}); ` +
        `proxy RSS idle ${(r.idleRssBytes / MiB).toFixed(1)}, peak ${(r.peakRssBytes / MiB).toFixed(1)}, after ${(r.afterRssBytes / MiB).toFixed(1)} MiB; ` +
        `bystander ${latencies.length} commands, slowest ${Math.max(...latencies)} ms\n`,
    );
    expect(r.capped).toBe(false);
    expect(r.stalled).toBe(true);
    expect(r.commandsWritten).toBeLessThan(1_000_000);
    // Without back-pressure 1,000,000 replies would hold 39 MB of output and far more in objects;
    // with it the proxy holds up to clientOutputHighWaterBytes (8 MiB) of output plus garbage
    // (measured 60-101 MiB: the garbage collector's timing varies with the machine's load). The
    // bound is a margin the spread cannot cross; the stall above is what shows back-pressure, and
    // bench/memory-test.ts measures the footprint.
    expect(r.peakRssBytes - r.idleRssBytes).toBeLessThan(256 * MiB);
    expect(latencies.length).toBeGreaterThan(20);
    // Measured about 150 ms at worst (the proxy working through a read of the pipeline); a paused
    // client never stalls the others for long (unpaused, the proxy would answer 1,000,000 commands
    // first: seconds). The bound leaves room for a loaded machine.
    expect(Math.max(...latencies)).toBeLessThan(2000);
    expect(proxy.running).toBe(true);
  }, 60_000);
});

describe('limits.maxClients', () => {
  test('limits.maxClients: clients over it get the Redis error and are closed; 500 of them hold nothing; room frees up', async () => {
    // A proxy of its own, without the idle timeout: on a loaded machine the 500 connections can
    // take longer than 1.5 s, and the held clients, idle, would be closed under the test's feet.
    const proxy = await startProxy(cluster().seeds, { limits: { maxClients: 20 } });
    const port = proxy.address.port;
    const stats = proxy.stats;
    try {
      const held = await Promise.all(Array.from({ length: 20 }, () => rawConnect(port)));
      await eventually(() => stats.connectedClients === 20, 'at the limit');
      const rejectedBefore = stats.rejectedConnections;
      const buffersBefore = process.memoryUsage().arrayBuffers;
      const over = await Promise.all(Array.from({ length: 500 }, async () => untilClosed(await rawConnect(port))));
      expect(new Set(over)).toEqual(new Set(['-ERR max number of clients reached\r\n']));
      expect(stats.rejectedConnections - rejectedBefore).toBe(500);
      expect(stats.connectedClients).toBe(20);
      expect(process.memoryUsage().arrayBuffers - buffersBefore).toBeLessThan(4 * MiB);
      held[0].destroy();
      await eventually(() => stats.connectedClients === 19, 'a slot freed');
      const next = await rawConnect(port);
      next.write('PING\r\n');
      const pong = await new Promise<string>((resolve) => next.once('data', (d: Buffer) => resolve(d.toString())));
      expect(pong).toBe('+PONG\r\n');
      for (const s of held) s.destroy();
      next.destroy();
    } finally {
      await proxy.close(500);
    }
  }, 30_000);
});

describe('limits in this process', () => {
  let proxy: ProxyServer | undefined;
  let port = 0;

  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds, { limits: { idleClientTimeoutMs: 1500 } });
    port = proxy.address.port;
  }, 30_000);

  afterAll(async () => {
    await proxy?.close(500);
  });

  test('slow clients sending one byte a second are served when their command is complete, are not closed as idle, and slow no one', async () => {
    const slow = await Promise.all(Array.from({ length: 10 }, () => rawConnect(port)));
    const replies = slow.map(() => '');
    slow.forEach((s, i) => s.on('data', (d: Buffer) => (replies[i] += d.toString())));
    const by = client(port);
    const buffersBefore = process.memoryUsage().arrayBuffers;
    const dribble = (async () => {
      // Longer than the idle timeout (1.5 s) in all: each byte counts as activity.
      for (const byte of Buffer.from('PING\r\n')) {
        for (const s of slow) s.write(Buffer.from([byte]));
        await new Promise((r) => setTimeout(r, 1000)); // the input's pace is what is tested
      }
    })();
    const latencies = await bystander(by, dribble);
    await eventually(() => replies.every((r) => r === '+PONG\r\n'), 'every slow client answered');
    expect(slow.every((s) => !s.destroyed)).toBe(true);
    expect(Math.max(...latencies)).toBeLessThan(250);
    // What the proxy holds for a slow client is its few unparsed bytes.
    expect(process.memoryUsage().arrayBuffers - buffersBefore).toBeLessThan(4 * MiB);
    for (const s of slow) s.destroy();
    by.disconnect();
  }, 30_000);

  test('limits.idleClientTimeoutMs closes a silent client; a talking one stays', async () => {
    const silent = await rawConnect(port);
    const closed = untilClosed(silent, 5000);
    const openedAt = Date.now();
    const talker = client(port);
    while (Date.now() - openedAt < 1000) {
      expect(await talker.ping()).toBe('PONG');
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await closed).toBe('');
    const idleFor = Date.now() - openedAt;
    expect(idleFor).toBeGreaterThanOrEqual(1400);
    expect(idleFor).toBeLessThan(3000);
    expect(await talker.ping()).toBe('PONG');
    talker.disconnect();
  }, 30_000);

});
