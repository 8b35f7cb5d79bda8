// Real client libraries through slotproxy, each treating it as one standalone Redis, against a
// real 3-master cluster: ioredis 5 (RESP2) and 6 (HELLO 3 by default), node-redis in RESP3 (its
// default) and RESP2, and rate-limiter-flexible's Redis limiter. A failure here is a proxy bug.

import Redis5 from 'ioredis';
import Redis6 from 'ioredis6';
import { createClient, defineScript } from 'redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { useProxy } from '../helpers/proxy';

const env = useProxy();
const port = (): number => env.proxy().address.port;
const opened: { disconnect(): void }[] = [];

afterAll(() => {
  for (const c of opened) c.disconnect();
});

function ioredis5(): Redis5 {
  const c = new Redis5({ host: '127.0.0.1', port: port(), maxRetriesPerRequest: 1 });
  opened.push(c);
  return c;
}

function ioredis6(): Redis6 {
  const c = new Redis6({ host: '127.0.0.1', port: port(), maxRetriesPerRequest: 1 });
  opened.push(c);
  return c;
}

/** A script that adds to a counter and returns the new value: clients run it as EVALSHA, then EVAL on NOSCRIPT. */
const ADD_SCRIPT = "return redis.call('INCRBY', KEYS[1], ARGV[1])";

describe('ioredis 6 in its default settings (HELLO 3)', () => {
  test('speaks RESP3 through the proxy: commands, pipeline, MULTI', async () => {
    const c = ioredis6();
    expect(await c.ping()).toBe('PONG');
    expect(await c.set('lib6:a', '1')).toBe('OK');
    expect(await c.get('lib6:a')).toBe('1');
    const piped = await c.pipeline().incr('lib6:b').incr('lib6:c').get('lib6:a').exec();
    expect(piped).toEqual([
      [null, 1],
      [null, 1],
      [null, '1'],
    ]);
    const tx = await c.multi().incr('{lib6}x').incr('{lib6}x').exec();
    expect(tx).toEqual([
      [null, 1],
      [null, 2],
    ]);
    expect(await c.hset('lib6:h', { f: 'v' })).toBe(1);
    expect(await c.hgetall('lib6:h')).toEqual({ f: 'v' });
  });
});

describe('Pub/Sub over RESP3 (push messages)', () => {
  test('ioredis 6: SUBSCRIBE and PSUBSCRIBE receive what another client publishes', async () => {
    const sub = ioredis6();
    const pub = ioredis6();
    const got: string[] = [];
    const all = new Promise<void>((resolve) => {
      const note = (what: string): void => {
        got.push(what);
        if (got.length === 2) resolve();
      };
      sub.on('message', (ch: string, msg: string) => note(`message ${ch} ${msg}`));
      sub.on('pmessage', (pat: string, ch: string, msg: string) => note(`pmessage ${pat} ${ch} ${msg}`));
    });
    expect(await sub.subscribe('lib6:news')).toBe(1);
    expect(await sub.psubscribe('lib6:*')).toBe(2);
    await pub.publish('lib6:news', 'hi');
    await all;
    expect(got.sort()).toEqual(['message lib6:news hi', 'pmessage lib6:* lib6:news hi']);
    expect(await sub.unsubscribe('lib6:news')).toBe(1);
  });

  test('node-redis (RESP3, its default): subscribe, and a subscribed client still runs commands', async () => {
    const sub = createClient({ socket: { host: '127.0.0.1', port: port(), reconnectStrategy: false } });
    const pub = createClient({ socket: { host: '127.0.0.1', port: port(), reconnectStrategy: false } });
    sub.on('error', () => undefined);
    pub.on('error', () => undefined);
    await Promise.all([sub.connect(), pub.connect()]);
    try {
      const received: string[] = [];
      let gotBoth: () => void = () => undefined;
      const two = new Promise<void>((resolve) => (gotBoth = resolve));
      const note = (what: string): void => {
        received.push(what);
        if (received.length === 2) gotBoth();
      };
      // node-redis resolves subscribe() once the push confirmation arrives; a RESP3 connection in
      // subscribed mode may still send ordinary commands.
      await sub.subscribe('nr:news', (msg, ch) => note(`${ch} ${msg}`));
      await sub.pSubscribe('nr:*', (msg, ch) => note(`pattern ${ch} ${msg}`));
      expect(await sub.set('nr:while-subscribed', 'ok')).toBe('OK');
      expect(await sub.get('nr:while-subscribed')).toBe('ok');
      await pub.publish('nr:news', 'first');
      await two;
      expect(received.sort()).toEqual(['nr:news first', 'pattern nr:news first']);
      await sub.unsubscribe('nr:news');
      await sub.pUnsubscribe('nr:*');
    } finally {
      await Promise.all([sub.quit(), pub.quit()]);
    }
  });
});

describe('ioredis 5', () => {
  test('a pipeline of 1,000 mixed commands over all masters comes back in order', async () => {
    const c = ioredis5();
    const p = c.pipeline();
    for (let i = 0; i < 250; i++) p.set(`lib5:${i}`, `v${i}`).get(`lib5:${i}`).incr(`lib5:n:${i}`).del(`lib5:${i}`);
    const out = await p.exec();
    expect(out).toHaveLength(1000);
    for (let i = 0; i < 250; i++) {
      expect(out?.slice(i * 4, i * 4 + 4)).toEqual([
        [null, 'OK'],
        [null, `v${i}`],
        [null, 1],
        [null, 1],
      ]);
    }
  });

  test('defineCommand scripts (EVALSHA, EVAL on NOSCRIPT) on keys of every master, also after SCRIPT FLUSH on the nodes', async () => {
    const c = ioredis5();
    c.defineCommand('addTo', { numberOfKeys: 1, lua: ADD_SCRIPT });
    const add = (key: string, n: number): Promise<number> => (c as unknown as { addTo(k: string, n: number): Promise<number> }).addTo(key, n);
    const keys = Array.from({ length: 30 }, (_, i) => `lib5:script:${i}`);
    for (const k of keys) expect(await add(k, 2)).toBe(2);
    for (const m of env.cluster().masters) await m.command('SCRIPT', 'FLUSH');
    for (const k of keys) expect(await add(k, 3)).toBe(5);
  });

  test('MULTI/EXEC and WATCH with hash-tagged keys', async () => {
    const c = ioredis5();
    const other = ioredis5();
    await c.set('{acct}:balance', '100');
    await c.watch('{acct}:balance');
    const balance = Number(await c.get('{acct}:balance'));
    await other.set('{acct}:balance', '50'); // touches the watched key
    expect(await c.multi().set('{acct}:balance', String(balance - 10)).exec()).toBeNull();
    expect(await c.get('{acct}:balance')).toBe('50');
    await c.watch('{acct}:balance');
    expect(await c.multi().decrby('{acct}:balance', 10).incr('{acct}:ops').exec()).toEqual([
      [null, 40],
      [null, 1],
    ]);
  });
});

describe('node-redis', () => {
  test.each([
    ['RESP3 (its default)', 3],
    ['RESP2', 2],
  ] as const)('%s: commands, MULTI, a defined script, 500 concurrent commands', async (_label, resp) => {
    const c = createClient({
      RESP: resp,
      socket: { host: '127.0.0.1', port: port(), reconnectStrategy: false },
      scripts: {
        addTo: defineScript({
          NUMBER_OF_KEYS: 1,
          SCRIPT: ADD_SCRIPT,
          parseCommand(parser, key: string, n: number) {
            parser.pushKey(key);
            parser.push(String(n));
          },
          transformReply: (reply: unknown) => reply as number,
        }),
      },
    });
    c.on('error', () => undefined);
    await c.connect();
    const k = `nr${resp}`;
    try {
      expect(await c.set(`${k}:a`, 'x')).toBe('OK');
      expect(await c.get(`${k}:a`)).toBe('x');
      expect(await c.get(`${k}:missing`)).toBeNull();
      expect(await c.hSet(`${k}:h`, { f1: 'v1', f2: 'v2' })).toBe(2);
      expect(await c.hGetAll(`${k}:h`)).toEqual({ f1: 'v1', f2: 'v2' });
      expect(await c.multi().incr(`{${k}}c`).incr(`{${k}}c`).exec()).toEqual([1, 2]);
      expect(await c.addTo(`${k}:script`, 4)).toBe(4);
      expect(await c.addTo(`${k}:script`, 4)).toBe(8);
      const replies = await Promise.all(Array.from({ length: 500 }, (_, i) => c.incr(`${k}:n:${i % 50}`)));
      expect(replies.filter((r) => r === 10)).toHaveLength(50);
    } finally {
      await c.quit();
    }
  });
});

describe('rate-limiter-flexible (RateLimiterRedis on ioredis)', () => {
  test('exact counts under concurrency, keys over every master', async () => {
    const limiter = new RateLimiterRedis({ storeClient: ioredis5(), keyPrefix: 'rlflx', points: 10, duration: 60 });
    const users = Array.from({ length: 30 }, (_, i) => `user-${i}`);
    // 25 concurrent attempts per user, all users at once: exactly 10 may pass for each.
    const outcomes = await Promise.all(
      users.flatMap((u) =>
        Array.from({ length: 25 }, () =>
          limiter.consume(u).then(
            () => ({ u, ok: true }),
            (rejection: unknown) => {
              if (rejection instanceof Error) throw rejection; // a store error, not a rate-limit refusal
              return { u, ok: false };
            },
          ),
        ),
      ),
    );
    for (const u of users) {
      expect(outcomes.filter((o) => o.u === u && o.ok)).toHaveLength(10);
      expect(outcomes.filter((o) => o.u === u && !o.ok)).toHaveLength(15);
    }
    const res = await limiter.get(users[0]);
    expect(res?.consumedPoints).toBe(25);
    expect(res?.remainingPoints).toBe(0);
  });
});
