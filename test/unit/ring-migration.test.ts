// Where reads and writes go in each migration phase (sharding/migration.ts), and the converge
// scripts' arguments (proxy/migration/converge.ts). The scripts themselves run against real Redis in
// test/integration/migration*.test.ts.
import { Placement } from '../../sharding/migration';
import { RING_SHARDS, Ring } from '../../sharding/ring';
import { FENCE_KEY, applyCommand, isBookkeepingKey, parseApply, parseSnapshot, VERSIONS_KEY } from '../../proxy/migration/converge';
import { MIGRATION_PHASES } from '../../config/schema';
import * as encode from '../../proxy/resp/encode';

const n = (name: string, port: number) => ({ name, addr: `10.0.0.1:${port}`, weight: 1 });
const A = new Ring({ hash: 'md5', hashTag: '{}', nodes: [n('a', 1), n('b', 2)] });
const B = new Ring({ hash: 'md5', hashTag: '{}', nodes: [n('a', 1), n('b', 2), n('c', 3)] });

/** A key that moves from A to B, and one that stays. */
function keys(): { moving: Buffer; staying: Buffer } {
  let moving: Buffer | undefined;
  let staying: Buffer | undefined;
  for (let i = 0; moving === undefined || staying === undefined; i++) {
    const k = Buffer.from(`key:${i}`);
    if (A.nodeOf(k).addr !== B.nodeOf(k).addr) moving ??= k;
    else staying ??= k;
  }
  return { moving, staying };
}

describe('migration placement', () => {
  const { moving, staying } = keys();

  test('without a migration: ring A only, shard = node index', () => {
    const p = new Placement(A, null, null);
    expect(p.shardOf(moving)).toBe(A.indexOf(moving));
    expect(p.readAddress(p.shardOf(moving))).toBe(A.nodeOf(moving).addr);
    expect(p.converges).toBe(false);
    expect(p.copyTarget(moving)).toBeNull();
    expect(p.readMasters()).toEqual(['10.0.0.1:1', '10.0.0.1:2']);
  });

  test.each([
    ['double-write', 'A', 'A', true],
    ['read-new', 'B', 'A', true],
    ['done', 'B', 'B', false],
  ] as const)('%s: reads from %s, writes to %s, copies to B: %s', (phase, reads, writes, copies) => {
    const p = new Placement(A, B, phase);
    const ring = (x: string): Ring => (x === 'A' ? A : B);
    const shard = p.shardOf(moving);
    expect(p.readAddress(shard)).toBe(ring(reads).nodeOf(moving).addr);
    expect(p.writeAddress(shard)).toBe(ring(writes).nodeOf(moving).addr);
    expect(p.converges).toBe(copies);
    expect(p.copyTarget(moving)).toEqual(copies ? { from: A.nodeOf(moving).addr, to: B.nodeOf(moving).addr } : null);
    // A key whose owner does not change is never copied.
    expect(p.copyTarget(staying)).toBeNull();
    // The dispatcher's shard names the same owners, with no key hashed again.
    for (let i = 0; i < 200; i++) {
      const k = Buffer.from(`k${i}`);
      expect(p.copyTargetOfShard(p.shardOf(k))).toEqual(p.copyTarget(k));
    }
    expect(p.readMasters()).toEqual(reads === 'A' ? ['10.0.0.1:1', '10.0.0.1:2'] : ['10.0.0.1:1', '10.0.0.1:2', '10.0.0.1:3']);
  });

  test('during double-write and read-new a shard pairs both owners, so CROSSSLOT covers both rings', () => {
    const p = new Placement(A, B, 'double-write');
    expect(p.shardOf(moving)).toBe(A.indexOf(moving) * RING_SHARDS + B.indexOf(moving));
    // Two keys on one A node but different B nodes have different shards.
    let other = 0;
    const same = (k: Buffer): boolean => A.indexOf(k) === A.indexOf(moving) && B.indexOf(k) !== B.indexOf(moving);
    while (!same(Buffer.from(`o${other}`))) other++;
    expect(p.shardOf(Buffer.from(`o${other}`))).not.toBe(p.shardOf(moving));
  });

  test('withPhase keeps the rings; every phase is accepted', () => {
    for (const phase of MIGRATION_PHASES) expect(new Placement(A, B, 'done').withPhase(phase).phase).toBe(phase);
    expect(() => new Placement(A, null, null).withPhase('done')).toThrow('no migration');
  });

  test('a placement is frozen', () => {
    expect(Object.isFrozen(new Placement(A, B, 'read-new'))).toBe(true);
  });
});

describe('converge scripts', () => {
  test('a snapshot reply is read as version, payload and TTL', () => {
    const frame = encode.arrayOfFrames([encode.integer(7), encode.bulk(Buffer.from([0, 1, 0xff])), encode.integer(1234)]);
    expect(parseSnapshot(frame)).toEqual({ version: 7, payload: Buffer.from([0, 1, 0xff]), ttlMs: 1234 });
    const noTtl = encode.arrayOfFrames([encode.integer(8), encode.bulk('x'), encode.integer(-1)]);
    expect(parseSnapshot(noTtl).ttlMs).toBe(0);
    const lastMs = encode.arrayOfFrames([encode.integer(8), encode.bulk('x'), encode.integer(0)]);
    expect(parseSnapshot(lastMs).ttlMs).toBe(1);
    const gone = encode.arrayOfFrames([encode.integer(9), encode.bulk(''), encode.integer(-2)]);
    expect(parseSnapshot(gone)).toEqual({ version: 9, payload: null, ttlMs: 0 });
    expect(() => parseSnapshot(encode.error('ERR boom'))).toThrow('ERR boom');
  });

  test('apply carries key, version, existence, payload and TTL', () => {
    const args = applyCommand(Buffer.from('k'), { version: 3, payload: Buffer.from('p'), ttlMs: 50 });
    expect(args.slice(2).map(String)).toEqual(['3', 'k', VERSIONS_KEY, FENCE_KEY, '3', '1', 'p', '50']);
    const del = applyCommand(Buffer.from('k'), { version: 4, payload: null, ttlMs: 0 });
    expect(del.slice(6).map(String)).toEqual(['4', '0', '', '0']);
  });

  test('apply replies: applied, older, or fenced with the version B last took', () => {
    expect(parseApply(encode.integer(1))).toEqual({ kind: 'applied' });
    expect(parseApply(encode.integer(0))).toEqual({ kind: 'older' });
    expect(parseApply(encode.integer(-1))).toEqual({ kind: 'fenced', version: 0 });
    expect(parseApply(encode.integer(-8))).toEqual({ kind: 'fenced', version: 7 });
    expect(() => parseApply(encode.error('ERR x'))).toThrow('ERR x');
  });

  test('bookkeeping keys are recognised', () => {
    expect(isBookkeepingKey(Buffer.from(VERSIONS_KEY))).toBe(true);
    expect(isBookkeepingKey(Buffer.from('__slotproxy:other'))).toBe(false);
    expect(isBookkeepingKey(Buffer.from('user:1'))).toBe(false);
  });
});
