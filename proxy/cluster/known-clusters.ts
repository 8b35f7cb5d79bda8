/**
 * The slot maps of Redis Clusters a ring-mode proxy reaches besides its ring: side B of a
 * migration into a cluster (`migration.to.cluster`). One ClusterTopology per cluster, named by its
 * seeds, loaded once and kept current (MOVED, lost connections, a timer) for the proxy's life, so
 * a reload that names the same cluster again (another phase) reuses it.
 */
import { BackendPool } from '../backend/pool';
import { ClusterTopology } from './topology';
import { SlotOwners } from '../../sharding/key-space';

export class KnownClusters {
  private readonly loaded = new Map<string, ClusterTopology>();
  private readonly loadedListeners: ((topology: ClusterTopology) => void)[] = [];

  constructor(
    private readonly pool: BackendPool,
    private readonly options: { refreshIntervalMs: number; queryTimeoutMs: number },
  ) {}

  /** True once any cluster is loaded. */
  get any(): boolean {
    return this.loaded.size > 0;
  }

  has(seeds: readonly string[]): boolean {
    return this.loaded.has(seeds.join(','));
  }

  /** Loads the cluster's slot map; rejects when no seed answers within `timeoutMs` (0: keep trying). */
  async load(seeds: readonly string[], timeoutMs = 0): Promise<void> {
    const key = seeds.join(',');
    if (this.loaded.has(key)) return;
    const topology = new ClusterTopology(this.pool, { seeds, ...this.options });
    let timer: NodeJS.Timeout | null = null;
    const deadline =
      timeoutMs > 0
        ? new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no seed of the cluster ${key} answered CLUSTER SLOTS within ${timeoutMs} ms`)), timeoutMs);
          })
        : null;
    try {
      await (deadline === null ? topology.start() : Promise.race([topology.start(), deadline]));
    } catch (err) {
      topology.stop();
      throw err;
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
    this.pool.onConnectionLost(() => topology.requestRefresh());
    this.loaded.set(key, topology);
    for (const l of this.loadedListeners) l(topology);
  }

  /** The slot map of a loaded cluster (Placement.fromConfig's `clusterFor`). */
  readonly ownersFor = (seeds: readonly string[]): SlotOwners => {
    const topology = this.loaded.get(seeds.join(','));
    if (topology === undefined) throw new Error(`the cluster ${seeds.join(',')} is not loaded`);
    return topology;
  };

  /** Every loaded cluster's topology (client-side caching watches who serves what). */
  topologies(): ClusterTopology[] {
    return [...this.loaded.values()];
  }

  /** Called for each cluster loaded from now on, and now for those loaded already. */
  onLoaded(listener: (topology: ClusterTopology) => void): void {
    this.loadedListeners.push(listener);
    for (const t of this.loaded.values()) listener(t);
  }

  /** Every node (and seed) of every loaded cluster: connections to keep. */
  addresses(): string[] {
    const out: string[] = [];
    for (const [key, t] of this.loaded) out.push(...t.current.addresses(), ...key.split(','));
    return out;
  }

  stop(): void {
    for (const t of this.loaded.values()) t.stop();
  }
}
