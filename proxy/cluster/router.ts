import { keySlot } from '../../sharding/slot';
import { Router } from '../../sharding/router';
import { ClusterTopology } from './topology';

/** Routes by Redis Cluster hash slot (CRC16 with hash tags) through the current slot map. */
export class ClusterRouter implements Router {
  constructor(private readonly topology: ClusterTopology) {}

  shardOf(key: Buffer): number {
    return keySlot(key);
  }

  nodeOf(slot: number): string | null {
    return this.topology.current.ownerOf(slot);
  }

  masters(): readonly string[] {
    return this.topology.current.masters.map((m) => m.address);
  }
}
