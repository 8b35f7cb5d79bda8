import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';
import { KeySpace } from '../../sharding/key-space';

function owner(side: KeySpace, key: Buffer): string {
  if (side instanceof Ring) {
    // Each request picks its node: no node owns the key.
    if (side.distribution === 'random') return 'random';
    const n = side.nodeOf(key);
    return `${n.name}(${n.addr})`;
  }
  const slot = side.shardOf(key);
  const owner = side.addressOf(slot);
  return owner === null ? `slot ${slot}` : `slot ${slot}(${owner})`;
}

/** `node=a(127.0.0.1:7101)`, and during a migration `node=... new=...` (the owner in ring B). */
export function describeOwner(placement: Placement, key: Buffer): string {
  const parts = placement.from instanceof Ring ? [`hash=${placement.from.hashOf(key)}`] : [];
  parts.push(`node=${owner(placement.from, key)}`);
  if (placement.to !== null) parts.push(`new=${owner(placement.to, key)}`, `phase=${placement.phase ?? 'none'}`);
  return parts.join('\t');
}
