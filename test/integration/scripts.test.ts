// Scripts through the proxy (SPEC section 4): EVAL*/FCALL* routing and numkeys errors, SCRIPT and
// FUNCTION fan-outs, NOSCRIPT healing, preloading from the config, redis-cli --eval, the bounded store.

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { useProxy, startProxy, client } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import { ProxyServer } from '../../proxy/server/server';
import * as logging from '../../proxy/telemetry/log';
import { errorOf } from '../helpers/reply-error';
import { redisCliBin } from '../../cmd/sandbox/helpers';

const { cluster, proxy, connect } = useProxy();

/** A node's own NOSCRIPT, what one server answers (Valkey's has no "Please use EVAL."). */
async function nodeNoScript(): Promise<string> {
  const text = await errorOf(cluster().masters[0].command('EVALSHA', sha1('never loaded anywhere'), '0'));
  expect(text).toMatch(/^NOSCRIPT No matching script\./);
  return text;
}

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');
const GET_SCRIPT = "return redis.call('GET', KEYS[1])";
const SET_SCRIPT = "redis.call('SET', KEYS[1], ARGV[1]); return ARGV[1]";

describe('EVAL and FCALL routing', () => {
  test('EVAL with keys on every master runs on the owner; no keys runs anywhere', async () => {
    const c = connect();
    for (const { key, node } of await keyPerMaster(cluster(), 'eval')) {
      expect(await c.eval(SET_SCRIPT, 1, key, `v-${key}`)).toBe(`v-${key}`);
      expect(await node.command('GET', key)).toBe(`v-${key}`);
    }
    expect(await c.eval('return 42', 0)).toBe(42);
    expect(await c.call('EVAL_RO', 'return 7', '0')).toBe(7);
  });

  test('keys in different slots: CROSSSLOT', async () => {
    const c = connect();
    const [a, b] = await keyPerMaster(cluster(), 'cross');
    expect(await errorOf(c.eval(GET_SCRIPT, 2, a.key, b.key))).toBe("CROSSSLOT Keys in request don't hash to the same slot");
    expect(await c.eval("return redis.call('MGET', KEYS[1], KEYS[2])", 2, '{t}a', '{t}b')).toEqual([null, null]);
  });

  test.each([
    ['EVAL', 'return 1', 'abc', "ERR value is not an integer or out of range"],
    ['EVAL', 'return 1', '-1', "ERR Number of keys can't be negative"],
    ['EVAL', 'return 1', '3', "ERR Number of keys can't be greater than number of args"],
    ['EVALSHA', sha1('return 1'), '2', "ERR Number of keys can't be greater than number of args"],
    ['EVALSHA_RO', sha1('return 1'), 'x1', "ERR value is not an integer or out of range"],
    ['EVAL', 'return 1', '99999999999999999999', "ERR value is not an integer or out of range"],
  ])('%s with numkeys %s... gets Redis\'s error', async (cmd, script, numkeys, expected) => {
    const c = connect();
    const args = numkeys === '3' ? [script, numkeys, 'k1'] : [script, numkeys];
    expect(await errorOf(c.call(cmd, ...args))).toBe(expected);
    // The same text a single node gives.
    const node = cluster().masters[0];
    expect(await errorOf(node.command(cmd, ...args))).toBe(expected);
  });

  test('FUNCTION LOAD/DELETE/FLUSH reach every master; FCALL routes by key', async () => {
    const c = connect();
    const lib =
      "#!lua name=proxylib\nredis.register_function{function_name='getk', callback=function(keys, args) return redis.call('GET', keys[1]) end, flags={'no-writes'}}";
    expect(await c.call('FUNCTION', 'LOAD', lib)).toBe('proxylib');
    for (const m of cluster().masters) expect(JSON.stringify(await m.command('FUNCTION', 'LIST'))).toContain('proxylib');
    for (const { key } of await keyPerMaster(cluster(), 'fcall')) {
      await c.set(key, `f-${key}`);
      expect(await c.call('FCALL', 'getk', '1', key)).toBe(`f-${key}`);
      expect(await c.call('FCALL_RO', 'getk', '1', key)).toBeDefined();
    }
    expect(await c.call('FUNCTION', 'DELETE', 'proxylib')).toBe('OK');
    for (const m of cluster().masters) expect(await m.command('FUNCTION', 'LIST')).toEqual([]);
    await c.call('FUNCTION', 'LOAD', lib);
    expect(await c.call('FUNCTION', 'FLUSH')).toBe('OK');
    for (const m of cluster().masters) expect(await m.command('FUNCTION', 'LIST')).toEqual([]);
  });
});

describe('SCRIPT commands and NOSCRIPT healing', () => {
  test('SCRIPT LOAD reaches every master and returns the one SHA; SCRIPT EXISTS', async () => {
    const c = connect();
    const body = "return 'loaded-" + Date.now() + "'";
    expect(await c.script('LOAD', body)).toBe(sha1(body));
    for (const m of cluster().masters) expect(await m.command('SCRIPT', 'EXISTS', sha1(body))).toEqual([1]);
    expect(await c.script('EXISTS', sha1(body), sha1('never seen'))).toEqual([1, 0]);
    // Still 1 when a master lost it: the proxy holds the body and loads it there on NOSCRIPT.
    await cluster().masters[1].command('SCRIPT', 'FLUSH');
    expect(await c.script('EXISTS', sha1(body))).toEqual([1]);
  });

  test('EVALSHA of a SCRIPT LOADed script still works after SCRIPT FLUSH on a node: no NOSCRIPT', async () => {
    const c = connect();
    const body = `${GET_SCRIPT} -- heal ${Date.now()}`;
    const sha = await c.script('LOAD', body) as string;
    const healedBefore = Number(/scripts_noscript_healed:(\d+)/.exec(await c.info('proxy'))?.[1]);
    for (const { key, node } of await keyPerMaster(cluster(), 'heal')) {
      await c.set(key, `h-${key}`);
      await node.command('SCRIPT', 'FLUSH');
      expect(await c.evalsha(sha, 1, key)).toBe(`h-${key}`);
      expect(await node.command('SCRIPT', 'EXISTS', sha)).toEqual([1]);
    }
    const healedAfter = Number(/scripts_noscript_healed:(\d+)/.exec(await c.info('proxy'))?.[1]);
    expect(healedAfter - healedBefore).toBe(3);
  });

  test('a script seen in an EVAL is healed too; one never seen gets NOSCRIPT', async () => {
    const c = connect();
    const body = `return 'eval-seen-${Date.now()}'`;
    expect(await c.eval(body, 0)).toMatch(/^eval-seen/);
    for (const m of cluster().masters) await m.command('SCRIPT', 'FLUSH');
    expect(await c.evalsha(sha1(body), 0)).toMatch(/^eval-seen/);
    expect(await errorOf(c.evalsha(sha1('return "unknown"'), 0))).toBe(await nodeNoScript());
  });

  test('SCRIPT FLUSH through the proxy forgets: EVALSHA is NOSCRIPT as on one server', async () => {
    const c = connect();
    const body = `return 'flushed-${Date.now()}'`;
    const sha = await c.script('LOAD', body) as string;
    expect(await c.script('FLUSH')).toBe('OK');
    for (const m of cluster().masters) expect(await m.command('SCRIPT', 'EXISTS', sha)).toEqual([0]);
    expect(await errorOf(c.evalsha(sha, 0))).toBe(await nodeNoScript());
  });

  test('SCRIPT KILL with no script running: NOTBUSY', async () => {
    expect(await errorOf(connect().script('KILL'))).toBe('NOTBUSY No scripts in execution right now.');
  });

  test('ioredis defineCommand (EVALSHA, falling back to EVAL) works across masters', async () => {
    const c = connect();
    c.defineCommand('getViaScript', { numberOfKeys: 1, lua: `${GET_SCRIPT} -- defined` });
    for (const { key } of await keyPerMaster(cluster(), 'defined')) {
      await c.set(key, 'd');
      expect(await (c as Redis & { getViaScript(k: string): Promise<string> }).getViaScript(key)).toBe('d');
    }
  });

  test('redis-cli --eval file.lua k1 k2 , a1 a2', async () => {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-eval-'));
    try {
      const file = path.join(dir, 'set2.lua');
      await fsp.writeFile(file, "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[2]); return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}\n");
      const out = await new Promise<string>((resolve, reject) =>
        execFile(redisCliBin(), ['-p', String(proxy().address.port), '--eval', file, '{cli}k1', '{cli}k2', ',', 'a1', 'a2'], (err, stdout) =>
          err ? reject(err) : resolve(stdout),
        ),
      );
      expect(out.trim().split('\n')).toEqual(['{cli}k1', '{cli}k2', 'a1', 'a2']);
      expect(await connect().mget('{cli}k1', '{cli}k2')).toEqual(['a1', 'a2']);
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('preloaded scripts and the bounded store', () => {
  let dir = '';
  let preloading: ProxyServer | undefined;
  let c: Redis | undefined;
  const good = "return 'preloaded-good'";
  const other = "return redis.call('INCR', KEYS[1])";
  const errors: unknown[][] = [];

  beforeAll(async () => {
    dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-scripts-'));
    await fsp.mkdir(path.join(dir, 'lua'));
    await fsp.writeFile(path.join(dir, 'lua', 'a-good.lua'), good);
    await fsp.writeFile(path.join(dir, 'lua', 'b-broken.lua'), 'return (');
    await fsp.writeFile(path.join(dir, 'lua', 'not-lua.txt'), 'return (');
    await fsp.writeFile(path.join(dir, 'incr.lua'), other);
    // The proxy's start sets the log level (which rebinds pino's methods): keep our spy in place.
    jest.spyOn(logging, 'setLogLevel').mockImplementation(() => undefined);
    jest.spyOn(logging.log, 'error').mockImplementation(((...args: unknown[]) => {
      errors.push(args);
    }) as typeof logging.log.error);
    preloading = await startProxy(cluster().seeds, {
      scripts: [path.join(dir, 'lua'), path.join(dir, 'incr.lua')],
      limits: { scriptStoreBytes: 200 },
    });
    c = client(preloading);
  }, 60_000);

  afterAll(async () => {
    c?.disconnect();
    await preloading?.close(500);
    jest.restoreAllMocks();
    await fsp.rm(dir, { recursive: true, force: true });
  });

  test('a broken script is reported with its path and Redis\'s error; the others load on every master', async () => {
    expect(errors).toHaveLength(1);
    const [fields] = errors[0] as [{ script: string; error: string }];
    expect(fields.script).toBe(path.join(dir, 'lua', 'b-broken.lua'));
    expect(fields.error).toBe("ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'");
    for (const m of cluster().masters) expect(await m.command('SCRIPT', 'EXISTS', sha1(good), sha1(other))).toEqual([1, 1]);
  });

  test('EVALSHA of a preloaded file works with no SCRIPT LOAD by the client', async () => {
    for (const m of cluster().masters) await m.command('SCRIPT', 'FLUSH');
    expect(await c!.evalsha(sha1(good), 0)).toBe('preloaded-good');
    for (const { key } of await keyPerMaster(cluster(), 'pre')) expect(await c!.evalsha(sha1(other), 1, key)).toBeGreaterThan(0);
  });

  test('a master that lost its scripts gets them back without any client asking', async () => {
    const node = cluster().masters[2];
    await node.command('SCRIPT', 'FLUSH');
    await waitFor('the preloader to reload the scripts', async () => JSON.stringify(await node.command('SCRIPT', 'EXISTS', sha1(good), sha1(other))) === '[1,1]');
  });

  test('a replica promoted by a failover gets the preloaded scripts', async () => {
    const [{ node: master }] = await keyPerMaster(cluster(), 'promote');
    const [replica] = await cluster().replicasOf(master);
    await replica.command('SCRIPT', 'FLUSH');
    expect(await replica.command('SCRIPT', 'EXISTS', sha1(good))).toEqual([0]);
    expect(await replica.cli('CLUSTER', 'FAILOVER')).toBe('OK');
    await cluster().waitForClusterOk();
    await waitFor('the promoted replica to have the preloaded scripts', async () => JSON.stringify(await replica.command('SCRIPT', 'EXISTS', sha1(good), sha1(other))) === '[1,1]');
  }, 60_000);

  test('the store is bounded: INFO shows its size; old bodies are evicted, preloaded ones kept', async () => {
    for (let i = 0; i < 10; i++) await c!.eval(`return ${i} -- padding padding padding padding`, 0);
    const info = await c!.info('proxy');
    expect(info).toContain('scripts_store_max_bytes:200');
    const stored = Number(/scripts_stored_bytes:(\d+)/.exec(info)?.[1]);
    const preloadedBytes = good.length + other.length;
    expect(stored).toBeLessThanOrEqual(200 + preloadedBytes);
    expect(Number(/scripts_evicted:(\d+)/.exec(info)?.[1])).toBeGreaterThan(0);
    expect(await c!.evalsha(sha1(good), 0)).toBe('preloaded-good');
  });
});
