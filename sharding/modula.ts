/**
 * twemproxy's `distribution: modula` (nc_modula.c): every live server is repeated `weight` times,
 * in twemproxy's server order (sorted by name, distribution.ts; not the order of the config), and a
 * key goes to entry `hash % (total live weight)`. Taking a server out (auto_eject_hosts) rebuilds
 * the list from the live ones, so most keys move, as they do in nutcracker.
 */
import { DistributedNode, NodeLookup, twemproxyOrder } from './distribution';

/** Up to this many entries the list is a table (one read per lookup); above it, a search over the nodes' ends. */
const TABLE_LIMIT = 1 << 16;

export class Modula implements NodeLookup {
  readonly points: readonly number[];
  /** The live nodes' total weight: the modulus. */
  readonly size: number;
  /** Entry -> config index, when size <= TABLE_LIMIT. */
  private readonly table: Uint16Array | null;
  /** Live nodes in twemproxy's order with, at the same index, the entry after their last one. */
  private readonly owners: Uint16Array;
  private readonly ends: Float64Array;

  /** `live`: config indexes of the nodes in the ring. */
  constructor(nodes: readonly DistributedNode[], live: readonly number[]) {
    if (live.length === 0) throw new Error('a modula ring needs at least one live node');
    const order = twemproxyOrder(nodes, live);
    const points = new Array<number>(nodes.length).fill(0);
    this.owners = Uint16Array.from(order);
    this.ends = new Float64Array(order.length);
    let total = 0;
    order.forEach((i, at) => {
      points[i] = nodes[i].weight;
      total += nodes[i].weight;
      this.ends[at] = total;
    });
    this.points = Object.freeze(points);
    this.size = total;
    if (total <= TABLE_LIMIT) {
      const table = new Uint16Array(total);
      let entry = 0;
      for (const i of order) for (let w = 0; w < nodes[i].weight; w++) table[entry++] = i;
      this.table = table;
    } else {
      this.table = null;
    }
  }

  indexOfHash(hash: number): number {
    const entry = hash % this.size;
    if (this.table !== null) return this.table[entry];
    // The first live node whose entries end after `entry`.
    let left = 0;
    let right = this.ends.length - 1;
    while (left < right) {
      const mid = (left + right) >>> 1;
      if (this.ends[mid] <= entry) left = mid + 1;
      else right = mid;
    }
    return this.owners[left];
  }
}
