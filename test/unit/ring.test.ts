// The ketama continuum (sharding/ring.ts): point counts, point values, server names, lookup,
// hash tags. Placement against a real nutcracker is in test/integration/ring-twemproxy.test.ts.
import { Ring, continuumName, md5Points, pointsFor } from '../../sharding/ring';
import { md5 } from '../../sharding/hash';

const node = (name: string | undefined, port: number, weight = 1) => ({ name, addr: `127.0.0.1:${port}`, weight });

describe('ketama continuum', () => {
  test('MD5 points of "server1-8" (twemproxy test_all.c)', () => {
    const p = md5Points('server1-8');
    expect(p[0]).toBe(3853726576);
    expect(p[3]).toBe(2667054752);
  });

  test.each([
    [[1, 1, 1], [160, 160, 160]],
    [[1, 2, 3], [80, 160, 240]],
    [[1, 1], [160, 160]],
    [[3, 1], [240, 80]],
    [[1, 1, 1, 1, 1, 1, 1], [160, 160, 160, 160, 160, 160, 160]],
    [[100, 1], [316, 0]],
  ])('weights %j give %j points', (weights, points) => {
    const total = weights.reduce((a, b) => a + b, 0);
    expect(weights.map((w) => pointsFor(w, total, weights.length))).toEqual(points);
  });

  test('names: configured, else host:port, else host alone on port 11211', () => {
    expect(continuumName(node('a', 7000))).toBe('a');
    expect(continuumName(node(undefined, 7000))).toBe('127.0.0.1:7000');
    expect(continuumName(node(undefined, 11211))).toBe('127.0.0.1');
  });

  test('lookup: first point at or above the hash, wrapping to the first', () => {
    const ring = new Ring({ hash: 'md5', hashTag: null, nodes: [node('a', 1), node('b', 2), node('c', 3, 2)] });
    expect(ring.nodes.map((n) => n.points)).toEqual([120, 120, 240]);
    expect(ring.size).toBe(480);
    // Independent linear scan over every point of every node.
    const all: { v: number; i: number }[] = [];
    ring.nodes.forEach((n, i) => {
      for (let p = 0; p < n.points / 4; p++) for (const v of md5Points(`${n.name}-${p}`)) all.push({ v, i });
    });
    all.sort((x, y) => x.v - y.v);
    const scan = (hash: number): number => (all.find((e) => e.v >= hash) ?? all[0]).i;
    for (let k = 0; k < 2000; k++) {
      const key = Buffer.from(`key:${k}`);
      expect(ring.indexOf(key)).toBe(scan(md5(key, 0, key.length)));
    }
    expect(ring.indexOfHash(0xffffffff)).toBe(all[all.length - 1].v === 0xffffffff ? all[all.length - 1].i : all[0].i);
    expect(ring.indexOfHash(all[5].v)).toBe(all[5].i);
    expect(ring.indexOfHash(all[5].v + 1)).toBe(all[6].i);
  });

  test('config order does not change placement (servers are sorted by name first)', () => {
    const a = new Ring({ hash: 'fnv1a_64', hashTag: null, nodes: [node('alpha', 1), node('b', 2), node('cc', 3)] });
    const b = new Ring({ hash: 'fnv1a_64', hashTag: null, nodes: [node('cc', 3), node('alpha', 1), node('b', 2)] });
    for (let k = 0; k < 500; k++) {
      const key = Buffer.from(`k${k}`);
      expect(a.nodeOf(key).addr).toBe(b.nodeOf(key).addr);
    }
  });

  test('hash tags choose the hashed bytes; absent or empty tags hash the whole key', () => {
    const ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: [node('a', 1), node('b', 2), node('c', 3)] });
    const whole = (s: string): number => md5(Buffer.from(s), 0, s.length);
    expect(ring.hashOf(Buffer.from('user{42}:name'))).toBe(whole('42'));
    expect(ring.hashOf(Buffer.from('foo{}{bar}'))).toBe(whole('foo{}{bar}'));
    expect(ring.hashOf(Buffer.from('foo{{bar}}'))).toBe(whole('{bar'));
    const colon = new Ring({ hash: 'md5', hashTag: '::', nodes: [node('a', 1), node('b', 2)] });
    expect(colon.hashOf(Buffer.from('x:12:y'))).toBe(whole('12'));
    const none = new Ring({ hash: 'md5', hashTag: '', nodes: [node('a', 1), node('b', 2)] });
    expect(none.hashOf(Buffer.from('u{42}'))).toBe(whole('u{42}'));
  });

  test('empty keys hash to 0; a one-node ring sends everything to it', () => {
    const ring = new Ring({ hash: 'murmur', hashTag: null, nodes: [node('a', 1), node('b', 2)] });
    expect(ring.hashOf(Buffer.alloc(0))).toBe(0);
    const one = new Ring({ hash: 'murmur', hashTag: null, nodes: [node('a', 1)] });
    expect(one.indexOf(Buffer.from('anything'))).toBe(0);
  });

  test('an ejected node gets no points; the others are placed as a ring of the live nodes alone', () => {
    const all = [node('a', 1, 1), node('b', 2, 2), node('c', 3, 3)];
    const ejected = new Ring({ hash: 'murmur', hashTag: null, nodes: all, ejected: new Set([2]) });
    const live = new Ring({ hash: 'murmur', hashTag: null, nodes: all.slice(0, 2) });
    expect(ejected.nodes.map((n) => n.points)).toEqual([104, 212, 0]);
    for (let k = 0; k < 1000; k++) {
      const key = Buffer.from(`e${k}`);
      expect(ejected.nodeOf(key).addr).toBe(live.nodeOf(key).addr);
    }
    expect(() => new Ring({ hash: 'md5', hashTag: null, nodes: all, ejected: new Set([0, 1, 2]) })).toThrow('live node');
  });

  test('the ring is frozen', () => {
    const ring = new Ring({ hash: 'md5', hashTag: null, nodes: [node('a', 1)] });
    expect(Object.isFrozen(ring)).toBe(true);
    expect(Object.isFrozen(ring.nodes)).toBe(true);
  });
});

// indexOfHash jumps into the sorted points through a bucket table; it must find exactly the point
// twemproxy's binary search finds (the first at or above the hash, wrapping past the last).
describe('continuum lookup', () => {
  function binarySearchOwner(ring: Ring, hash: number): number {
    const { values, owners } = (ring as unknown as { lookup: { values: Uint32Array; owners: Uint16Array } }).lookup;
    let left = 0;
    let right = values.length;
    while (left < right) {
      const mid = (left + right) >>> 1;
      if (values[mid] < hash) left = mid + 1;
      else right = mid;
    }
    return owners[right === values.length ? 0 : right];
  }

  const rings: Record<string, Ring> = {
    'one node': new Ring({ hash: 'md5', hashTag: null, nodes: [node('a', 1)] }),
    'three nodes': new Ring({ hash: 'fnv1a_64', hashTag: null, nodes: [node('a', 1), node('b', 2), node('c', 3)] }),
    'weights 1, 2, 5': new Ring({ hash: 'murmur', hashTag: null, nodes: [node('a', 1), node('b', 2, 2), node('c', 3, 5)] }),
    '100 nodes (16,000 points)': new Ring({ hash: 'crc32a', hashTag: null, nodes: Array.from({ length: 100 }, (_, i) => node(`n${i}`, 1000 + i)) }),
    'one node of weight 0 beside another': new Ring({ hash: 'md5', hashTag: null, nodes: [node('a', 1, 100), node('b', 2, 1)] }),
  };

  for (const [name, ring] of Object.entries(rings)) {
    test(`${name}: every point, its neighbours, the ends and random hashes`, () => {
      const { values } = (ring as unknown as { lookup: { values: Uint32Array } }).lookup;
      const hashes = [0, 1, 0xffffffff, 0xfffffffe, 2 ** 31, 2 ** 31 - 1];
      for (const v of values) hashes.push(v, Math.max(0, v - 1), Math.min(0xffffffff, v + 1));
      let x = 12345;
      for (let i = 0; i < 20000; i++) {
        x = (Math.imul(x, 1103515245) + 12345) >>> 0;
        hashes.push(x);
      }
      for (const h of hashes) {
        if (ring.indexOfHash(h) !== binarySearchOwner(ring, h)) throw new Error(`hash ${h}: ${ring.indexOfHash(h)} != ${binarySearchOwner(ring, h)}`);
      }
      expect(hashes.length).toBeGreaterThan(20000);
    });
  }
});
