// Clients blocked in XREADGROUP ... BLOCK or XREAD ... BLOCK whose stream is deleted, replaced by
// another type, flushed or recreated, inside and outside a transaction: through slotproxy in
// front of 3 masters they get exactly the bytes a single-node Redis Cluster sends (the reference).
import net from 'node:net';
import { useCluster } from '../helpers/cluster';
import { useProxy, useRingProxy } from '../helpers/proxy';
import { redisAtLeast } from '../helpers/server-version';

const { proxy } = useProxy({}, { replicasPerMaster: 0 });
const ring = useRingProxy(3);
const reference = useCluster({ masters: 1, replicasPerMaster: 0 });

const cmd = (...a: string[]): string => `*${a.length}\r\n${a.map((x) => `$${Buffer.byteLength(x)}\r\n${x}\r\n`).join('')}`;

/** One connection: sends `payload`, resolves with every byte received until `done` says so. */
function conversation(port: number, payload: string, done: (got: string) => boolean): { socket: net.Socket; sent: Promise<void>; reply: Promise<string>; close: () => void } {
  const socket = net.connect(port, '127.0.0.1');
  let got = '';
  const sent = new Promise<void>((resolve) => socket.on('connect', () => (payload === '' ? resolve() : socket.write(payload, () => resolve()))));
  const reply = new Promise<string>((resolve) => {
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (done(got)) resolve(got);
    });
  });
  return { socket, sent, reply, close: () => socket.destroy() };
}

/** Waits until the server counts `n` blocked clients (INFO clients, as Redis's own tests do). */
async function blockedClients(port: number, n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const c = conversation(port, cmd('INFO', 'clients'), (g) => /\r\n\r\n$|blocked_clients:\d+\r\n/.test(g));
    const info = await c.reply;
    c.close();
    if (Number(/blocked_clients:(\d+)/.exec(info)?.[1]) === n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no ${n} blocked clients on ${port}`);
}

/** A reply whose first frame is complete (an error line, or a whole array as these cases answer). */
const oneFrame = (g: string): boolean => (g.startsWith('-') ? g.endsWith('\r\n') : /\r\n\$\d+\r\n[^\r]*\r\n\$\d+\r\n[^\r]*\r\n$/.test(g) || g === '*-1\r\n');

/** Runs a case on one server: set up, block a reader, act from another client, return what the reader got. */
async function run(port: number, setup: string, block: string, action: string, after = ''): Promise<string> {
  const s = conversation(port, setup + cmd('PING'), (g) => g.endsWith('+PONG\r\n'));
  await s.reply;
  const reader = conversation(port, block, oneFrame);
  await reader.sent;
  await blockedClients(port, 1);
  const actor = conversation(port, action, (g) => g.length > 0);
  await actor.reply;
  if (after !== '') {
    const more = conversation(port, after, (g) => g.length > 0);
    await more.reply;
    more.close();
  }
  const got = await reader.reply;
  for (const c of [s, reader, actor]) c.close();
  return got;
}

/** Another client acts right after the reader's blocking command is written, without waiting for it to block. */
async function runAtOnce(port: number, setup: string, block: string, action: string): Promise<string> {
  const s = conversation(port, setup + cmd('PING'), (g) => g.endsWith('+PONG\r\n'));
  await s.reply;
  const reader = conversation(port, '', (g) => g.length > 0 && oneFrame(g));
  const actor = conversation(port, '', (g) => g.length > 0);
  await Promise.all([reader.sent, actor.sent]);
  await new Promise<void>((resolve) => reader.socket.write(block, () => resolve()));
  actor.socket.write(action);
  await actor.reply;
  const got = await reader.reply;
  for (const c of [s, reader, actor]) c.close();
  return got;
}

const GROUP = cmd('FLUSHALL') + cmd('XGROUP', 'CREATE', '{st}s', 'g', '$', 'MKSTREAM');
const READGROUP = cmd('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', '0', 'STREAMS', '{st}s', '>');
const XREAD = cmd('XREAD', 'BLOCK', '0', 'STREAMS', '{st}s', '$');

const CASES: [string, string, string, string, string][] = [
  ['XREADGROUP, the stream deleted', GROUP, READGROUP, cmd('DEL', '{st}s'), ''],
  ['XREADGROUP, SET over the stream', GROUP, READGROUP, cmd('SET', '{st}s', 'x'), ''],
  ['XREADGROUP, FLUSHALL', GROUP, READGROUP, cmd('FLUSHALL'), ''],
  ['XREADGROUP, DEL inside a transaction', GROUP, READGROUP, cmd('MULTI') + cmd('DEL', '{st}s') + cmd('EXEC'), ''],
  ['XREADGROUP, the stream recreated inside a transaction', GROUP, READGROUP, cmd('MULTI') + cmd('DEL', '{st}s') + cmd('XADD', '{st}s', '1-1', 'f', 'v') + cmd('EXEC'), ''],
  ['XREADGROUP, SET inside a transaction', GROUP, READGROUP, cmd('MULTI') + cmd('SET', '{st}s', 'x') + cmd('EXEC'), ''],
  // XREAD is not woken by a deletion or another type; it takes the next entry of a new stream.
  ['XREAD, XADD + DEL + LPUSH in a transaction, then a new stream', cmd('FLUSHALL'), XREAD, cmd('MULTI') + cmd('XADD', '{st}s', '1-1', 'old', 'x') + cmd('DEL', '{st}s') + cmd('LPUSH', '{st}s', 'x') + cmd('EXEC'), cmd('DEL', '{st}s') + cmd('XADD', '{st}s', '2-1', 'new', 'y')],
  ['XREAD, the stream deleted, then a new one', GROUP, XREAD, cmd('DEL', '{st}s'), cmd('XADD', '{st}s', '3-1', 'new', 'z')],
  ['XREAD, FLUSHALL, then a new stream', GROUP, XREAD, cmd('FLUSHALL'), cmd('XADD', '{st}s', '4-1', 'new', 'w')],
];

test.each(CASES)('%s: the same bytes as one Redis', async (_name, setup, block, action, after) => {
  const want = await run(reference().masters[0].port, setup, block, action, after);
  const got = await run(proxy().address.port, setup, block, action, after);
  expect(got).toBe(want);
}, 30_000);

// Ring mode: the blocking command goes on a connection of its own, opened for it; it still reaches
// its node before anything another client sends once the proxy counts it blocked.
test.each(CASES)('ring mode, %s: the same bytes as one Redis', async (_name, setup, block, action, after) => {
  const want = await run(reference().masters[0].port, setup, block, action, after);
  const got = await run(ring.proxy().address.port, setup, block, action, after);
  expect(got).toBe(want);
}, 30_000);

// Without waiting for the reader to block: the blocking command, written first, reaches its node
// before the other client's command in both modes (it goes on a connection opened for it).
const AT_ONCE: [string, string][] = [
  ['FLUSHALL', cmd('FLUSHALL')],
  ['DEL', cmd('DEL', '{st}s')],
  ['XGROUP DESTROY', cmd('XGROUP', 'DESTROY', '{st}s', 'g')],
];
describe.each([
  ['cluster mode', (): number => proxy().address.port],
  ['ring mode', (): number => ring.proxy().address.port],
])('%s: another client acts right after XREADGROUP ... BLOCK 0 is sent', (_mode, port) => {
  test.each(AT_ONCE)('%s: the same bytes as one Redis', async (_name, action) => {
    const want = await runAtOnce(reference().masters[0].port, GROUP, READGROUP, action);
    // Blocked first: woken with an error, not refused at once with NOGROUP No such key ... Redis 7.2
    // and later (Valkey too) run the woken command again, which then finds no key: the same text.
    expect(want).toMatch(redisAtLeast(7, 2) ? /^-NOGROUP No such key '\{st\}s' or consumer group 'g'/ : /^-(UNBLOCKED|NOGROUP the consumer group this client was blocked on)/);
    for (let i = 0; i < 5; i++) expect(await runAtOnce(port(), GROUP, READGROUP, action)).toBe(want);
  }, 30_000);
});

/** INFO clients' blocking counts while one reader is blocked in XREADGROUP, and after it is woken. */
async function blockingCounts(port: number): Promise<string[]> {
  const fields = async (): Promise<string> => {
    const c = conversation(port, cmd('INFO', 'clients'), (g) => /\r\n\r\n$/.test(g));
    const info = await c.reply;
    c.close();
    return [...info.matchAll(/^(blocked_clients|total_blocking_keys|total_blocking_keys_on_nokey):\d+/gm)].map((m) => m[0]).join(' ');
  };
  const s = conversation(port, GROUP + cmd('PING'), (g) => g.endsWith('+PONG\r\n'));
  await s.reply;
  const reader = conversation(port, READGROUP, oneFrame);
  await reader.sent;
  await blockedClients(port, 1);
  const blocked = await fields();
  const actor = conversation(port, cmd('XADD', '{st}s', '5-1', 'f', 'v'), (g) => g.length > 0);
  await actor.reply;
  await reader.reply;
  await blockedClients(port, 0);
  const woken = await fields();
  for (const c of [s, reader, actor]) c.close();
  return [blocked, woken];
}

test("INFO clients while an XREADGROUP is blocked: blocked_clients and (Redis 7.2+) total_blocking_keys as one Redis's", async () => {
  const want = await blockingCounts(reference().masters[0].port);
  expect(want).toEqual(
    redisAtLeast(7, 2)
      ? ['blocked_clients:1 total_blocking_keys:1 total_blocking_keys_on_nokey:1', 'blocked_clients:0 total_blocking_keys:0 total_blocking_keys_on_nokey:0']
      : ['blocked_clients:1', 'blocked_clients:0'],
  );
  expect(await blockingCounts(proxy().address.port)).toEqual(want);
  expect(await blockingCounts(ring.proxy().address.port)).toEqual(want);
}, 30_000);
