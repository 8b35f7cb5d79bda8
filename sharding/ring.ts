/**
 * The ketama continuum, built exactly as twemproxy's `distribution: ketama` builds it
 * (nutcracker's nc_ketama.c, all servers live), and the lookup of a key's node on it.
 *
 * - A server's identity on the continuum is its name; without one, "host:port" as written, or
 *   the host alone when the port is 11211 (libmemcached compatibility).
 * - Servers are ordered by name (shorter first, then bytewise) before points are made; this only
 *   decides ties between equal point values, as the sort by value is stable.
 * - A server gets floor(weight/total * 40 * servers + 1e-10) * 4 points, computed in 32-bit
 *   float as nutcracker does; the points of "<name>-<i>" are the four little-endian 32-bit
 *   quarters of its MD5.
 * - A key's hash goes to the first point at or above it, wrapping to the first point.
 *
 * A Ring is immutable: a new server list builds a new Ring, swapped whole.
 */
import { createHash } from 'node:crypto';
import { HashName } from '../config/schema';
import { taggedRange } from './hash-tag';
import { KEY_HASHES, KeyHash } from './hash';
import { KeySpace } from './key-space';

export interface RingNodeSpec {
  name?: string;
  addr: string;
  weight: number;
}

export interface RingSpec {
  hash: HashName;
  /** Two characters (twemproxy's hash_tag), or null/'' to hash whole keys. */
  hashTag: string | null;
  nodes: readonly RingNodeSpec[];
  /** Config indexes of nodes taken out of the ring (twemproxy's auto_eject_hosts): no points. */
  ejected?: ReadonlySet<number>;
}

export interface RingNode {
  /** The name its points are made from. */
  readonly name: string;
  readonly addr: string;
  readonly weight: number;
  /** Points it holds on the continuum. */
  readonly points: number;
}

const POINTS_PER_SERVER = 160;
const KETAMA_PORT = '11211';

/** twemproxy's name for a server that has none. */
export function continuumName(node: RingNodeSpec): string {
  if (node.name !== undefined) return node.name;
  const colon = node.addr.lastIndexOf(':');
  return node.addr.slice(colon + 1) === KETAMA_PORT ? node.addr.slice(0, colon) : node.addr;
}

/** twemproxy's string_compare: shorter first, then bytewise. */
function compareNames(a: Buffer, b: Buffer): number {
  return a.length !== b.length ? a.length - b.length : Buffer.compare(a, b);
}

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

/** Shards of a ring are node indexes below this (a migration numbers pairs of shards with it). */
export const RING_SHARDS = 1 << 12;

export class Ring implements KeySpace {
  readonly kind = 'ring';
  readonly shardCount = RING_SHARDS;
  /** In config order: shard numbers are indexes into this list. */
  readonly nodes: readonly RingNode[];
  /** Every distinct node address, in config order (two entries may share a node). */
  readonly addresses: readonly string[];
  readonly hash: HashName;
  private readonly keyHash: KeyHash;
  private readonly tag: { open: number; close: number } | null;
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
  /** Addresses of nodes with points (ejected nodes hold no keys). */
  private readonly liveAddresses: readonly string[];

  constructor(spec: RingSpec) {
    if (spec.nodes.length === 0) throw new Error('a ring needs at least one node');
    if (spec.nodes.length >= RING_SHARDS) throw new Error(`a ring may have at most ${RING_SHARDS - 1} nodes`);
    this.hash = spec.hash;
    this.keyHash = KEY_HASHES[spec.hash];
    const t = spec.hashTag ?? '';
    this.tag = t.length === 2 ? { open: t.charCodeAt(0), close: t.charCodeAt(1) } : null;

    const names = spec.nodes.map((n) => Buffer.from(continuumName(n), 'utf8'));
    const ejected = spec.ejected ?? new Set<number>();
    const live = spec.nodes.map((_, i) => i).filter((i) => !ejected.has(i));
    if (live.length === 0) throw new Error('a ring needs at least one live node');
    const order = live.sort((a, b) => compareNames(names[a], names[b]));
    // Only live nodes count, as twemproxy recounts them when it ejects one.
    const total = live.reduce((s, i) => s + spec.nodes[i].weight, 0);
    const points = spec.nodes.map((n, i) => (ejected.has(i) ? 0 : pointsFor(n.weight, total, live.length)));
    const entries: { value: number; owner: number }[] = [];
    for (const i of order) {
      for (let p = 0; p < points[i] / 4; p++) {
        const label = Buffer.concat([names[i], Buffer.from(`-${p}`)]);
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
    this.nodes = Object.freeze(
      spec.nodes.map((n, i) => Object.freeze({ name: names[i].toString('utf8'), addr: n.addr, weight: n.weight, points: points[i] })),
    );
    this.addresses = Object.freeze([...new Set(spec.nodes.map((n) => n.addr))]);
    this.liveAddresses = Object.freeze([...new Set(this.nodes.filter((n) => n.points > 0).map((n) => n.addr))]);
    Object.freeze(this);
  }

  /**
   * The 32-bit hash twemproxy computes for `key` (hash tag applied; empty keys hash to 0).
   * twemproxy skips hashing when a pool has one server; the lookup gives the same answer.
   */
  hashOf(key: Buffer): number {
    const [start, end] = taggedRange(key, this.tag);
    return end === start ? 0 : this.keyHash(key, start, end);
  }

  /** True when `other` hashes keys exactly as this ring does (one hash serves both lookups). */
  hashesLike(other: Ring): boolean {
    return this.hash === other.hash && this.tag?.open === other.tag?.open && this.tag?.close === other.tag?.close;
  }

  /** Config index of the node owning `key`. */
  indexOf(key: Buffer): number {
    return this.indexOfHash(this.hashOf(key));
  }

  /** Config index of the node owning continuum position `hash`. */
  indexOfHash(hash: number): number {
    // The first point at or above `hash` (twemproxy's binary search finds the same one), else the
    // continuum wraps to the first point.
    const values = this.values;
    let i = this.firstInBucket[hash >>> this.bucketShift];
    while (i < values.length && values[i] < hash) i++;
    return this.owners[i === values.length ? 0 : i];
  }

  shardOf(key: Buffer): number {
    return this.indexOf(key);
  }

  addressOf(shard: number): string | null {
    return this.nodes[shard]?.addr ?? null;
  }

  masters(): readonly string[] {
    return this.liveAddresses;
  }

  /** The node owning `key`. */
  nodeOf(key: Buffer): RingNode {
    return this.nodes[this.indexOf(key)];
  }

  /** Number of points on the continuum. */
  get size(): number {
    return this.values.length;
  }
}
