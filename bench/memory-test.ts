// The "client that never reads" memory test: one connection pipelines up to 1,000,000 GETs and
// reads no reply. A proxy that buffers replies without limit grows by the size of all of them;
// slotproxy is meant to stop reading such a client (limits.clientOutputHighWaterBytes and its cap
// on outstanding replies), so the kernel's socket buffers fill and our writes stall instead.

import net from 'node:net';
import os from 'node:os';
import { sendCommand } from '../cmd/sandbox/resp-client';
import { RssSampler, treeStats } from './process-stats';

export interface UnreadPipelineOptions {
  commands: number;
  /** Give up writing after this long even if the proxy keeps accepting. */
  maxMs: number;
  /** Writes that wait this long for 'drain' mean the proxy applied back-pressure. */
  stallMs: number;
  /** After writing stops, keep sampling until RSS has not grown for this long (bounded by maxMs). */
  settleMs: number;
  /**
   * Stop as soon as the proxy's RSS passes this. twemproxy takes an mbuf (16 KiB) per unread
   * reply, so 1,000,000 of them would be ~16 GiB: without a cap the test could exhaust the machine.
   */
  capBytes: number;
}

export const DEFAULT_UNREAD_PIPELINE: UnreadPipelineOptions = {
  commands: 1_000_000,
  maxMs: 20_000,
  stallMs: 2_000,
  settleMs: 2_000,
  capBytes: Math.min(1024 ** 3, Math.floor(os.totalmem() / 8)),
};

export interface UnreadPipelineResult {
  idleRssBytes: number;
  peakRssBytes: number;
  /** RSS a moment after the client disconnected: memory the proxy kept. */
  afterRssBytes: number;
  /** Commands the kernel accepted from the client (some may still sit in socket buffers). */
  commandsWritten: number;
  /** True when writes stopped because the proxy stopped reading. */
  stalled: boolean;
  /** True when the test was cut short because RSS passed capBytes (peakRssBytes is then a lower bound). */
  capped: boolean;
  seconds: number;
}

/** 32 bytes, as redis-benchmark's -d 32, so each reply is 39 bytes and 1M of them far exceed 8 MiB. */
const VALUE = 'x'.repeat(32);
const COMMAND = Buffer.from('*2\r\n$3\r\nGET\r\n$1\r\nk\r\n');
const BATCH = 1_000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves true on 'drain', false after ms or when the socket closes. */
function drained(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (result: boolean): void => {
      clearTimeout(timer);
      socket.off('drain', onDrain);
      socket.off('close', onClose);
      resolve(result);
    };
    const onDrain = (): void => done(true);
    const onClose = (): void => done(false);
    const timer = setTimeout(() => done(false), ms);
    socket.once('drain', onDrain);
    socket.once('close', onClose);
  });
}

export async function unreadPipeline(port: number, proxyPid: number, opts: UnreadPipelineOptions = DEFAULT_UNREAD_PIPELINE): Promise<UnreadPipelineResult> {
  await sendCommand(port, ['SET', 'k', VALUE]);
  const idleRssBytes = treeStats(proxyPid).rssBytes;
  const sampler = new RssSampler(proxyPid, 50);
  const started = Date.now();
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined); // a proxy that drops us is a result, not a crash
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  // Never read: the replies pile up in the proxy (or, with back-pressure, in socket buffers).
  socket.pause();
  let capped = false;
  const guard = setInterval(() => {
    if (treeStats(proxyPid).rssBytes <= opts.capBytes) return;
    capped = true;
    socket.destroy(); // the proxy frees (or at least stops growing) once its client is gone
  }, 50);
  const batch = Buffer.concat(Array.from({ length: BATCH }, () => COMMAND));
  let written = 0;
  let stalled = false;
  try {
    while (written < opts.commands && Date.now() - started < opts.maxMs && !socket.destroyed) {
      const n = Math.min(BATCH, opts.commands - written);
      const ok = socket.write(n === BATCH ? batch : batch.subarray(0, n * COMMAND.length));
      written += n;
      if (!ok && !(await drained(socket, opts.stallMs))) {
        stalled = !socket.destroyed;
        break;
      }
      // write() keeps returning true while the proxy reads fast, so give the guard a turn.
      if (written % (BATCH * 20) === 0) await sleep(0);
    }
    // Let the proxy work through what it has accepted, so the peak is the steady state.
    let lastRss = treeStats(proxyPid).rssBytes;
    let lastGrowth = Date.now();
    while (!capped && Date.now() - lastGrowth < opts.settleMs && Date.now() - started < opts.maxMs + opts.settleMs) {
      await sleep(200);
      const rss = treeStats(proxyPid).rssBytes;
      if (rss > lastRss) {
        lastRss = rss;
        lastGrowth = Date.now();
      }
    }
  } finally {
    clearInterval(guard);
    socket.destroy();
  }
  const seconds = (Date.now() - started) / 1000;
  const peakRssBytes = sampler.stop();
  await sleep(1_000);
  return { idleRssBytes, peakRssBytes, afterRssBytes: treeStats(proxyPid).rssBytes, commandsWritten: written, stalled, capped, seconds };
}
