// When MONITOR's lines go out, and how much of them the proxy keeps for a monitor. A command's line
// is sent once it has run (its reply in), as Redis 7 feeds its monitors: ioredis's own test
// "should continue monitoring after reconnection" disconnects on seeing the SET's line, and the
// SET's reply must not be lost by then, through the proxy as on one Redis. And a monitor that does
// not read is disconnected at limits.monitorOutputBytes, logged, under a load that every other
// client (a monitor that reads, the writers) gets in full.

import fs from 'node:fs';
import net from 'node:net';
import { once } from 'node:events';
import Redis from 'ioredis';
import { useProxy } from '../helpers/proxy';
import { useReferenceNode } from '../helpers/reference-node';
import { encodeRequest } from '../helpers/raw-exchange';
import { waitFor } from '../helpers/master-keys';
import { killAllProxies, startProxyProcess, tempDir } from '../helpers/cli';
import { RssSampler, treeStats } from '../../bench/process-stats';

jest.setTimeout(90_000);

const h = useProxy();
const ref = useReferenceNode();

afterAll(() => killAllProxies());

/**
 * ioredis's test, as its test/functional/monitor.ts has it: a monitor reconnected (disconnect(true)),
 * then a SET; on the SET's line the client disconnects. What became of the SET's reply.
 */
async function setOnReconnectedMonitor(port: number): Promise<string> {
  const redis = new Redis({ port, maxRetriesPerRequest: 0 });
  const admin = new Redis({ port, maxRetriesPerRequest: 0 });
  // Both ready (their INFO ready checks answered) before the monitor: a line arriving in the same
  // read as MONITOR's +OK trips ioredis ("Command queue state error"), on one Redis as here.
  await Promise.all([redis.ping(), admin.ping()]);
  const monitor = await redis.monitor();
  try {
    const ready = once(monitor, 'ready');
    monitor.disconnect(true);
    await ready;
    let live = false;
    let sawSet: () => void = () => undefined;
    const seen = new Promise<void>((resolve) => (sawSet = resolve));
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0] === 'echo' && args[1] === 'probe') live = true;
      if (args[0] !== 'set') return;
      redis.disconnect();
      sawSet();
    });
    // ioredis sends MONITOR again on reconnecting: the feed is live once a probe's line comes.
    await waitFor('the reconnected monitor to see a probe', async () => (await admin.echo('probe'), live));
    const outcome = redis.set('foo', 'bar').then((r) => `answered ${r}`, (err: Error) => `lost: ${err.message}`);
    const timeout = new Promise<void>((_, reject) => setTimeout(() => reject(new Error('the SET never showed on the monitor')), 10_000).unref());
    await Promise.race([seen, timeout]);
    return await outcome;
  } finally {
    redis.disconnect();
    admin.disconnect();
    monitor.disconnect();
  }
}

test('a SET whose line a monitor sees has had its reply: a disconnect on seeing it loses nothing, as on one Redis', async () => {
  for (let i = 0; i < 5; i++) expect(await setOnReconnectedMonitor(ref.node().port)).toBe('answered OK');
  for (let i = 0; i < 5; i++) expect(await setOnReconnectedMonitor(h.proxy().address.port)).toBe('answered OK');
});

test('a monitor that does not read is disconnected at limits.monitorOutputBytes and logged; a monitor that reads and the writers get everything', async () => {
  const dir = tempDir('slotproxy-monitor-limit-');
  try {
    const LIMIT = 4 * 1024 * 1024;
    const { proxy, port } = await startProxyProcess({ mode: 'cluster', cluster: { seeds: h.cluster().seeds }, limits: { monitorOutputBytes: LIMIT } }, dir);
    const slow = net.connect(port, '127.0.0.1');
    let slowClosed = false;
    slow.on('close', () => (slowClosed = true));
    slow.on('error', () => undefined);
    let answer = '';
    slow.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    slow.write(encodeRequest(['MONITOR']));
    await waitFor('the slow monitor to be in monitor mode', async () => answer.startsWith('+OK\r\n'));
    slow.removeAllListeners('data');
    slow.pause();
    // A monitor that reads: counts the load's lines.
    const fast = net.connect(port, '127.0.0.1');
    let fastLines = 0;
    let tail = '';
    fast.on('data', (d: Buffer) => {
      const text = tail + d.toString('latin1');
      const parts = text.split('\r\n');
      tail = parts.pop() ?? '';
      for (const line of parts) if (line.includes('"monitor-load:')) fastLines++;
    });
    fast.write(encodeRequest(['MONITOR']));
    // Writers: 1 KiB values, about 20 MiB of lines in all, five times the limit (beyond what the
    // kernel's socket buffers take for the slow monitor).
    const writers = Array.from({ length: 4 }, () => new Redis({ port, maxRetriesPerRequest: 0 }));
    const value = 'v'.repeat(1024);
    const PER_WRITER = 5000;
    let ok = 0;
    const idleRss = treeStats(proxy.pid).rssBytes;
    const rss = new RssSampler(proxy.pid, 20);
    try {
      await Promise.all(writers.map(async (w, n) => {
        for (let i = 0; i < PER_WRITER; i += 250) {
          const pipe = w.pipeline();
          for (let j = i; j < i + 250; j++) pipe.set(`monitor-load:${n}:${j}`, value);
          for (const [err, r] of (await pipe.exec()) ?? []) if (err === null && r === 'OK') ok++;
        }
      }));
      expect(ok).toBe(4 * PER_WRITER);
      await proxy.waitForLog(/disconnecting a MONITOR client that does not read its lines/, 20_000);
      expect(proxy.log).toMatch(/"limitBytes":4194304/);
      // The proxy's memory under the load: what it held for the slow monitor is bounded by the limit
      // (the disconnect above); RSS also holds the writers' replies and garbage the collector has not
      // taken yet (its timing varies with the machine's load), so the bound is a margin, not the limit.
      const grown = rss.stop() - idleRss;
      process.stdout.write(`monitor limit: proxy RSS ${(idleRss / 2 ** 20).toFixed(1)} MiB idle, peak +${(grown / 2 ** 20).toFixed(1)} MiB while ${(4 * PER_WRITER * 1.1 / 1024).toFixed(0)} MiB of lines went to the monitors\n`);
      expect(grown).toBeLessThan(256 * 2 ** 20);
      // Reading again, the slow monitor finds its connection closed by the proxy.
      slow.resume();
      await waitFor('the slow monitor to be closed', async () => slowClosed, 20_000);
      await waitFor('the reading monitor to get every line', async () => fastLines === 4 * PER_WRITER, 30_000);
      // One monitor left in monitor mode.
      const list = String(await writers[0].call('CLIENT', 'LIST'));
      expect(list.split('\n').filter((l) => / flags=O /.test(l)).length).toBe(1);
    } finally {
      rss.stop();
      for (const w of writers) w.disconnect();
      slow.destroy();
      fast.destroy();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
