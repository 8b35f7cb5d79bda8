// Issue 7, bad input end to end: 2,000 random and mutated request streams, each on its own
// connection to a real proxy in front of a real cluster (the decoder's own 100,000-case fuzz is in
// test/unit/request-decoder.test.ts; this one drives Session, Dispatcher and the back ends too).
// For every stream: the proxy answers with whole RESP replies, a protocol error is the last thing
// it sends, and the connection closes (no hang). Across all of them: no crash, a bystander keeps
// working, every connection is released and the memory they held is freed.

import net from 'node:net';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { client, startProxy } from '../helpers/proxy';
import { randInt, xorshift32 } from '../helpers/random';
import { ProxyServer } from '../../proxy/server/server';
import { ReplyFramer } from '../../proxy/resp/reply-framer';

const CASES = 2_000;
const BATCH = 50;
const MiB = 1024 * 1024;

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let proxy: ProxyServer | undefined;
const clients: Redis[] = [];

beforeAll(async () => {
  proxy = await startProxy(cluster().seeds, { limits: { maxRequestBytes: 4096, maxArgs: 64, maxInlineBytes: 256 } });
}, 30_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await proxy?.close(500);
});

type Rng = () => number;

/** Harmless commands only: a mutation may change their arguments, never make them dangerous. */
function command(rng: Rng): string[] {
  const key = `fuzz:${randInt(rng, 0, 20)}`;
  const value = 'v'.repeat(randInt(rng, 0, 12));
  switch (randInt(rng, 0, 9)) {
    case 0: return ['PING'];
    case 1: return ['ECHO', value];
    case 2: return ['GET', key];
    case 3: return ['SET', key, value];
    case 4: return ['INCR', `fuzz:n${randInt(rng, 0, 5)}`];
    case 5: return ['MGET', key, `${key}x`];
    case 6: return ['HSET', `fuzz:h${randInt(rng, 0, 5)}`, 'f', value];
    case 7: return ['CLUSTER', 'KEYSLOT', key];
    case 8: return ['EXISTS', key, key];
    default: return ['DBSIZE'];
  }
}

function encode(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

function stream(rng: Rng): Buffer {
  const parts: string[] = [];
  const n = randInt(rng, 1, 6);
  for (let i = 0; i < n; i++) {
    const args = command(rng);
    parts.push(rng() < 0.6 ? encode(args) : `${args.join(' ')}\r\n`);
  }
  return Buffer.from(parts.join(''), 'latin1');
}

const TOKENS = ['*-1\r\n', '$-1\r\n', '*99\r\n', '$5000\r\n', '*2147483648\r\n', '*1\r\n*1\r\n', '"', "'", '\r\n', '\0', 'x'.repeat(300)];

function mutate(rng: Rng, input: Buffer): Buffer {
  let b = Buffer.from(input);
  for (let i = randInt(rng, 1, 3); i > 0; i--) {
    const at = randInt(rng, 0, b.length);
    const op = randInt(rng, 0, 4);
    if (op === 0 && b.length > 0) b[Math.min(at, b.length - 1)] = randInt(rng, 0, 255);
    else if (op === 1) b = Buffer.concat([b.subarray(0, at), Buffer.from(TOKENS[randInt(rng, 0, TOKENS.length - 1)], 'latin1'), b.subarray(at)]);
    else if (op === 2) b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + randInt(rng, 1, 8)))]);
    else if (op === 3) b = b.subarray(0, at);
    else b = Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: randInt(rng, 1, 16) }, () => randInt(rng, 0, 255))), b.subarray(at)]);
  }
  return b;
}

function input(seed: number): Buffer {
  const rng = xorshift32(seed);
  const mode = rng();
  if (mode < 0.2) return stream(rng);
  if (mode < 0.85) return mutate(rng, stream(rng));
  return Buffer.from(Array.from({ length: randInt(rng, 1, 64) }, () => randInt(rng, 0, 255)));
}

/** Sends `bytes`, half-closes, and collects the answer until the proxy closes the connection. */
function exchange(port: number, bytes: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no close within 5 s for ${JSON.stringify(bytes.toString('latin1'))}`));
    }, 5000);
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('error', () => undefined); // a reset after the proxy's protocol error is fine
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    s.on('connect', () => s.end(bytes));
  });
}

let answeredWithData = 0;

/** The problem with an answer, or null. */
function check(answer: Buffer): string | null {
  const frames: Buffer[] = [];
  const framer = new ReplyFramer();
  try {
    framer.push(answer, (f) => frames.push(Buffer.from(f)));
  } catch (err) {
    return `not RESP: ${(err as Error).message}`;
  }
  const whole = frames.reduce((n, f) => n + f.length, 0);
  if (whole !== answer.length) return `a reply cut short after ${whole} of ${answer.length} bytes`;
  const protocolError = frames.findIndex((f) => f.toString('latin1').startsWith('-ERR Protocol error'));
  if (protocolError >= 0 && protocolError !== frames.length - 1) return 'replies after a protocol error';
  if (frames.some((f) => f[0] !== 45)) answeredWithData++;
  return null;
}

test(`${CASES.toLocaleString('en')} random and mutated request streams, one connection each`, async () => {
  if (proxy === undefined) throw new Error('the proxy did not start');
  const { port } = proxy.address;
  const stats = proxy.stats;
  const bystander = client(proxy);
  clients.push(bystander);
  expect(await bystander.set('fuzz:bystander', 'ok')).toBe('OK');
  const buffersBefore = process.memoryUsage().arrayBuffers;
  const errorsBefore = stats.protocolErrors;
  const failures: string[] = [];
  for (let i = 0; i < CASES && failures.length < 5; i += BATCH) {
    const seeds = Array.from({ length: BATCH }, (_, j) => 0xf022 + i + j);
    const answers = await Promise.all(seeds.map((seed) => exchange(port, input(seed))));
    answers.forEach((a, j) => {
      const problem = check(a);
      if (problem !== null) failures.push(`seed ${seeds[j]}: ${problem}; answer ${JSON.stringify(a.toString('latin1').slice(0, 200))}`);
    });
    expect(await bystander.get('fuzz:bystander')).toBe('ok');
  }
  expect(failures).toEqual([]);
  // Both outcomes were exercised.
  expect(stats.protocolErrors - errorsBefore).toBeGreaterThan(CASES / 10);
  expect(answeredWithData).toBeGreaterThan(CASES / 10);
  const deadline = Date.now() + 5000;
  while (stats.connectedClients !== 1) {
    if (Date.now() > deadline) throw new Error(`connectedClients stuck at ${stats.connectedClients}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(process.memoryUsage().arrayBuffers - buffersBefore).toBeLessThan(8 * MiB);
}, 120_000);
