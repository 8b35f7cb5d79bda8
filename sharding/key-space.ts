/**
 * One side of a migration, or the only back end: where a key lives. A ketama ring (ring.ts: a
 * shard is a node's config index) or a Redis Cluster (cluster-key-space.ts: a shard is a hash
 * slot, its node read from a live slot map). Placement (migration.ts) pairs two of them.
 */
export interface KeySpace {
  readonly kind: 'ring' | 'cluster';
  /** Shards are 0 .. shardCount - 1. */
  readonly shardCount: number;
  shardOf(key: Buffer): number;
  /** The node serving `shard` now, or null when none does. */
  addressOf(shard: number): string | null;
  /** The nodes holding keys (ring nodes with points, cluster masters), in a stable order. */
  masters(): readonly string[];
}

/** Where a cluster key space reads its slot owners: a live slot map (proxy/cluster/topology.ts). */
export interface SlotOwners {
  ownerOf(slot: number): string | null;
  masterAddresses(): readonly string[];
  /** A node answered MOVED: the slot lives at `address` now. */
  applyMoved(slot: number, address: string): void;
  /** Something looks out of date (TRYAGAIN, CLUSTERDOWN, a lost node): load the map again soon. */
  requestRefresh(): void;
}

/** The node serving `key` on `side` now, or null. */
export function ownerOfKey(side: KeySpace, key: Buffer): string | null {
  return side.addressOf(side.shardOf(key));
}
