// Ring mode places every key exactly where twemproxy (a real nutcracker) places it: keys written
// through one are read through the other, for many hashes, weights, named and unnamed servers,
// hash tags and binary keys, with distribution ketama and modula; with distribution random, both
// send every request to a live server.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { isListening } from '../../cmd/sandbox/ports';
import { DistributionName, HashName } from '../../config/schema';
import { convertTwemproxy } from '../../config/twemproxy';
import { Nutcracker, NutcrackerPool, nutcrackerYaml } from './ring-nutcracker';
import { Ring } from '../../sharding/ring';
import { xorshift32 } from '../helpers/random';

interface Server {
  addr: string;
  weight: number;
  name?: string;
}

const KEYS_PER_SIDE = 1500;

function keySet(seed: number): Buffer[] {
  const rnd = xorshift32(seed);
  const keys: Buffer[] = [];
  for (let i = 0; i < KEYS_PER_SIDE; i++) {
    if (i % 3 === 0) {
      // Binary: every byte value, high bytes in particular (C's signed char).
      const len = 1 + Math.floor(rnd() * 24);
      const b = Buffer.alloc(len);
      for (let j = 0; j < len; j++) b[j] = Math.floor(rnd() * 256);
      b[0] = 0x80 + (i % 128);
      // The seed and index at the end keep the two sets of a scenario apart.
      keys.push(Buffer.concat([b, Buffer.from([seed & 0xff, (seed >> 8) & 0xff, i & 0xff, i >> 8])]));
    } else if (i % 7 === 0) {
      keys.push(Buffer.from(`user:{${i % 50}}:profile:${seed}:${i}`));
    } else {
      keys.push(Buffer.from(`key:${seed}:${i}`));
    }
  }
  // Distinct keys only (binary keys could collide).
  return [...new Map(keys.map((k) => [k.toString('hex'), k])).values()];
}

async function writeAll(client: Redis, keys: Buffer[], tag: string): Promise<void> {
  const p = client.pipeline();
  for (const k of keys) p.set(k, Buffer.concat([Buffer.from(tag), k]));
  const results = await p.exec();
  for (const [err] of results ?? []) if (err !== null) throw err;
}

/** Keys whose value does not come back through `client`. */
async function missing(client: Redis, keys: Buffer[], tag: string): Promise<number> {
  const p = client.pipeline();
  for (const k of keys) p.getBuffer(k);
  const results = (await p.exec()) ?? [];
  let bad = 0;
  results.forEach(([err, v], i) => {
    if (err !== null || !Buffer.isBuffer(v) || !v.equals(Buffer.concat([Buffer.from(tag), keys[i]]))) bad++;
  });
  return bad;
}

function connect(port: number): Redis {
  return new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, enableReadyCheck: false, disableClientInfo: true });
}

async function checkScenario(
  nodes: StandaloneNodes | RedisNode[],
  hash: HashName,
  servers: Server[],
  hashTag: string | undefined,
  seed: number,
  distribution: DistributionName = 'ketama',
): Promise<{ fromNutcracker: number; fromSlotproxy: number; perNode: number[] }> {
  const all = Array.isArray(nodes) ? nodes : nodes.nodes;
  await Promise.all(all.map((n) => n.command('FLUSHALL')));
  const nc = await Nutcracker.start({
    hash,
    distribution,
    hashTag,
    servers: servers.map((s) => `${s.addr}:${s.weight}${s.name === undefined ? '' : ` ${s.name}`}`),
  });
  let proxy: ProxyServer | undefined;
  const clients: Redis[] = [];
  try {
    proxy = await ProxyServer.start(
      parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash, hashTag: hashTag ?? '', distribution, nodes: servers }, log: { level: 'silent' } }),
    );
    const viaNc = connect(nc.port);
    const viaSp = connect(proxy.address.port);
    clients.push(viaNc, viaSp);
    const a = keySet(seed);
    const b = keySet(seed + 1000);
    await writeAll(viaNc, a, 'nc:');
    await writeAll(viaSp, b, 'sp:');
    const perNode = await Promise.all(all.map(async (n) => Number(await n.command('DBSIZE'))));
    return { fromNutcracker: await missing(viaSp, a, 'nc:'), fromSlotproxy: await missing(viaNc, b, 'sp:'), perNode };
  } finally {
    for (const c of clients) c.disconnect();
    await proxy?.close(200);
    await nc.stop();
  }
}

describe('ring mode is byte-for-byte compatible with twemproxy', () => {
  let nodes: StandaloneNodes | undefined;
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(4);
  }, 60_000);
  afterAll(async () => {
    await nodes?.stop();
  }, 30_000);

  const named = (weights: number[], names = ['alpha', 'b', 'server-three', 'd']) => (): Server[] =>
    weights.map((weight, i) => ({ name: names[i], addr: nodes!.addresses[i], weight }));
  const unnamed = (weights: number[]) => (): Server[] => weights.map((weight, i) => ({ addr: nodes!.addresses[i], weight }));

  const SCENARIOS: [HashName, string, () => Server[], string | undefined][] = [
    ['md5', 'named, equal weights, {} tag', named([1, 1, 1, 1]), '{}'],
    ['fnv1a_64', 'unnamed, weights 1,2,3', unnamed([1, 2, 3]), '{}'],
    ['murmur', 'named, weights 3,1,2,5', named([3, 1, 2, 5]), undefined],
    ['crc32a', 'unnamed, equal weights', unnamed([1, 1, 1, 1]), undefined],
    ['one_at_a_time', 'named, weights 1,1,4', named([1, 1, 4]), '{}'],
    ['hsieh', 'unnamed, weights 2,1', unnamed([2, 1]), undefined],
    ['jenkins', 'named, weights 1,3,1,2', named([1, 3, 1, 2]), '{}'],
    ['crc16', 'named, equal weights', named([1, 1, 1]), undefined],
    ['crc32', 'unnamed, weights 5,3,1', unnamed([5, 3, 1]), undefined],
    ['fnv1_64', 'named, weights 1,2', named([1, 2]), '::'],
    ['fnv1_32', 'unnamed, equal weights', unnamed([1, 1, 1, 1]), undefined],
    ['fnv1a_32', 'named, weights 7,1,1,1', named([7, 1, 1, 1]), '{}'],
  ];

  test.each(SCENARIOS)('%s, %s', async (hash, _what, servers, tag) => {
    const r = await checkScenario(nodes!, hash, servers(), tag, hash.length * 31);
    expect({ fromNutcracker: r.fromNutcracker, fromSlotproxy: r.fromSlotproxy }).toEqual({ fromNutcracker: 0, fromSlotproxy: 0 });
    // Keys really are spread: every server holds some (a one-node ring proves nothing). Not for
    // crc32: its 15-bit values all fall before the first few points, in twemproxy too.
    if (hash !== 'crc32') for (let i = 0; i < servers().length; i++) expect(r.perNode[i]).toBeGreaterThan(0);
    else expect(r.perNode.filter((n) => n > 0).length).toBeGreaterThanOrEqual(1);
  }, 30_000);

  // distribution: modula, every hash: hash % total weight over the servers in config order.
  const MODULA_SCENARIOS: [HashName, string, () => Server[], string | undefined][] = [
    ['md5', 'named, weights 1,2,3,1, {} tag', named([1, 2, 3, 1]), '{}'],
    ['fnv1a_64', 'unnamed, equal weights, {} tag', unnamed([1, 1, 1, 1]), '{}'],
    ['murmur', 'named, weights 3,1,2,5', named([3, 1, 2, 5]), undefined],
    ['crc32a', 'unnamed, weights 2,1', unnamed([2, 1]), undefined],
    ['one_at_a_time', 'named, weights 1,1,4', named([1, 1, 4]), '{}'],
    ['hsieh', 'unnamed, weights 1,2,3', unnamed([1, 2, 3]), '::'],
    ['jenkins', 'named, weights 1,3,1,2', named([1, 3, 1, 2]), '{}'],
    ['crc16', 'named, equal weights', named([1, 1, 1]), undefined],
    ['crc32', 'unnamed, weights 5,3,1', unnamed([5, 3, 1]), '{}'],
    ['fnv1_64', 'named, weights 1,2', named([1, 2]), '::'],
    ['fnv1_32', 'unnamed, weights 4,1,1,1', unnamed([4, 1, 1, 1]), undefined],
    ['fnv1a_32', 'named, weights 7,1,1,1', named([7, 1, 1, 1]), '{}'],
  ];

  test.each(MODULA_SCENARIOS)('modula, %s, %s', async (hash, _what, servers, tag) => {
    const r = await checkScenario(nodes!, hash, servers(), tag, hash.length * 37, 'modula');
    expect({ fromNutcracker: r.fromNutcracker, fromSlotproxy: r.fromSlotproxy }).toEqual({ fromNutcracker: 0, fromSlotproxy: 0 });
    // Every server holds keys (crc32's 15-bit values spread too: modulo, not a continuum).
    for (let i = 0; i < servers().length; i++) expect(r.perNode[i]).toBeGreaterThan(0);
  }, 30_000);

  test.each(['ketama', 'modula'] as const)('auto_eject_hosts, %s: with a node down, both eject it and place its keys on the same live nodes; both take it back', async (distribution) => {
    const servers: Server[] = [0, 1, 2].map((i) => ({ name: `n${i}`, addr: nodes!.addresses[i], weight: i + 1 }));
    await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
    const nc = await Nutcracker.start({
      hash: 'fnv1a_64',
      distribution,
      hashTag: '{}',
      servers: servers.map((s) => `${s.addr}:${s.weight} ${s.name}`),
      autoEject: { failureLimit: 1, retryTimeoutMs: 4000 },
    });
    let proxy: ProxyServer | undefined;
    const clients: Redis[] = [];
    const down = nodes!.nodes[2];
    try {
      proxy = await ProxyServer.start(
        parseConfig({
          listen: '127.0.0.1:0',
          mode: 'ring',
          ring: { hash: 'fnv1a_64', hashTag: '{}', distribution, nodes: servers, autoEjectHosts: true, serverFailureLimit: 1, serverRetryTimeoutMs: 4000 },
          log: { level: 'silent' },
        }),
      );
      const viaNc = connect(nc.port);
      const viaSp = connect(proxy.address.port);
      clients.push(viaNc, viaSp);
      await down.stop();
      // A key of the dead node: each proxy fails it until it has ejected the node, then serves it elsewhere.
      const full = new Ring({ hash: 'fnv1a_64', hashTag: '{}', distribution, nodes: servers });
      let probe = 0;
      while (full.indexOf(Buffer.from(`probe${probe}`)) !== 2) probe++;
      for (const c of [viaNc, viaSp]) {
        const deadline = Date.now() + 15_000;
        for (;;) {
          const ok = await c.set(`probe${probe}`, 'x').then(() => true, () => false);
          if (ok) break;
          if (Date.now() > deadline) throw new Error('the dead node was never ejected');
        }
      }
      const a = keySet(77);
      const b = keySet(1077);
      await writeAll(viaNc, a, 'nc:');
      await writeAll(viaSp, b, 'sp:');
      expect({ fromNutcracker: await missing(viaSp, a, 'nc:'), fromSlotproxy: await missing(viaNc, b, 'sp:') }).toEqual({ fromNutcracker: 0, fromSlotproxy: 0 });
      // The keys really were redistributed over the two live nodes.
      const sizes = await Promise.all(nodes!.nodes.slice(0, 2).map(async (n) => Number(await n.command('DBSIZE'))));
      expect(sizes[0] + sizes[1]).toBe(a.length + b.length + 1);

      // Back: once the retry timeout has passed, each proxy sends the node's keys to it again.
      await down.restart();
      for (const c of [viaNc, viaSp]) {
        const deadline = Date.now() + 15_000;
        for (let i = 0; ; i++) {
          await c.set(`probe${probe}`, `back${i}`).catch(() => undefined);
          if ((await down.command('GET', `probe${probe}`)) === `back${i}`) break;
          if (Date.now() > deadline) throw new Error('the node was never taken back');
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      const a2 = keySet(78);
      const b2 = keySet(1078);
      await writeAll(viaNc, a2, 'nc:');
      await writeAll(viaSp, b2, 'sp:');
      expect({ fromNutcracker: await missing(viaSp, a2, 'nc:'), fromSlotproxy: await missing(viaNc, b2, 'sp:') }).toEqual({ fromNutcracker: 0, fromSlotproxy: 0 });
      expect(Number(await down.command('DBSIZE'))).toBeGreaterThan(500);
    } finally {
      for (const c of clients) c.disconnect();
      await proxy?.close(200);
      await nc.stop();
      if (!down.running) await down.restart();
    }
  }, 60_000);

  test('random: a nutcracker.yml pool is imported as it is; both send every request to a live server, also with one ejected', async () => {
    const pool: NutcrackerPool = {
      hash: 'fnv1a_64',
      distribution: 'random',
      hashTag: '{}',
      // Weights are ignored by random, in nutcracker as here.
      servers: [0, 1, 2].map((i) => `${nodes!.addresses[i]}:${[1, 5, 1][i]}`),
      autoEject: { failureLimit: 1, retryTimeoutMs: 60_000 },
    };
    const imported = convertTwemproxy(nutcrackerYaml(pool, '127.0.0.1:0'));
    expect(imported[0].config.ring).toMatchObject({ distribution: 'random', autoEjectHosts: true });
    await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
    const nc = await Nutcracker.start(pool);
    let proxy: ProxyServer | undefined;
    const clients: Redis[] = [];
    const down = nodes!.nodes[2];
    const sizes = (): Promise<number[]> => Promise.all(nodes!.nodes.slice(0, 3).map(async (n) => (n.running ? Number(await n.command('DBSIZE')) : 0)));
    try {
      proxy = await ProxyServer.start(parseConfig({ ...imported[0].config, log: { level: 'silent' } }));
      const viaNc = connect(nc.port);
      const viaSp = connect(proxy.address.port);
      clients.push(viaNc, viaSp);
      const KEYS = 900;
      for (const [c, name] of [[viaNc, 'nc'], [viaSp, 'sp']] as const) {
        const before = await sizes();
        const keys = Array.from({ length: KEYS }, (_, i) => Buffer.from(`${name}:random:${i}`));
        await writeAll(c, keys, `${name}:`);
        const after = await sizes();
        const added = after.map((n, i) => n - before[i]);
        // Every request reached a server, each server about a third of them (weights ignored).
        expect(added.reduce((a, b) => a + b, 0)).toBe(KEYS);
        for (const n of added) expect(n).toBeGreaterThan(KEYS / 6);
        for (const n of added) expect(n).toBeLessThan(KEYS / 2);
        // Read back through a random server: some found, some missed.
        const misses = await missing(c, keys, `${name}:`);
        expect(misses).toBeGreaterThan(0);
        expect(misses).toBeLessThan(KEYS);
      }

      // One server down: each proxy ejects it at its first failure, then every request succeeds on the two others.
      await down.stop();
      for (const c of [viaNc, viaSp]) {
        const deadline = Date.now() + 15_000;
        for (let ok = 0, i = 0; ok < 50; i++) {
          ok = (await c.set(`probe${i}`, 'x').then(() => true, () => false)) ? ok + 1 : 0;
          if (Date.now() > deadline) throw new Error('the dead node was never ejected');
        }
      }
      for (const [c, name] of [[viaNc, 'nc-ejected'], [viaSp, 'sp-ejected']] as const) {
        const before = await sizes();
        const keys = Array.from({ length: 300 }, (_, i) => Buffer.from(`${name}:${i}`));
        await writeAll(c, keys, `${name}:`);
        const added = (await sizes()).map((n, i) => n - before[i]);
        expect(added[0] + added[1]).toBe(300);
        expect(Math.min(added[0], added[1])).toBeGreaterThan(50);
      }
    } finally {
      for (const c of clients) c.disconnect();
      await proxy?.close(200);
      await nc.stop();
      if (!down.running) await down.restart();
    }
  }, 60_000);

  test('an imported pool splits MGET, MSET, DEL, UNLINK, EXISTS and TOUCH over its servers as nutcracker does', async () => {
    const pool: NutcrackerPool = { hash: 'fnv1a_64', hashTag: '{}', servers: [0, 1, 2].map((i) => `${nodes!.addresses[i]}:1 s${i}`) };
    const imported = convertTwemproxy(nutcrackerYaml(pool, '127.0.0.1:0'));
    expect(imported[0].config.crossSlot).toBe('split');
    // Ten keys, at least two on each server.
    const ring = new Ring({ hash: 'fnv1a_64', hashTag: '{}', nodes: [0, 1, 2].map((i) => ({ addr: nodes!.addresses[i], weight: 1, name: `s${i}` })) });
    const keys: string[] = [];
    const perServer = [0, 0, 0];
    for (let i = 0; keys.length < 10; i++) {
      const node = ring.indexOf(Buffer.from(`multi:${i}`));
      if (perServer[node] < 4) {
        perServer[node]++;
        keys.push(`multi:${i}`);
      }
    }
    const script: (string | number)[][] = [
      ['MSET', ...keys.flatMap((k, i) => [k, `v${i}`])],
      ['MGET', ...keys, 'multi:none'],
      ['EXISTS', ...keys, 'multi:none', keys[0]],
      ['TOUCH', ...keys, 'multi:none'],
      ['DEL', ...keys.slice(0, 4), 'multi:none'],
      ['UNLINK', ...keys.slice(4)],
      ['MGET', ...keys],
    ];
    const run = async (port: number): Promise<unknown[]> => {
      await Promise.all(nodes!.nodes.map((n) => n.command('FLUSHALL')));
      const c = connect(port);
      try {
        const replies: unknown[] = [];
        for (const [name, ...args] of script) {
          replies.push(await c.call(String(name), ...args));
          if (name === 'MSET') replies.push(await Promise.all(nodes!.nodes.slice(0, 3).map((n) => n.command('DBSIZE'))));
        }
        return replies;
      } finally {
        c.disconnect();
      }
    };
    const nc = await Nutcracker.start(pool);
    let proxy: ProxyServer | undefined;
    try {
      proxy = await ProxyServer.start(parseConfig({ ...imported[0].config, log: { level: 'silent' } }));
      const fromNutcracker = await run(nc.port);
      const fromSlotproxy = await run(proxy.address.port);
      // The keys are on every server, and each answer is nutcracker's, except EXISTS: nutcracker
      // 0.5.0 sends it whole to its first key's server (here 5); slotproxy answers as one Redis.
      expect((fromNutcracker[1] as unknown[]).every((n) => Number(n) >= 2)).toBe(true);
      const exists = 3;
      expect(fromSlotproxy.filter((_, i) => i !== exists)).toEqual(fromNutcracker.filter((_, i) => i !== exists));
      expect(fromSlotproxy[2]).toEqual([...keys.map((_, i) => `v${i}`), null]);
      expect(fromSlotproxy.slice(3, 7)).toEqual([11, 10, 4, 6]);
    } finally {
      await proxy?.close(200);
      await nc.stop();
    }
  }, 30_000);

  test('an unnamed server on port 11211 is named by its host alone', async () => {
    // Port 11211 may be taken on 127.0.0.1 (memcached): any free loopback address will do.
    let host: string | undefined;
    for (let i = 2; i < 40 && host === undefined; i++) if (!(await isListening(11211, `127.0.0.${i}`))) host = `127.0.0.${i}`;
    if (host === undefined) throw new Error('port 11211 is in use on every loopback address tried');
    const special = await RedisNode.start({ port: 11211, host });
    try {
      const servers: Server[] = [{ addr: special.address, weight: 1 }, { addr: nodes!.addresses[0], weight: 1 }, { addr: nodes!.addresses[1], weight: 2 }];
      const r = await checkScenario([special, nodes!.nodes[0], nodes!.nodes[1]], 'md5', servers, undefined, 7);
      expect({ fromNutcracker: r.fromNutcracker, fromSlotproxy: r.fromSlotproxy }).toEqual({ fromNutcracker: 0, fromSlotproxy: 0 });
      expect(r.perNode[0]).toBeGreaterThan(0);
    } finally {
      await special.destroy();
    }
  }, 30_000);
});
