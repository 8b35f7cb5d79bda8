/**
 * Where a key is read and written during a migration from ring A (`ring:`) to ring B
 * (`migration.to:`), per phase (SPEC 6). A pure, frozen snapshot: a phase switch builds a new
 * Placement and swaps it whole.
 *
 *   phase          reads   writes go to   then the key's state is copied to
 *   (none)         A       A              -
 *   double-write   A       A              its owner in B, when that differs
 *   read-new       B       A              its owner in B, when that differs
 *   done           B       B              -
 *
 * A stays the only place writes land until `done`, so double-write <-> read-new switches (even
 * with proxies that disagree for a while) never have two places accepting writes for one key;
 * see proxy/migration/converge.ts for why B converges to A. Entering `done`, ring B is fenced first
 * (proxy/migration/fence.ts), which keeps proxies still double-writing exact.
 *
 * Side B is a ring or a Redis Cluster (sharding/key-space.ts). Shards: a request's keys must share
 * a shard on every side it touches (a node of a ring, a slot of a cluster; else CROSSSLOT), so
 * during a migration a key's shard is (node index in A) * (shards of B) + (its shard in B).
 */
import { MigrationPhase, RingConfig, MigrationConfig, RingNode } from '../config/schema';
import { RING_SHARDS, Ring, RingNodeSpec } from './ring';
import { KeySpace, SlotOwners } from './key-space';
import { ClusterKeySpace } from './cluster-key-space';

/** twemproxy's `hash_tag` is optional; slotproxy hashes tags by default (SPEC 2). */
export const DEFAULT_HASH_TAG = '{}';

export function ringFromConfig(ring: RingConfig, ejected?: ReadonlySet<number>): Ring {
  return new Ring({ hash: ring.hash, hashTag: ring.hashTag ?? DEFAULT_HASH_TAG, distribution: ring.distribution, nodes: nodeSpecs(ring.nodes), ejected });
}

/** Config nodes as a ring takes them: each with its address (a Sentinel-managed one's looked up first, see master-addresses.ts). */
function nodeSpecs(nodes: readonly RingNode[]): RingNodeSpec[] {
  return nodes.map((n) => {
    if (n.addr === undefined) throw new Error(`ring node ${n.name ?? ''}: where Sentinel master ${n.master ?? ''} is is not known yet`);
    return { ...(n.name === undefined ? {} : { name: n.name }), addr: n.addr, weight: n.weight };
  });
}

/** The live slot map of a cluster named by its seeds (the proxy's, or a tool's own). */
export type ClusterOwnersFor = (seeds: readonly string[]) => SlotOwners;

/** Side B: a ring (its hash tag and distribution default to ring A's, when A is a ring) or a Redis Cluster. */
export function targetFromConfig(ring: RingConfig | null, migration: MigrationConfig, clusterFor: ClusterOwnersFor): KeySpace {
  const to = migration.to;
  if ('cluster' in to) return new ClusterKeySpace(to.cluster.seeds, clusterFor(to.cluster.seeds));
  return new Ring({ hash: to.hash, hashTag: to.hashTag ?? ring?.hashTag ?? DEFAULT_HASH_TAG, distribution: to.distribution ?? ring?.distribution, nodes: nodeSpecs(to.nodes) });
}

/** For configs without a cluster side: asking for one is a programming error. */
const NO_CLUSTER: ClusterOwnersFor = () => {
  throw new Error('this placement has no cluster side');
};

export class Placement {
  /** Both sides are rings hashing alike: one hash finds a key's node in both. */
  private readonly sameHashing: boolean;
  /** Shards of B per shard of A: a pair's shard is (shard in A) * stride + (shard in B). */
  private readonly stride: number;

  constructor(
    readonly from: KeySpace,
    readonly to: KeySpace | null,
    readonly phase: MigrationPhase | null,
  ) {
    // A random ring has no key -> node function (sharding/random.ts): nothing to migrate by.
    if (to !== null && [from, to].some((side) => side instanceof Ring && side.distribution === 'random')) {
      throw new Error('a random ring cannot be a side of a migration');
    }
    this.sameHashing = from instanceof Ring && to instanceof Ring && from.hashesLike(to);
    this.stride = to?.shardCount ?? RING_SHARDS;
    Object.freeze(this);
  }

  /** `ejected`: config indexes of ring A's nodes out of the ring (auto-eject, no migration). */
  static fromConfig(ring: RingConfig, migration: MigrationConfig | undefined, ejected?: ReadonlySet<number>, clusterFor: ClusterOwnersFor = NO_CLUSTER): Placement {
    const a = ringFromConfig(ring, migration === undefined ? ejected : undefined);
    if (migration === undefined) return new Placement(a, null, null);
    return new Placement(a, targetFromConfig(ring, migration, clusterFor), migration.phase);
  }

  /** Cluster mode: side A is the cluster the proxy fronts (`owners`: its live slot map). */
  static forCluster(seeds: readonly string[], owners: SlotOwners, migration: MigrationConfig | undefined, clusterFor: ClusterOwnersFor = NO_CLUSTER): Placement {
    const a = new ClusterKeySpace(seeds, owners);
    if (migration === undefined) return new Placement(a, null, null);
    return new Placement(a, targetFromConfig(null, migration, clusterFor), migration.phase);
  }

  /**
   * The same placement with the ring node at `from` now at `to` on every ring side (a Sentinel
   * failover; rings of a migration may share the node): same phase, and no key changes node.
   */
  readdressed(from: string, to: string): Placement {
    const side = <S extends KeySpace>(s: S): S | Ring => (s instanceof Ring ? s.readdressed(from, to) : s);
    return new Placement(side(this.from), this.to === null ? null : side(this.to), this.phase);
  }

  /** Same sides, another phase. */
  withPhase(phase: MigrationPhase): Placement {
    if (this.to === null) throw new Error('no migration is configured');
    return new Placement(this.from, this.to, phase);
  }

  get migrating(): boolean {
    return this.to !== null;
  }

  private get readsNew(): boolean {
    return this.to !== null && (this.phase === 'read-new' || this.phase === 'done');
  }

  /** True when writes are followed by a copy of the written keys' state to side B. */
  get converges(): boolean {
    return this.to !== null && (this.phase === 'double-write' || this.phase === 'read-new');
  }

  shardOf(key: Buffer): number {
    if (this.to === null) return this.from.shardOf(key);
    if (this.phase === 'done') return this.to.shardOf(key);
    const [a, b] = this.indexes(key, this.to);
    return a * this.stride + b;
  }

  /** The key's shard in A and in B, hashing it once when both rings hash alike. */
  private indexes(key: Buffer, to: KeySpace): [number, number] {
    if (!this.sameHashing) return [this.from.shardOf(key), to.shardOf(key)];
    const from = this.from as Ring;
    const h = from.hashOf(key);
    return [from.indexOfHash(h), (to as Ring).indexOfHash(h)];
  }

  /** Where reads of `shard` go (null for a shard no node serves). */
  readAddress(shard: number): string | null {
    if (this.to === null) return this.from.addressOf(shard);
    if (this.phase === 'done') return this.to.addressOf(shard);
    if (this.phase === 'read-new') return this.to.addressOf(shard % this.stride);
    return this.from.addressOf(Math.floor(shard / this.stride));
  }

  /** Where writes of `shard` go (null for a shard no node serves). */
  writeAddress(shard: number): string | null {
    if (this.to === null) return this.from.addressOf(shard);
    if (this.phase === 'done') return this.to.addressOf(shard);
    return this.from.addressOf(Math.floor(shard / this.stride));
  }

  /**
   * The B owner of `key` when a write to it must be copied there, else null. `to` is '' when no
   * node of B serves the key's slot now (the copy then fails with that reason).
   */
  copyTarget(key: Buffer): { from: string; to: string } | null {
    if (!this.converges || this.to === null) return null;
    const [a, b] = this.indexes(key, this.to);
    const from = this.from.addressOf(a) ?? '';
    const to = this.to.addressOf(b) ?? '';
    return from === to ? null : { from, to };
  }

  /** copyTarget of the keys of `shard` (a shard this placement's shardOf gave): one for all of them, no key hashed. */
  copyTargetOfShard(shard: number): { from: string; to: string } | null {
    if (!this.converges || this.to === null) return null;
    const from = this.from.addressOf(Math.floor(shard / this.stride)) ?? '';
    const to = this.to.addressOf(shard % this.stride) ?? '';
    return from === to ? null : { from, to };
  }

  /**
   * While writes still land on A (double-write, read-new): true when `keys` share a shard of side A
   * but not of side B, so only the target's rules refuse them.
   */
  refusedOnlyByTarget(keys: readonly Buffer[]): boolean {
    if (!this.converges || this.to === null || keys.length < 2) return false;
    const a = this.from.shardOf(keys[0]);
    const b = this.to.shardOf(keys[0]);
    let sameOnB = true;
    for (let i = 1; i < keys.length; i++) {
      if (this.from.shardOf(keys[i]) !== a) return false;
      if (this.to.shardOf(keys[i]) !== b) sameOnB = false;
    }
    return !sameOnB;
  }

  /** Nodes that reads go to, in a stable order (fan-outs, SCAN). */
  readMasters(): readonly string[] {
    return (this.readsNew ? (this.to as KeySpace) : this.from).masters();
  }

  /** Every node of both sides. */
  allAddresses(): string[] {
    return [...new Set([...this.from.masters(), ...(this.to?.masters() ?? [])])];
  }
}
