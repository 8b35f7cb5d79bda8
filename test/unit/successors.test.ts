import { Successors } from '../../proxy/migration/successors';
import { KeySpace } from '../../sharding/key-space';

/** A ring side whose shard i is served by addresses[i]. */
function ring(addresses: string[]): KeySpace {
  return { kind: 'ring', shardCount: 4096, shardOf: () => 0, addressOf: (s) => addresses[s] ?? null, masters: () => addresses };
}

test('a readdressed ring node names the node that took its shard, through a chain of failovers', () => {
  const s = new Successors();
  s.seen(ring(['a:1', 'b:1']));
  expect(s.of('a:1')).toBeNull();
  s.seen(ring(['a:2', 'b:1']));
  expect(s.of('a:1')).toBe('a:2');
  expect(s.of('b:1')).toBeNull();
  s.seen(ring(['a:3', 'b:1']));
  expect(s.of('a:1')).toBe('a:3');
  expect(s.of('a:2')).toBe('a:3');
  // Failed back to the first node: it serves again, the others name it.
  s.seen(ring(['a:1', 'b:1']));
  expect(s.of('a:1')).toBeNull();
  expect(s.of('a:3')).toBe('a:1');
  expect(s.of('a:2')).toBe('a:1');
});

test('a cluster side names no successor (its demoted nodes say whose replica they are)', () => {
  const s = new Successors();
  const cluster = (owner: string): KeySpace => ({ kind: 'cluster', shardCount: 16384, shardOf: () => 0, addressOf: () => owner, masters: () => [owner] });
  s.seen(cluster('x:1'));
  s.seen(cluster('x:2'));
  expect(s.of('x:1')).toBeNull();
});
