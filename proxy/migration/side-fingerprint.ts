/**
 * A short name for a back end, the same for every config that places keys alike: a ring's hash,
 * tag, distribution and nodes (names, weights, order: where ketama and modula put keys, whatever a
 * Sentinel failover does to the addresses), a cluster's seeds. Proxies name their side B with it
 * in the fleet (fleet.ts), so a proxy starting without a migration on nodes a fleet has left can
 * tell whether it serves that fleet's side B or the side A it closed (closed-side.ts).
 */
import crypto from 'node:crypto';
import { KeySpace } from '../../sharding/key-space';
import { Ring } from '../../sharding/ring';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';

export function sideFingerprint(side: KeySpace | null): string {
  if (side === null) return '-';
  const described =
    side instanceof Ring
      ? ['ring', side.hash, side.tagText(), side.distribution, side.nodes.map((n) => [n.name, n.weight])]
      : ['cluster', [...(side instanceof ClusterKeySpace ? side.seeds : side.masters())].sort()];
  return crypto.createHash('sha1').update(JSON.stringify(described)).digest('hex').slice(0, 12);
}
