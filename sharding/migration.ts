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
 * Shards: a request's keys must share a node in every ring it touches (else CROSSSLOT), so during
 * a migration a key's shard is (index in A) * SHARD_STRIDE + (index in B).
 */
import { MigrationPhase, RingConfig, MigrationConfig } from '../config/schema';
import { Ring } from './ring';

export const SHARD_STRIDE = 1 << 12;
/** twemproxy's `hash_tag` is optional; slotproxy hashes tags by default (SPEC 2). */
export const DEFAULT_HASH_TAG = '{}';

export function ringFromConfig(ring: RingConfig, ejected?: ReadonlySet<number>): Ring {
  return new Ring({ hash: ring.hash, hashTag: ring.hashTag ?? DEFAULT_HASH_TAG, nodes: ring.nodes, ejected });
}

/** Ring B; its hash tag defaults to ring A's. */
export function targetRingFromConfig(ring: RingConfig, migration: MigrationConfig): Ring {
  const to = migration.to;
  return new Ring({ hash: to.hash, hashTag: to.hashTag ?? ring.hashTag ?? DEFAULT_HASH_TAG, nodes: to.nodes });
}

export class Placement {
  private readonly readAddrs: readonly string[];
  private readonly sameHashing: boolean;

  constructor(
    readonly from: Ring,
    readonly to: Ring | null,
    readonly phase: MigrationPhase | null,
  ) {
    if (to !== null && (from.nodes.length >= SHARD_STRIDE || to.nodes.length >= SHARD_STRIDE)) {
      throw new Error(`a ring may have at most ${SHARD_STRIDE - 1} nodes`);
    }
    this.sameHashing = to !== null && from.hashesLike(to);
    const read = this.readsNew ? to : from;
    // Nodes without points (ejected) hold no keys: fan-outs skip them.
    this.readAddrs = Object.freeze([...new Set((read ?? from).nodes.filter((n) => n.points > 0).map((n) => n.addr))]);
    Object.freeze(this);
  }

  /** `ejected`: config indexes of ring A's nodes out of the ring (auto-eject, no migration). */
  static fromConfig(ring: RingConfig, migration: MigrationConfig | undefined, ejected?: ReadonlySet<number>): Placement {
    const a = ringFromConfig(ring, migration === undefined ? ejected : undefined);
    if (migration === undefined) return new Placement(a, null, null);
    return new Placement(a, targetRingFromConfig(ring, migration), migration.phase);
  }

  /** Same rings, another phase. */
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

  /** True when writes are followed by a copy of the written keys' state to ring B. */
  get converges(): boolean {
    return this.to !== null && (this.phase === 'double-write' || this.phase === 'read-new');
  }

  shardOf(key: Buffer): number {
    if (this.to === null) return this.from.indexOf(key);
    if (this.phase === 'done') return this.to.indexOf(key);
    const [a, b] = this.indexes(key, this.to);
    return a * SHARD_STRIDE + b;
  }

  /** The key's node index in A and in B, hashing it once when both rings hash alike. */
  private indexes(key: Buffer, to: Ring): [number, number] {
    if (!this.sameHashing) return [this.from.indexOf(key), to.indexOf(key)];
    const h = this.from.hashOf(key);
    return [this.from.indexOfHash(h), to.indexOfHash(h)];
  }

  /** Where reads of `shard` go (null for a shard this placement does not know). */
  readAddress(shard: number): string | null {
    if (this.to === null) return this.from.nodes[shard]?.addr ?? null;
    if (this.phase === 'done') return this.to.nodes[shard]?.addr ?? null;
    if (this.phase === 'read-new') return this.to.nodes[shard % SHARD_STRIDE]?.addr ?? null;
    return this.from.nodes[Math.floor(shard / SHARD_STRIDE)]?.addr ?? null;
  }

  /** Where writes of `shard` go (null for a shard this placement does not know). */
  writeAddress(shard: number): string | null {
    if (this.to === null) return this.from.nodes[shard]?.addr ?? null;
    if (this.phase === 'done') return this.to.nodes[shard]?.addr ?? null;
    return this.from.nodes[Math.floor(shard / SHARD_STRIDE)]?.addr ?? null;
  }

  /** The B owner of `key` when a write to it must be copied there, else null. */
  copyTarget(key: Buffer): { from: string; to: string } | null {
    if (!this.converges || this.to === null) return null;
    const [a, b] = this.indexes(key, this.to);
    const from = this.from.nodes[a].addr;
    const to = this.to.nodes[b].addr;
    return from === to ? null : { from, to };
  }

  /** Nodes that reads go to, in a stable order (fan-outs, SCAN). */
  readMasters(): readonly string[] {
    return this.readAddrs;
  }

  /** Every node of both rings. */
  allAddresses(): string[] {
    return [...new Set([...this.from.nodes, ...(this.to?.nodes ?? [])].map((n) => n.addr))];
  }
}
