// The everyday Redis recipes of issue 5 (rate limiters, lock, flash sale, counters), run through the
// proxy against a real 3-master, 3-replica cluster, each with its keys on more than one master.
// docs/recipes.md shows the same code.

import Redis from 'ioredis';
import { useProxy } from '../helpers/proxy';
import { keyPerMaster } from '../helpers/master-keys';

const { cluster, connect } = useProxy();

/** One hash tag per master, so `name{tag}` keys of one recipe instance share a slot and instances spread. */
async function tagPerMaster(prefix: string): Promise<string[]> {
  return (await keyPerMaster(cluster(), prefix)).map(({ key }) => key);
}

describe('fixed-window rate limiter (10 requests per window)', () => {
  const LIMIT = 10;

  test('INCR then EXPIRE inside MULTI/EXEC', async () => {
    const c = connect();
    for (const user of await tagPerMaster('fw-multi')) {
      const key = `rate:{${user}}`;
      const allowed: boolean[] = [];
      for (let i = 0; i < 15; i++) {
        const [[, count]] = (await c.multi().incr(key).expire(key, 60).exec()) as [[null, number], [null, number]];
        allowed.push(count <= LIMIT);
      }
      expect(allowed.filter(Boolean)).toHaveLength(LIMIT);
      expect(await c.ttl(key)).toBeGreaterThan(0);
    }
  });

  test('as a script that sets the expiry only when the counter is 1', async () => {
    const c = connect();
    const script = "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end return n";
    for (const user of await tagPerMaster('fw-lua')) {
      const key = `rate:{${user}}`;
      const counts: number[] = [];
      for (let i = 0; i < 15; i++) counts.push((await c.eval(script, 1, key, 60)) as number);
      expect(counts.filter((n) => n <= LIMIT)).toHaveLength(LIMIT);
      const ttl = await c.ttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60);
    }
  });
});

test('list-based limiter: LLEN, then RPUSH+EXPIRE in a transaction, else RPUSHX', async () => {
  const c = connect();
  const LIMIT = 5;
  const hit = async (ip: string): Promise<boolean> => {
    const current = await c.llen(ip);
    if (current >= LIMIT) return false;
    if ((await c.exists(ip)) === 0) await c.multi().rpush(ip, ip).expire(ip, 1).exec();
    else await c.rpushx(ip, ip);
    return true;
  };
  for (const ip of await tagPerMaster('10.0.0')) {
    const results: boolean[] = [];
    for (let i = 0; i < 8; i++) results.push(await hit(ip));
    expect(results).toEqual([true, true, true, true, true, false, false, false]);
    expect(await c.llen(ip)).toBe(LIMIT);
    expect(await c.pttl(ip)).toBeGreaterThan(0);
  }
});

describe('sliding-window limiter script (a list of timestamps)', () => {
  // KEYS[1]: the limit (max requests), KEYS[2]: the caller's timestamps; ARGV: now (ms), window (ms).
  const SLIDING = `
    local max = tonumber(redis.call('GET', KEYS[1]) or '3')
    if redis.call('LLEN', KEYS[2]) < max then redis.call('RPUSH', KEYS[2], ARGV[1]) return 1 end
    local oldest = tonumber(redis.call('LRANGE', KEYS[2], 0, 0)[1])
    if tonumber(ARGV[1]) - oldest < tonumber(ARGV[2]) then return 0 end
    redis.call('LPOP', KEYS[2])
    redis.call('RPUSH', KEYS[2], ARGV[1])
    return 1`;

  test('with hash-tagged keys (limit{yes}, 10.0.0.1{yes}) on each master', async () => {
    const c = connect();
    const tags = ['yes', ...(await tagPerMaster('sw'))];
    for (const tag of tags) {
      await c.set(`limit{${tag}}`, '3');
      const call = (now: number): Promise<unknown> => c.eval(SLIDING, 2, `limit{${tag}}`, `10.0.0.1{${tag}}`, now, 1000);
      const results = [await call(0), await call(10), await call(20), await call(30), await call(1005), await call(1006)];
      expect(results).toEqual([1, 1, 1, 0, 1, 0]);
    }
  });

  test('without the tags the keys are in two slots: CROSSSLOT', async () => {
    await expect(connect().eval(SLIDING, 2, 'limit', '10.0.0.1', 0, 1000)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
  });
});

test('distributed lock: SET NX PX, released only by the holder of the token', async () => {
  const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
  const a = connect();
  const b = connect();
  for (const lock of await tagPerMaster('lock')) {
    expect(await a.set(lock, 'token-a', 'PX', 10000, 'NX')).toBe('OK');
    expect(await b.set(lock, 'token-b', 'PX', 10000, 'NX')).toBeNull();
    expect(await b.eval(RELEASE, 1, lock, 'token-b')).toBe(0);
    expect(await a.get(lock)).toBe('token-a');
    expect(await a.eval(RELEASE, 1, lock, 'token-a')).toBe(1);
    expect(await b.set(lock, 'token-b', 'PX', 10000, 'NX')).toBe('OK');
  }
});

test('flash sale: 200 concurrent buyers (each trying twice) for 100 items, on every master', async () => {
  const SALE = `
    if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return -1 end
    local stock = tonumber(redis.call('GET', KEYS[2]))
    if stock <= 0 then return 0 end
    redis.call('SADD', KEYS[1], ARGV[1])
    redis.call('DECR', KEYS[2])
    return 1`;
  const clients = Array.from({ length: 20 }, () => connect());
  for (const sale of await tagPerMaster('sale')) {
    const buyers = `buyers{${sale}}`;
    const stock = `stock{${sale}}`;
    await clients[0].set(stock, '100');
    const attempts = Array.from({ length: 400 }, (_, i) => i % 200).map((buyer, i) =>
      clients[i % clients.length].eval(SALE, 2, buyers, stock, `buyer-${buyer}`) as Promise<number>,
    );
    const results = await Promise.all(attempts);
    const winners = results.map((r, i) => (r === 1 ? i % 200 : -1)).filter((b) => b >= 0);
    expect(winners).toHaveLength(100);
    expect(new Set(winners).size).toBe(100);
    expect(await clients[0].get(stock)).toBe('0');
    expect(await clients[0].scard(buyers)).toBe(100);
  }
});

describe('decrement until zero, under concurrent clients, never below zero', () => {
  const START = 100;
  const STEP = 3;

  test('as a Lua script', async () => {
    const SCRIPT = "local v = tonumber(redis.call('GET', KEYS[1])) if v >= tonumber(ARGV[1]) then return redis.call('DECRBY', KEYS[1], ARGV[1]) end return -1";
    const clients = Array.from({ length: 8 }, () => connect());
    for (const counter of await tagPerMaster('dec-lua')) {
      await clients[0].set(counter, String(START));
      let successes = 0;
      await Promise.all(
        clients.map(async (c) => {
          for (;;) {
            const r = (await c.eval(SCRIPT, 1, counter, STEP)) as number;
            if (r < 0) return;
            successes++;
          }
        }),
      );
      expect(successes).toBe(Math.floor(START / STEP));
      expect(await clients[0].get(counter)).toBe(String(START % STEP));
    }
  });

  test('with WATCH/MULTI/DECRBY/EXEC and retries', async () => {
    const clients = Array.from({ length: 6 }, () => connect());
    for (const counter of await tagPerMaster('dec-watch')) {
      await clients[0].set(counter, String(START));
      let successes = 0;
      let retries = 0;
      const worker = async (c: Redis): Promise<void> => {
        for (;;) {
          await c.watch(counter);
          const v = Number(await c.get(counter));
          if (v < STEP) {
            await c.unwatch();
            return;
          }
          const res = await c.multi().decrby(counter, STEP).exec();
          if (res === null) retries++;
          else successes++;
        }
      };
      await Promise.all(clients.map(worker));
      expect(successes).toBe(Math.floor(START / STEP));
      expect(await clients[0].get(counter)).toBe(String(START % STEP));
    }
  });
});

test('SCRIPT LOAD once, EVALSHA on every master, failover one and SCRIPT FLUSH another: no NOSCRIPT', async () => {
  const c = connect();
  const body = "return redis.call('INCR', KEYS[1])";
  const sha = (await c.script('LOAD', body)) as string;
  const keys = await keyPerMaster(cluster(), 'recipe-sha');
  for (const { key } of keys) expect(await c.evalsha(sha, 1, key)).toBe(1);
  // Fail over the first master to a replica that has no scripts; flush the second master's cache.
  const [replica] = await cluster().replicasOf(keys[0].node);
  await replica.command('SCRIPT', 'FLUSH');
  expect(await replica.cli('CLUSTER', 'FAILOVER')).toBe('OK');
  await cluster().waitForClusterOk();
  await keys[1].node.command('SCRIPT', 'FLUSH');
  for (const { key } of keys) expect(await c.evalsha(sha, 1, key)).toBe(2);
}, 60_000);
