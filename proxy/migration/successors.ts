/**
 * Which node took a ring node's place (a Sentinel failover readdresses it: sharding/ring.ts keeps
 * the shard, the address changes). A barrier of the old address that its follow could not finish
 * goes on with the new one's (followers.ts handedOn): an old master Sentinel has not demoted yet
 * still answers ROLE as a master, so ROLE alone cannot name it. Cluster nodes are demoted at once
 * and say whose replica they are.
 */
import { KeySpace } from '../../sharding/key-space';

/** Replacements remembered (a few failovers' worth): older ones name nodes long gone. */
const KEEP = 64;

export class Successors {
  private shards: (string | null)[] = [];
  private readonly replaced = new Map<string, string>();

  /** Side A as the placement says it now. */
  seen(side: KeySpace): void {
    if (side.kind !== 'ring') return;
    const now: (string | null)[] = [];
    for (let shard = 0; shard < side.shardCount; shard++) {
      const address = side.addressOf(shard);
      if (address === null) break;
      now.push(address);
    }
    this.shards.forEach((before, shard) => {
      const after = now[shard];
      if (before === null || after === undefined || after === null || after === before) return;
      this.replaced.delete(before);
      this.replaced.set(before, after);
      if (this.replaced.size > KEEP) this.replaced.delete(this.replaced.keys().next().value as string);
    });
    // A node serving a shard again (failed back) has no successor.
    for (const address of now) if (address !== null) this.replaced.delete(address);
    this.shards = now;
  }

  /** The node that took `address`'s place, following a chain of failovers; null when none did. */
  of(address: string): string | null {
    let to = this.replaced.get(address) ?? null;
    for (let hops = 0; to !== null && this.replaced.has(to) && hops < KEEP; hops++) to = this.replaced.get(to) ?? null;
    return to;
  }
}
