import { KeySpace, SlotOwners } from './key-space';
import { SLOT_COUNT, keySlot } from './slot';

/**
 * A Redis Cluster as one side of a migration: a key's shard is its hash slot, and the slot's node
 * is whatever the live slot map says now (MOVED and refreshes update it; the seeds name the
 * cluster, to compare configs).
 */
export class ClusterKeySpace implements KeySpace {
  readonly kind = 'cluster';
  readonly shardCount = SLOT_COUNT;

  constructor(readonly seeds: readonly string[], readonly owners: SlotOwners) {
    Object.freeze(this);
  }

  shardOf(key: Buffer): number {
    return keySlot(key);
  }

  addressOf(slot: number): string | null {
    return slot >= 0 && slot < SLOT_COUNT ? this.owners.ownerOf(slot) : null;
  }

  masters(): readonly string[] {
    return this.owners.masterAddresses();
  }
}
