// twemproxy's modula and random distributions (sharding/modula.ts, sharding/random.ts) behind the
// Ring, and migrations from a modula ring. Placement against a real nutcracker is in
// test/integration/ring-twemproxy.test.ts.
import { RANDOM_SHARD, RING_SHARDS, Ring } from '../../sharding/ring';
import { KEY_HASHES, md5 } from '../../sharding/hash';
import { Placement, ringFromConfig } from '../../sharding/migration';
import { HashName, MIGRATION_PHASES } from '../../config/schema';
import { parseConfig } from '../../config/load';
import { xorshift32 } from '../helpers/random';

const node = (name: string | undefined, port: number, weight = 1) => ({ name, addr: `10.0.0.1:${port}`, weight });

/** Keys and the bytes twemproxy hashes for each under hash_tag "{}" (written out, not computed by the code under test). */
function keysWithHashed(count: number): { key: Buffer; hashed: Buffer }[] {
  const out: { key: Buffer; hashed: Buffer }[] = [];
  for (let i = 0; i < count; i++) {
    if (i % 4 === 0) out.push({ key: Buffer.from(`user:{${i % 37}}:name`), hashed: Buffer.from(String(i % 37)) });
    else if (i % 9 === 1) {
      const b = Buffer.from([0x80 + (i % 128), i & 0xff, (i >> 8) & 0xff, 0xff]);
      out.push({ key: b, hashed: b });
    } else out.push({ key: Buffer.from(`key:${i}`), hashed: Buffer.from(`key:${i}`) });
  }
  return out;
}

/** nc_modula.c, spelt out: each live server `weight` times in order (the callers' names sort as their config order); entry hash % length. */
function modulaReference(weights: readonly number[], ejected: ReadonlySet<number> = new Set()): (hash: number) => number {
  const entries: number[] = [];
  weights.forEach((w, i) => {
    if (!ejected.has(i)) for (let k = 0; k < w; k++) entries.push(i);
  });
  return (hash) => entries[hash % entries.length];
}

describe('modula', () => {
  const HASHES: HashName[] = ['md5', 'fnv1a_64', 'murmur', 'crc32a', 'one_at_a_time', 'hsieh', 'jenkins', 'fnv1_32'];
  const WEIGHTS = [[1, 1, 1], [1, 2, 3], [5, 1], [3, 1, 2, 5], [1]];

  test.each(HASHES)('%s: hash %% total weight, each server repeated weight times in config order', (hash) => {
    for (const weights of WEIGHTS) {
      const ring = new Ring({ hash, hashTag: '{}', distribution: 'modula', nodes: weights.map((w, i) => node(`n${i}`, i + 1, w)) });
      const expected = modulaReference(weights);
      const seen = new Set<number>();
      for (const { key, hashed } of keysWithHashed(3000)) {
        const h = weights.length === 1 ? 0 : KEY_HASHES[hash](hashed, 0, hashed.length);
        const want = expected(h);
        if (ring.indexOf(key) !== want) throw new Error(`${hash} ${JSON.stringify(weights)} ${key.toString('hex')}: ${ring.indexOf(key)} != ${want}`);
        expect(ring.shardOf(key)).toBe(want);
        seen.add(want);
      }
      // Keys really are spread (one hash value would prove little).
      expect(seen.size).toBe(weights.length);
      expect(ring.nodes.map((n) => n.points)).toEqual(weights);
      expect(ring.size).toBe(weights.reduce((a, b) => a + b, 0));
    }
  });

  test('servers are in twemproxy\'s order, by name (shorter first): the config\'s order does not count, names do', () => {
    // Sorted: a (index 1), b (0), d (3), cc (2); unnamed servers sort by "host:port".
    const nodes = [node('b', 1), node('a', 2, 2), node('cc', 3), node('d', 4)];
    const ring = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes });
    const expected = (h: number): number => [1, 1, 0, 3, 2][h % 5];
    const reordered = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes: [nodes[2], nodes[0], nodes[3], nodes[1]] });
    const renamed = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes: nodes.map((n, i) => ({ ...n, name: `x${i}` })) });
    let moved = 0;
    for (let k = 0; k < 1000; k++) {
      const key = Buffer.from(`k${k}`);
      expect(ring.indexOf(key)).toBe(expected(md5(key, 0, key.length)));
      expect(reordered.nodeOf(key).addr).toBe(ring.nodeOf(key).addr);
      if (renamed.nodeOf(key).addr !== ring.nodeOf(key).addr) moved++;
    }
    expect(moved).toBeGreaterThan(300);
    // An empty key hashes to 0: the first entry.
    expect(ring.nodeOf(Buffer.alloc(0)).addr).toBe('10.0.0.1:2');
    expect(ring.addressOf(2)).toBe('10.0.0.1:3');
    const unnamed = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes: [{ addr: '10.0.0.1:20', weight: 1 }, { addr: '10.0.0.1:3', weight: 1 }] });
    // "10.0.0.1:3" is shorter, so it comes first.
    expect(unnamed.indexOfHash(0)).toBe(1);
    expect(unnamed.indexOfHash(1)).toBe(0);
  });

  test('an ejected server leaves the list: the rest is placed as a modula ring of the live servers alone', () => {
    const weights = [1, 2, 3, 1];
    const all = weights.map((w, i) => node(`n${i}`, i + 1, w));
    for (const out of [[0], [2], [1, 3]]) {
      const ejected = new Set(out);
      const ring = new Ring({ hash: 'fnv1a_64', hashTag: null, distribution: 'modula', nodes: all, ejected });
      const live = new Ring({ hash: 'fnv1a_64', hashTag: null, distribution: 'modula', nodes: all.filter((_, i) => !ejected.has(i)) });
      const expected = modulaReference(weights, ejected);
      expect(ring.nodes.map((n) => n.points)).toEqual(weights.map((w, i) => (ejected.has(i) ? 0 : w)));
      expect(ring.masters()).toEqual(all.filter((_, i) => !ejected.has(i)).map((n) => n.addr));
      for (let k = 0; k < 2000; k++) {
        const key = Buffer.from(`e${k}`);
        expect(ring.nodeOf(key).addr).toBe(live.nodeOf(key).addr);
        expect(ring.indexOf(key)).toBe(expected(KEY_HASHES.fnv1a_64(key, 0, key.length)));
      }
    }
  });

  test('large weights (no table): the same placement, at every boundary between servers', () => {
    const weights = [70_000, 3, 100_000, 1];
    const ring = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes: weights.map((w, i) => node(`n${i}`, i + 1, w)) });
    const total = 170_004;
    expect(ring.size).toBe(total);
    const ownerOfEntry = (e: number): number => (e < 70_000 ? 0 : e < 70_003 ? 1 : e < 170_003 ? 2 : 3);
    const hashes = [0, 1, 69_999, 70_000, 70_002, 70_003, 170_002, 170_003, 170_004, 0xffffffff, total * 1000 + 70_001];
    const rnd = xorshift32(5);
    for (let i = 0; i < 5000; i++) hashes.push(Math.floor(rnd() * 2 ** 32));
    for (const h of hashes) expect([h, ring.indexOfHash(h)]).toEqual([h, ownerOfEntry(h % total)]);
    // And the table gives what the search gives, with weights small enough for one.
    const small = new Ring({ hash: 'md5', hashTag: null, distribution: 'modula', nodes: [node('a', 1, 7), node('b', 2, 3)] });
    for (let h = 0; h < 100; h++) expect(small.indexOfHash(h)).toBe(h % 10 < 7 ? 0 : 1);
  });
});

describe('random', () => {
  const nodes = [node('a', 1, 1), node('b', 2, 1), node('c', 3, 10)];

  test('every key has one shard, whose address is a live server picked per call, weights ignored', () => {
    const ring = new Ring({ hash: 'md5', hashTag: '{}', distribution: 'random', nodes, random: xorshift32(9) });
    const keys = keysWithHashed(200).map((k) => k.key);
    for (const k of keys) expect(ring.shardOf(k)).toBe(RANDOM_SHARD);
    expect(RANDOM_SHARD).toBeGreaterThanOrEqual(nodes.length);
    const counts = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const a = ring.addressOf(RANDOM_SHARD);
      if (a === null) throw new Error('no address');
      counts.set(a, (counts.get(a) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(nodes.map((n) => n.addr));
    // One entry per server, as nc_random.c: weight 10 does not get ten times the requests.
    for (const c of counts.values()) expect(c).toBeGreaterThan(800);
    for (const c of counts.values()) expect(c).toBeLessThan(1200);
    expect(ring.nodes.map((n) => n.points)).toEqual([1, 1, 1]);
    // A node's own shard still names that node.
    expect(ring.addressOf(1)).toBe('10.0.0.1:2');
    expect(ring.masters()).toEqual(nodes.map((n) => n.addr));
  });

  test('an ejected server is never picked; a one-server ring always picks it', () => {
    const ring = new Ring({ hash: 'md5', hashTag: null, distribution: 'random', nodes, ejected: new Set([1]), random: xorshift32(3) });
    const picked = new Set<string | null>();
    for (let i = 0; i < 500; i++) picked.add(ring.addressOf(RANDOM_SHARD));
    expect([...picked].sort()).toEqual(['10.0.0.1:1', '10.0.0.1:3']);
    expect(ring.masters()).toEqual(['10.0.0.1:1', '10.0.0.1:3']);
    for (let i = 0; i < 500; i++) picked.add(ring.nodeOf(Buffer.from(`k${i}`)).addr);
    expect(picked.has('10.0.0.1:2')).toBe(false);
    const one = new Ring({ hash: 'md5', hashTag: null, distribution: 'random', nodes: [node('a', 1)] });
    for (let i = 0; i < 50; i++) expect(one.addressOf(one.shardOf(Buffer.from(`k${i}`)))).toBe('10.0.0.1:1');
  });

  test('a random ring cannot be a side of a migration', () => {
    const random = new Ring({ hash: 'md5', hashTag: null, distribution: 'random', nodes });
    const ketama = new Ring({ hash: 'md5', hashTag: null, nodes });
    expect(() => new Placement(random, ketama, 'double-write')).toThrow('a random ring cannot be a side of a migration');
    expect(() => new Placement(ketama, random, 'double-write')).toThrow('a random ring cannot be a side of a migration');
    expect(new Placement(random, null, null).shardOf(Buffer.from('x'))).toBe(RANDOM_SHARD);
  });
});

describe('migrations from and to a modula ring', () => {
  const n = (name: string, port: number, weight = 1) => ({ name, addr: `10.0.0.1:${port}`, weight });
  const A = new Ring({ hash: 'fnv1a_64', hashTag: '{}', distribution: 'modula', nodes: [n('a', 1), n('b', 2, 2)] });
  const B = new Ring({ hash: 'fnv1a_64', hashTag: '{}', nodes: [n('a', 1), n('b', 2), n('c', 3)] });
  const modulaA = modulaReference([1, 2]);
  const aOwner = (k: Buffer): string => `10.0.0.1:${modulaA(KEY_HASHES.fnv1a_64(k, 0, k.length)) + 1}`;
  const keys = Array.from({ length: 2000 }, (_, i) => Buffer.from(`key:${i}`));

  test.each(MIGRATION_PHASES)('modula A -> ketama B, %s: reads, writes and copies go to each side\'s owner', (phase) => {
    const p = new Placement(A, B, phase);
    let moving = 0;
    for (const k of keys) {
      const a = aOwner(k);
      const b = B.nodeOf(k).addr;
      const shard = p.shardOf(k);
      expect(p.readAddress(shard)).toBe(phase === 'double-write' ? a : b);
      expect(p.writeAddress(shard)).toBe(phase === 'done' ? b : a);
      expect(p.copyTarget(k)).toEqual(phase !== 'done' && a !== b ? { from: a, to: b } : null);
      if (phase !== 'done') expect(shard).toBe(A.indexOf(k) * RING_SHARDS + B.indexOf(k));
      if (a !== b) moving++;
    }
    // Both kinds of keys are there: some move, some stay.
    expect(moving).toBeGreaterThan(500);
    expect(moving).toBeLessThan(1800);
  });

  test('modula 2 -> modula 3 (one hash for both sides): a key moves unless hash % 2 and hash % 3 name the same server', () => {
    const from = new Ring({ hash: 'murmur', hashTag: '{}', distribution: 'modula', nodes: [n('a', 1), n('b', 2)] });
    const to = new Ring({ hash: 'murmur', hashTag: '{}', distribution: 'modula', nodes: [n('a', 1), n('b', 2), n('c', 3)] });
    const p = new Placement(from, to, 'double-write');
    for (const k of keys) {
      const h = KEY_HASHES.murmur(k, 0, k.length);
      const a = `10.0.0.1:${(h % 2) + 1}`;
      const b = `10.0.0.1:${(h % 3) + 1}`;
      expect(p.copyTarget(k)).toEqual(a === b ? null : { from: a, to: b });
      expect(p.readAddress(p.shardOf(k))).toBe(a);
    }
  });

  test('from config: the distribution reaches both rings; migration.to defaults to ring A\'s', () => {
    const input = {
      mode: 'ring',
      ring: { hash: 'murmur', distribution: 'modula', nodes: [{ addr: '10.0.0.1:1' }, { addr: '10.0.0.1:2' }] },
      migration: { phase: 'double-write', to: { nodes: [{ addr: '10.0.0.1:1' }, { addr: '10.0.0.1:2' }, { addr: '10.0.0.1:3' }] } },
    };
    const cfg = parseConfig(input);
    if (cfg.mode !== 'ring') throw new Error('ring mode expected');
    const p = Placement.fromConfig(cfg.ring, cfg.migration);
    expect(p.from instanceof Ring && p.from.distribution).toBe('modula');
    expect(p.to instanceof Ring && p.to.distribution).toBe('modula');
    const explicit = parseConfig({ ...input, migration: { phase: 'double-write', to: { distribution: 'ketama', nodes: [{ addr: '10.0.0.1:3' }] } } });
    if (explicit.mode !== 'ring') throw new Error('ring mode expected');
    expect((Placement.fromConfig(explicit.ring, explicit.migration).to as Ring).distribution).toBe('ketama');
    expect(ringFromConfig(cfg.ring, new Set([0])).masters()).toEqual(['10.0.0.1:2']);
    // A ring that names no distribution loads as ketama, the same config as one that writes it.
    const unnamed = parseConfig({ ...input, ring: { ...input.ring, distribution: undefined }, migration: undefined });
    expect(unnamed.mode === 'ring' && unnamed.ring.distribution).toBe('ketama');
    expect(ringFromConfig(unnamed.mode === 'ring' ? unnamed.ring : cfg.ring).distribution).toBe('ketama');
  });
});
