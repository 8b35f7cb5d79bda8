/**
 * `ring.sentinel.readFrom: replica | prefer-replica`: the replicas of each Sentinel master of the
 * ring, as the sentinels know them (`SENTINEL REPLICAS`), for cluster/replica-reads.ts to check
 * and pick from exactly as it does a cluster's. A replica a sentinel calls down, disconnected or
 * not linked to its master is left out before any check.
 */
import { MasterReplicas } from '../cluster/replica-reads';
import { SentinelMasters } from './masters';

/** Every master the ring follows now, with the replicas the sentinels would use; never rejects. */
export function sentinelReplicas(masters: SentinelMasters): () => Promise<readonly MasterReplicas[]> {
  return async () => {
    const out = await Promise.all(
      masters.names().map(async (name): Promise<MasterReplicas | null> => {
        const address = masters.addressOf(name);
        if (address === undefined) return null;
        const replicas = (await masters.replicasOf(name)) ?? [];
        return { address, replicas: replicas.filter((r) => r.usable && r.address !== address).map((r) => r.address) };
      }),
    );
    return out.filter((m): m is MasterReplicas => m !== null);
  };
}
