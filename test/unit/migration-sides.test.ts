// A migration whose sides are a ring or a Redis Cluster (sharding/key-space.ts): placement, the
// rules of both sides, per-slot bookkeeping names, and the redirections a converging burst follows.
// Against real clusters: test/integration/migration-to-cluster.test.ts and migration-cluster-to-cluster.test.ts.
import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { SlotOwners, ownerOfKey } from '../../sharding/key-space';
import { SLOT_COUNT, crc16, keySlot } from '../../sharding/slot';
import { slotTag } from '../../sharding/slot-tags';
import { CLUSTER_BOOKKEEPING, RING_BOOKKEEPING, VERSIONS_KEY, applyCommand, isBookkeepingKey, snapshotCommand } from '../../proxy/migration/converge';
import { redirectOf } from '../../proxy/migration/redirect';

/** A fake slot map: slots split evenly between `masters`; records what it was told. */
class Owners implements SlotOwners {
  moved: [number, string][] = [];
  refreshes = 0;
  constructor(private readonly masters: string[]) {}
  ownerOf(slot: number): string | null {
    return this.masters[Math.floor((slot * this.masters.length) / SLOT_COUNT)];
  }
  masterAddresses(): readonly string[] {
    return this.masters;
  }
  applyMoved(slot: number, address: string): void {
    this.moved.push([slot, address]);
  }
  requestRefresh(): void {
    this.refreshes++;
  }
}

const ring = new Ring({ hash: 'fnv1a_64', hashTag: '{}', nodes: [{ name: 'a', addr: 'r:1', weight: 1 }, { name: 'b', addr: 'r:2', weight: 1 }] });
const cluster = new ClusterKeySpace(['c:1'], new Owners(['c:1', 'c:2', 'c:3']));

test('every slot has a tag, and a key named with it is in that slot', () => {
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const tag = slotTag(slot);
    expect(crc16(Buffer.from(tag)) % SLOT_COUNT).toBe(slot);
    expect(keySlot(Buffer.from(`${VERSIONS_KEY}:{${tag}}`))).toBe(slot);
  }
});

test("on a cluster side, the scripts' keys are the key and its own slot's bookkeeping", () => {
  const key = Buffer.from('user:1000');
  const snapshot = snapshotCommand(key, false, CLUSTER_BOOKKEEPING);
  const apply = applyCommand(key, { version: 3, payload: Buffer.from('x'), ttlMs: 0 }, false, CLUSTER_BOOKKEEPING);
  expect(snapshot.slice(3, 6).map((k) => keySlot(Buffer.from(k)))).toEqual([keySlot(key), keySlot(key), keySlot(key)]);
  expect(apply.slice(3, 6).map((k) => keySlot(Buffer.from(k)))).toEqual([keySlot(key), keySlot(key), keySlot(key)]);
  expect(isBookkeepingKey(Buffer.from(apply[4] as string))).toBe(true);
  // A ring keeps one hash and one fence per node, as before.
  expect(applyCommand(key, { version: 3, payload: null, ttlMs: 0 }, false, RING_BOOKKEEPING).slice(4, 6)).toEqual([VERSIONS_KEY, '__slotproxy:migration:fence']);
});

describe('a ring migrating into a cluster', () => {
  const key = Buffer.from('user:1000');

  test.each([
    ['double-write', 'r', 'r'],
    ['read-new', 'c', 'r'],
    ['done', 'c', 'c'],
  ] as const)('%s: reads from %s, writes to %s', (phase, reads, writes) => {
    const p = new Placement(ring, cluster, phase);
    const shard = p.shardOf(key);
    const side = (s: string): string | null => ownerOfKey(s === 'r' ? ring : cluster, key);
    expect(p.readAddress(shard)).toBe(side(reads));
    expect(p.writeAddress(shard)).toBe(side(writes));
    expect(p.copyTarget(key)).toEqual(phase === 'done' ? null : { from: ownerOfKey(ring, key), to: ownerOfKey(cluster, key) });
    if (phase !== 'done') {
      // The dispatcher's shard names the same owners, with no key hashed again.
      for (let i = 0; i < 200; i++) {
        const k = Buffer.from(`k${i}`);
        expect(p.copyTargetOfShard(p.shardOf(k))).toEqual(p.copyTarget(k));
      }
    }
  });

  test('a shard pairs the ring node and the slot: keys must share both', () => {
    const p = new Placement(ring, cluster, 'double-write');
    expect(p.shardOf(key)).toBe(ring.indexOf(key) * SLOT_COUNT + keySlot(key));
    const tagged = [Buffer.from('{u1}a'), Buffer.from('{u1}b')];
    expect(p.shardOf(tagged[0])).toBe(p.shardOf(tagged[1]));
    expect(p.refusedOnlyByTarget(tagged)).toBe(false);
    // One ring node, two slots: only the cluster refuses them.
    let other: Buffer | undefined;
    for (let i = 0; other === undefined; i++) {
      const k = Buffer.from(`k${i}`);
      if (ring.indexOf(k) === ring.indexOf(key) && keySlot(k) !== keySlot(key)) other = k;
    }
    expect(p.refusedOnlyByTarget([key, other])).toBe(true);
    // Two ring nodes: the source refuses them too, so they are not the target's.
    let far: Buffer | undefined;
    for (let i = 0; far === undefined; i++) {
      const k = Buffer.from(`f${i}`);
      if (ring.indexOf(k) !== ring.indexOf(key)) far = k;
    }
    expect(p.refusedOnlyByTarget([key, far])).toBe(false);
    // Once writes go to the cluster alone, nothing is counted.
    expect(p.withPhase('done').refusedOnlyByTarget([key, other])).toBe(false);
  });

  test('reads fan out to the side reads come from', () => {
    expect(new Placement(ring, cluster, 'double-write').readMasters()).toEqual(['r:1', 'r:2']);
    expect(new Placement(ring, cluster, 'read-new').readMasters()).toEqual(['c:1', 'c:2', 'c:3']);
    expect(new Placement(ring, cluster, 'read-new').allAddresses()).toEqual(['r:1', 'r:2', 'c:1', 'c:2', 'c:3']);
  });
});

test('a cluster migrating into a ring numbers shards by slot, then by ring node', () => {
  const p = new Placement(cluster, ring, 'double-write');
  const key = Buffer.from('order:7');
  expect(p.shardOf(key)).toBe(keySlot(key) * ring.shardCount + ring.indexOf(key));
  expect(p.writeAddress(p.shardOf(key))).toBe(ownerOfKey(cluster, key));
  expect(p.withPhase('read-new').readAddress(p.shardOf(key))).toBe(ownerOfKey(ring, key));
});

test.each([
  ['-MOVED 3999 127.0.0.1:7002\r\n', { kind: 'moved', slot: 3999, address: '127.0.0.1:7002' }],
  ['-ASK 3999 127.0.0.1:7002\r\n', { kind: 'ask', slot: 3999, address: '127.0.0.1:7002' }],
  // Redis 7 leaves the host out when it does not know its own: the node that was asked.
  ['-MOVED 12 :7003\r\n', { kind: 'moved', slot: 12, address: '10.1.1.1:7003' }],
  ['-TRYAGAIN Multiple keys request during rehashing of slot\r\n', { kind: 'retry' }],
  ['-CLUSTERDOWN The cluster is down\r\n', { kind: 'retry' }],
  ['-WRONGTYPE Operation against a key holding the wrong kind of value\r\n', null],
  ['+QUEUED\r\n', null],
])('a queued reply %j asks the burst to %j', (frame, want) => {
  expect(redirectOf(Buffer.from(frame), '10.1.1.1:7001')).toEqual(want);
});
