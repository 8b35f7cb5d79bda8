import { Placement } from '../../sharding/migration';
import { Ring } from '../../sharding/ring';

function owner(ring: Ring, key: Buffer): string {
  const n = ring.nodeOf(key);
  return `${n.name}(${n.addr})`;
}

/** `node=a(127.0.0.1:7101)`, and during a migration `node=... new=...` (the owner in ring B). */
export function describeOwner(placement: Placement, key: Buffer): string {
  const hash = placement.from.hashOf(key);
  const parts = [`hash=${hash}`, `node=${owner(placement.from, key)}`];
  if (placement.to !== null) parts.push(`new=${owner(placement.to, key)}`, `phase=${placement.phase ?? 'none'}`);
  return parts.join('\t');
}
