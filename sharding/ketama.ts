/**
 * twemproxy's `distribution: ketama` (nc_ketama.c): the continuum and the lookup of a hash on it.
 *
 * - Servers are in twemproxy's order (by name, distribution.ts) when points are made; this only
 *   decides ties between equal point values, as the sort by value is stable.
 * - A server gets floor(weight/total * 40 * servers + 1e-10) * 4 points, computed in 32-bit
 *   float as nutcracker does (total and servers counting live servers only); the points of
 *   "<name>-<i>" are the four little-endian 32-bit quarters of its MD5.
 * - A key's hash goes to the first point at or above it, wrapping to the first point.
 */
import { createHash } from 'node:crypto';
import { DistributedNode, NodeLookup, twemproxyOrder } from './distribution';

const POINTS_PER_SERVER = 160;

/** Points of a server with `weight` out of `totalWeight` among `servers` live servers. */
export function pointsFor(weight: number, totalWeight: number, servers: number): number {
  const f = Math.fround;
  const pct = f(f(weight) / f(totalWeight));
  const perHashGroups = f(f(f(pct * POINTS_PER_SERVER) / 4) * f(servers));
  // `+ 0.0000000001` is a double; the sum is narrowed back to float for floorf.
  return Math.floor(f(perHashGroups + 0.0000000001)) * 4;
}

/** The four continuum values of one "<name>-<i>" string. */
export function md5Points(label: string | Buffer): [number, number, number, number] {
  const d = createHash('md5').update(label).digest();
  return [d.readUInt32LE(0), d.readUInt32LE(4), d.readUInt32LE(8), d.readUInt32LE(12)];
}

export class Ketama implements NodeLookup {
  readonly points: readonly number[];
  /** Sorted point values and, at the same index, the config index of the node owning each. */
  private readonly values: Uint32Array;
  private readonly owners: Uint16Array;
  /**
   * A jump table into `values`: entry b is the first point at or above bucket b's lowest hash, the
   * buckets splitting the 32-bit space evenly, about one per point. A lookup then scans a point or
   * two instead of a binary search's unpredictable branches (measured: the search was 3% of the
   * proxy's CPU under pipelined GETs).
   */
  private readonly firstInBucket: Uint32Array;
  private readonly bucketShift: number;

  /** `live`: config indexes of the nodes on the continuum. */
  constructor(nodes: readonly DistributedNode[], live: readonly number[]) {
    if (live.length === 0) throw new Error('a ketama ring needs at least one live node');
    const order = twemproxyOrder(nodes, live);
    // Only live nodes count, as twemproxy recounts them when it ejects one.
    const total = live.reduce((s, i) => s + nodes[i].weight, 0);
    const points = new Array<number>(nodes.length).fill(0);
    for (const i of live) points[i] = pointsFor(nodes[i].weight, total, live.length);
    const entries: { value: number; owner: number }[] = [];
    for (const i of order) {
      for (let p = 0; p < points[i] / 4; p++) {
        const label = Buffer.concat([nodes[i].name, Buffer.from(`-${p}`)]);
        for (const value of md5Points(label)) entries.push({ value, owner: i });
      }
    }
    // Array.prototype.sort is stable: equal values keep the order they were made in.
    entries.sort((a, b) => a.value - b.value);
    this.values = Uint32Array.from(entries, (e) => e.value);
    this.owners = Uint16Array.from(entries, (e) => e.owner);
    // Buckets: the power of two at or above the number of points, from 2^4 to 2^16.
    const bucketBits = Math.min(16, Math.max(4, Math.ceil(Math.log2(Math.max(1, this.values.length)))));
    this.bucketShift = 32 - bucketBits;
    this.firstInBucket = new Uint32Array(1 << bucketBits);
    let point = 0;
    for (let b = 0; b < this.firstInBucket.length; b++) {
      const lowest = b * 2 ** this.bucketShift;
      while (point < this.values.length && this.values[point] < lowest) point++;
      this.firstInBucket[b] = point;
    }
    this.points = Object.freeze(points);
  }

  /** Number of points on the continuum. */
  get size(): number {
    return this.values.length;
  }

  indexOfHash(hash: number): number {
    // The first point at or above `hash` (twemproxy's binary search finds the same one), else the
    // continuum wraps to the first point.
    const values = this.values;
    let i = this.firstInBucket[hash >>> this.bucketShift];
    while (i < values.length && values[i] < hash) i++;
    return this.owners[i === values.length ? 0 : i];
  }
}
