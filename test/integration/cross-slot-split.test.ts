// crossSlot: split against a real 3-master cluster: MGET/MSET/DEL/UNLINK/EXISTS/TOUCH spanning
// slots are split per slot and merged in key order; everything else spanning slots stays CROSSSLOT.
// The same over standalone nodes in ring mode, split per node.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import { keySlot } from '../../sharding/slot';
import { Ring } from '../../sharding/ring';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { useProxy } from '../helpers/proxy';
import { errorOf } from '../helpers/reply-error';
import { exchange } from '../helpers/raw-exchange';
import { redisBenchmarkBin } from '../../bench/redis-benchmark';

const run = promisify(execFile);
const env = useProxy({ crossSlot: 'split' });
const CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot";

describe('crossSlot: split', () => {
  const keys = Array.from({ length: 20 }, (_, i) => `split:${i}`);

  test('the keys really span slots and masters', () => {
    expect(new Set(keys.map((k) => keySlot(Buffer.from(k)))).size).toBe(20);
  });

  test('MSET then MGET in key order, missing keys as nil', async () => {
    const c = env.connect();
    const pairs = keys.slice(0, 10).flatMap((k, i) => [k, `v${i}`]);
    expect(await c.mset(...pairs)).toBe('OK');
    const values = await c.mget(...keys);
    expect(values).toEqual([...keys.slice(0, 10).map((_, i) => `v${i}`), ...Array(10).fill(null)]);
    // Every master holds some of them: read back directly from the nodes.
    let direct = 0;
    for (const m of env.cluster().masters) direct += Number(await m.command('DBSIZE'));
    expect(direct).toBeGreaterThanOrEqual(10);
  });

  test('a split MGET is the bytes one Redis sends: raw values in key order, RESP2 and RESP3 nulls', async () => {
    const c = env.connect();
    await c.mset('split:raw:a', 'x', 'split:raw:c', '\r\n$-1\r\n'); // a value that looks like RESP
    const port = env.proxy().address.port;
    expect((await exchange(port, [['MGET', 'split:raw:a', 'split:raw:b', 'split:raw:c', 'split:raw:a']])).replies).toBe(
      '*4\r\n$1\r\nx\r\n$-1\r\n$7\r\n\r\n$-1\r\n\r\n$1\r\nx\r\n',
    );
    expect((await exchange(port, [['HELLO', '3'], ['MGET', 'split:raw:a', 'split:raw:b', 'split:raw:c']])).replies).toMatch(
      /\*3\r\n\$1\r\nx\r\n_\r\n\$7\r\n\r\n\$-1\r\n\r\n$/,
    );
    // Values past the merge's byte-loop size (64 bytes), one of them larger than a socket read.
    const big = 'y'.repeat(100_000);
    await c.mset('split:raw:65', 'z'.repeat(65), 'split:raw:big', big);
    expect((await exchange(port, [['MGET', 'split:raw:big', 'split:raw:a', 'split:raw:65']])).replies).toBe(
      `*3\r\n$100000\r\n${big}\r\n$1\r\nx\r\n$65\r\n${'z'.repeat(65)}\r\n`,
    );
  });

  test('EXISTS, TOUCH, DEL, UNLINK are summed, duplicates counted as Redis counts them', async () => {
    const c = env.connect();
    await c.mset('split:a', '1', 'split:b', '2', 'split:c', '3');
    expect(await c.exists('split:a', 'split:b', 'split:c', 'split:nope', 'split:a')).toBe(4);
    expect(await c.touch('split:a', 'split:b', 'split:nope')).toBe(2);
    expect(await c.del('split:a', 'split:nope', 'split:b')).toBe(2);
    expect(await c.unlink('split:c', 'split:a', 'split:c')).toBe(1);
    expect(await c.exists('split:a', 'split:b', 'split:c')).toBe(0);
  });

  test('MSETNX, SUNION, RENAME spanning slots are still refused; MSET with a missing value gets Redis\'s arity error', async () => {
    const c = env.connect();
    expect(await errorOf(c.msetnx('split:x', '1', 'split:y', '2'))).toBe(CROSSSLOT);
    expect(await errorOf(c.sunion('split:x', 'split:y'))).toBe(CROSSSLOT);
    expect(await errorOf(c.rename('split:0', 'split:1'))).toBe(CROSSSLOT);
    expect(await errorOf(c.call('MSET', 'split:0', 'a', 'split:1'))).toBe("ERR wrong number of arguments for 'mset' command");
  });

  test('a pipeline mixing split and plain commands keeps reply order', async () => {
    const c = env.connect();
    const p = c.pipeline();
    for (let i = 0; i < 50; i++) {
      p.mset(`split:p${i}`, `a${i}`, `split:q${i}`, `b${i}`);
      p.get(`split:p${i}`);
      p.mget(`split:q${i}`, `split:p${i}`, `split:none${i}`);
      p.del(`split:p${i}`, `split:q${i}`);
    }
    const out = await p.exec();
    for (let i = 0; i < 50; i++) {
      expect(out?.slice(i * 4, i * 4 + 4)).toEqual([
        [null, 'OK'],
        [null, `a${i}`],
        [null, [`b${i}`, `a${i}`, null]],
        [null, 2],
      ]);
    }
  });

  test("redis-benchmark's MGET of random keys works through the proxy", async () => {
    const port = String(env.proxy().address.port);
    const { stdout, stderr } = await run(redisBenchmarkBin(), [
      '-p', port, '-n', '2000', '-r', '1000', '-c', '10', '--csv',
      'MGET', 'bm:__rand_int__', 'bm2:__rand_int__', 'bm3:__rand_int__',
    ]);
    expect(stderr + stdout).not.toMatch(/CROSSSLOT|ERR/);
    expect(stdout).toMatch(/"MGET bm:__rand_int__ bm2:__rand_int__ bm3:__rand_int__","\d+/);
    expect(Number(/split_commands:(\d+)/.exec(await env.connect().info('proxy'))?.[1])).toBeGreaterThanOrEqual(2000);
  });

  test('a key holding no string is nil in a split MGET, byte for byte as one node answers; a split MSET overwrites it', async () => {
    const c = env.connect();
    await c.set('split:str', 'x');
    await c.rpush('split:list', 'a');
    await c.hset('split:hash', 'f', 'v');
    const port = env.proxy().address.port;
    const viaProxy = (await exchange(port, [['MGET', 'split:str', 'split:list', 'split:none', 'split:hash']])).replies;
    // The reference: the same values in one slot, asked of the node that owns it.
    const node = await env.cluster().masterFor(keySlot(Buffer.from('{ref}')));
    await node.command('SET', '{ref}str', 'x');
    await node.command('RPUSH', '{ref}list', 'a');
    await node.command('HSET', '{ref}hash', 'f', 'v');
    const direct = (await exchange(node.port, [['MGET', '{ref}str', '{ref}list', '{ref}none', '{ref}hash']])).replies;
    expect(viaProxy).toBe(direct);
    expect(viaProxy).toBe('*4\r\n$1\r\nx\r\n$-1\r\n$-1\r\n$-1\r\n');
    expect(await c.mset('split:list', 'now a string', 'split:str', 'y')).toBe('OK');
    expect(await c.type('split:list')).toBe('string');
    expect(await c.mget('split:list', 'split:str')).toEqual(['now a string', 'y']);
  });

  test('parts that meet ASK and MOVED while a slot changes masters are followed; the merge stays exact', async () => {
    const cluster = env.cluster();
    const c = env.connect();
    // An empty slot (so moving it moves no key), and a key of it.
    let tag = 0;
    while (Number(await (await cluster.masterFor(keySlot(Buffer.from(`mv${tag}`)))).command('CLUSTER', 'COUNTKEYSINSLOT', keySlot(Buffer.from(`mv${tag}`)))) !== 0) tag++;
    const slot = keySlot(Buffer.from(`mv${tag}`));
    const key = `{mv${tag}}k`;
    const from = await cluster.masterFor(slot);
    const to = cluster.masters.find((m) => m !== from) as typeof from;
    const [fromId, toId] = await Promise.all([from, to].map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
    const info = async (field: string): Promise<number> => Number(new RegExp(`${field}:(\\d+)`).exec(await c.info('proxy'))?.[1]);

    // Migrating: the key is not on the old master, which answers ASK for it.
    await to.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
    await from.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
    const asks = await info('redirections_ask');
    expect(await c.mset(key, 'moved', 'split:m1', 'one', 'split:m2', 'two')).toBe('OK');
    expect(await c.mget('split:m1', key, 'split:m2', 'split:none')).toEqual(['one', 'moved', 'two', null]);
    expect(await info('redirections_ask')).toBeGreaterThanOrEqual(asks + 2);
    expect(await to.command('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(1);
    expect(await from.command('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0);

    // Moved: the proxy still sends the part to the old master, which answers MOVED.
    for (const m of cluster.masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
    const moved = await info('redirections_moved');
    expect(await c.mget(key, 'split:m1')).toEqual(['moved', 'one']);
    expect(await info('redirections_moved')).toBeGreaterThan(moved);
    expect(await c.del('split:m1', key, 'split:m2')).toBe(3);
  });
});

describe('crossSlot: split in ring mode (standalone nodes)', () => {
  let nodes: StandaloneNodes | undefined;
  let proxy: ProxyServer | undefined;
  let client: Redis | undefined;
  let ring: Ring;

  beforeAll(async () => {
    nodes = await StandaloneNodes.start(3);
    const ringNodes = nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
    ring = new Ring({ hash: 'murmur', hashTag: '{}', nodes: ringNodes });
    proxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', crossSlot: 'split', ring: { hash: 'murmur', nodes: ringNodes }, log: { level: 'silent' } }));
    client = new Redis({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0 });
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close(200);
    await nodes?.stop();
  }, 30_000);

  test('MSET/MGET/EXISTS/DEL over keys of every node are split per node and merged in key order', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => `ringsplit:${i}`);
    const owners = keys.map((k) => ring.indexOf(Buffer.from(k)));
    expect(new Set(owners).size).toBe(3);
    expect(await client!.mset(...keys.flatMap((k, i) => [k, `v${i}`]))).toBe('OK');
    // Each key is on the node the ring names, and only there.
    for (let i = 0; i < keys.length; i++) {
      for (let n = 0; n < 3; n++) expect(await nodes!.nodes[n].command('GET', keys[i])).toBe(n === owners[i] ? `v${i}` : null);
    }
    expect(await client!.mget(keys[5], 'ringsplit:none', keys[0], keys[29])).toEqual(['v5', null, 'v0', 'v29']);
    expect(await client!.exists(...keys, keys[0], 'ringsplit:none')).toBe(31);
    expect(await client!.del(...keys)).toBe(30);
    await expect(client!.msetnx(keys[0], 'a', keys[1], 'b', keys[2], 'c')).rejects.toThrow(CROSSSLOT);
  });
});
