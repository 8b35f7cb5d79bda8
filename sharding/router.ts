/**
 * The seam between "which node serves this key" and everything else. Cluster mode implements it
 * with the slot map (cluster/router.ts); ring mode will implement it with a consistent-hash ring.
 * A Router is consulted per request and must answer from an immutable snapshot.
 */
export interface Router {
  /** The shard a key belongs to (a hash slot in cluster mode): the keys of one request must share it. */
  shardOf(key: Buffer): number;
  /** The node serving `shard` now, or null when none does. */
  nodeOf(shard: number): string | null;
  /** Every master, in a stable order (fan-outs, SCAN cursors). */
  masters(): readonly string[];
}
