/**
 * A ring: standalone nodes and the placement of every key on them, exactly as twemproxy places it
 * for the same servers, names, weights, `hash`, `hash_tag` and `distribution` (ketama.ts,
 * modula.ts, random.ts; all servers live, or those auto_eject_hosts left in).
 *
 * - A server's identity is its name; without one, "host:port" as written, or the host alone when
 *   the port is 11211 (libmemcached compatibility). Ketama makes its points from it.
 * - A key is hashed by `hash` over the bytes `hash_tag` selects (the whole key without one).
 * - Shards are node config indexes. A random ring has one shard for every key (RANDOM_SHARD), whose
 *   node is picked among the live ones each time its address is asked for: every request (all its
 *   keys, a whole MULTI/EXEC) goes to one random live node, as nutcracker sends each request.
 *
 * A Ring is immutable: a new server list builds a new Ring, swapped whole.
 */
import { DistributionName, HashName } from '../config/schema';
import { hashTagged } from './hash-tag';
import { KEY_HASHES, KeyHash } from './hash';
import { KeySpace } from './key-space';
import { DistributedNode, NodeLookup } from './distribution';
import { Ketama } from './ketama';
import { Modula } from './modula';
import { RandomPick } from './random';
import { interned } from './interned-address';

export { md5Points, pointsFor } from './ketama';

export interface RingNodeSpec {
  name?: string;
  addr: string;
  weight: number;
}

export interface RingSpec {
  hash: HashName;
  /** Two characters (twemproxy's hash_tag), or null/'' to hash whole keys. */
  hashTag: string | null;
  /** twemproxy's `distribution`. Default 'ketama'. */
  distribution?: DistributionName;
  nodes: readonly RingNodeSpec[];
  /** Config indexes of nodes taken out of the ring (twemproxy's auto_eject_hosts): they hold no keys. */
  ejected?: ReadonlySet<number>;
  /** Random numbers in [0, 1) for `distribution: random`. Default Math.random. */
  random?: () => number;
}

export interface RingNode {
  /** Its identity (ketama's points are made from it). */
  readonly name: string;
  readonly addr: string;
  readonly weight: number;
  /** Its share: points on the ketama continuum, entries of the modula list, 1 on a random ring; 0 when out of the ring. */
  readonly points: number;
}

const KETAMA_PORT = '11211';

/** twemproxy's name for a server that has none. */
export function continuumName(node: RingNodeSpec): string {
  if (node.name !== undefined) return node.name;
  const colon = node.addr.lastIndexOf(':');
  return node.addr.slice(colon + 1) === KETAMA_PORT ? node.addr.slice(0, colon) : node.addr;
}

/** Shards of a ring are node indexes below this (a migration numbers pairs of shards with it). */
export const RING_SHARDS = 1 << 12;

/** The one shard of a random ring. No node has this index: a ring has at most RING_SHARDS - 1 nodes. */
export const RANDOM_SHARD = RING_SHARDS - 1;

function lookupFor(distribution: DistributionName, nodes: readonly DistributedNode[], live: readonly number[], random: () => number): NodeLookup {
  switch (distribution) {
    case 'ketama':
      return new Ketama(nodes, live);
    case 'modula':
      return new Modula(nodes, live);
    case 'random':
      return new RandomPick(nodes.length, live, random);
  }
}

export class Ring implements KeySpace {
  readonly kind = 'ring';
  readonly shardCount = RING_SHARDS;
  /** In config order: shard numbers are indexes into this list. */
  readonly nodes: readonly RingNode[];
  /** Every distinct node address, in config order (two entries may share a node). */
  readonly addresses: readonly string[];
  readonly hash: HashName;
  readonly distribution: DistributionName;
  private readonly keyHash: KeyHash;
  private readonly tag: { open: number; close: number } | null;
  private readonly lookup: NodeLookup;
  /** Addresses of nodes in the ring (ejected nodes hold no keys). */
  private readonly liveAddresses: readonly string[];
  /** What it was built from, for readdressed(). */
  private readonly spec: RingSpec;

  constructor(spec: RingSpec) {
    if (spec.nodes.length === 0) throw new Error('a ring needs at least one node');
    if (spec.nodes.length >= RING_SHARDS) throw new Error(`a ring may have at most ${RING_SHARDS - 1} nodes`);
    this.hash = spec.hash;
    this.distribution = spec.distribution ?? 'ketama';
    this.keyHash = KEY_HASHES[spec.hash];
    const t = spec.hashTag ?? '';
    this.tag = t.length === 2 ? { open: t.charCodeAt(0), close: t.charCodeAt(1) } : null;

    const named = spec.nodes.map((n) => ({ name: Buffer.from(continuumName(n), 'utf8'), weight: n.weight }));
    const ejected = spec.ejected ?? new Set<number>();
    const live = spec.nodes.map((_, i) => i).filter((i) => !ejected.has(i));
    if (live.length === 0) throw new Error('a ring needs at least one live node');
    this.lookup = lookupFor(this.distribution, named, live, spec.random ?? Math.random);
    const points = this.lookup.points;
    this.nodes = Object.freeze(
      spec.nodes.map((n, i) => Object.freeze({ name: named[i].name.toString('utf8'), addr: interned(n.addr), weight: n.weight, points: points[i] })),
    );
    this.addresses = Object.freeze([...new Set(this.nodes.map((n) => n.addr))]);
    this.liveAddresses = Object.freeze([...new Set(this.nodes.filter((n) => n.points > 0).map((n) => n.addr))]);
    this.spec = spec;
    Object.freeze(this);
  }

  /**
   * The same ring with the node at `from` now at `to` (a Sentinel failover): every node keeps its
   * name, weight and place, so every key keeps its node. The ring itself when none is at `from`.
   */
  readdressed(from: string, to: string): Ring {
    if (!this.addresses.includes(from)) return this;
    // A node named by its address would change its points: such a node has no master to follow.
    const nodes = this.spec.nodes.map((n) => (n.addr === from ? { name: continuumName(n), addr: to, weight: n.weight } : n));
    return new Ring({ ...this.spec, nodes });
  }

  /**
   * The 32-bit hash twemproxy computes for `key` (hash tag applied; empty keys hash to 0).
   * twemproxy skips hashing when a pool has one server; the lookup gives the same answer.
   */
  hashOf(key: Buffer): number {
    // A tag is never empty (taggedRange): only the empty key hashes no bytes.
    return key.length === 0 ? 0 : hashTagged(key, this.tag, this.keyHash);
  }

  /** Its hash tag's two characters, '' when whole keys are hashed. */
  tagText(): string {
    return this.tag === null ? '' : String.fromCharCode(this.tag.open, this.tag.close);
  }

  /** True when `other` hashes keys exactly as this ring does (one hash serves both lookups). */
  hashesLike(other: Ring): boolean {
    return this.hash === other.hash && this.tag?.open === other.tag?.open && this.tag?.close === other.tag?.close;
  }

  /** Config index of the node owning `key` (on a random ring: a live node picked now). */
  indexOf(key: Buffer): number {
    return this.distribution === 'random' ? this.lookup.indexOfHash(0) : this.lookup.indexOfHash(this.hashOf(key));
  }

  /** Config index of the node owning `hash` (on a random ring: a live node picked now). */
  indexOfHash(hash: number): number {
    return this.lookup.indexOfHash(hash);
  }

  /** A node's config index; on a random ring RANDOM_SHARD, for every key. */
  shardOf(key: Buffer): number {
    return this.distribution === 'random' ? RANDOM_SHARD : this.indexOf(key);
  }

  /** The node of `shard`; for RANDOM_SHARD on a random ring, a live node picked at each call. */
  addressOf(shard: number): string | null {
    if (shard === RANDOM_SHARD && this.distribution === 'random') return this.nodes[this.lookup.indexOfHash(0)].addr;
    return this.nodes[shard]?.addr ?? null;
  }

  masters(): readonly string[] {
    return this.liveAddresses;
  }

  /** The node owning `key` (on a random ring: a live node picked now). */
  nodeOf(key: Buffer): RingNode {
    return this.nodes[this.indexOf(key)];
  }

  /** Entries of the lookup: points on the ketama continuum, modula entries, or live nodes (random). */
  get size(): number {
    return this.lookup.size;
  }
}
