/**
 * How the proxy reaches its nodes in each mode, set up before it serves: in ring mode the ring (and
 * its Sentinel masters, auto-eject, a migration's cluster side), in cluster mode the slot map kept
 * fresh (and a migration's placement over it), with replica reads in both when asked for.
 */
import { Config } from '../../config/schema';
import { BackendPool } from '../backend/pool';
import { ClusterTopology } from '../cluster/topology';
import { KnownClusters } from '../cluster/known-clusters';
import { ClusterRouter } from '../cluster/router';
import { ReplicaReads } from '../cluster/replica-reads';
import { ProxyContext } from '../context';
import { RingRouter } from '../ring/router';
import { CLUSTER_RETRY_WINDOW_MS } from './ring-reload';
import { ringServerFailsFast } from '../ring/fail-fast';
import { fenceRingB } from '../migration/fence';
import { decideCarryAtStart } from '../migration/carry-choice';
import { closedSideProblem } from '../migration/closed-side';
import { ClusterKeySpace } from '../../sharding/cluster-key-space';
import { NodeEjector } from '../ring/ejector';
import { Placement } from '../../sharding/migration';
import { migrationAt, ringAt } from '../../sharding/master-addresses';
import { NO_MASTERS, startSentinelMasters } from '../sentinel/start';
import { MasterFollower } from '../sentinel/follow';
import { sentinelReplicas } from '../sentinel/replicas';

/** Ring mode: how long an unreachable node is retried before its keys get an error naming it. */
const RING_RETRY_WINDOW_MS = 1000;
/** A migration's cluster side: how often its slot map is reloaded besides MOVED and lost connections. */
const RING_TARGET_REFRESH_MS = 10_000;

/** What routing needs in one mode: the context's mode-specific fields, and what to await before serving. */
export interface Routing {
  parts: Pick<ProxyContext, 'router' | 'ring' | 'topology' | 'clusters' | 'replicaReads' | 'forward' | 'sentinel'>;
  start(): Promise<void>;
}

/** MOVED/ASK hops in ring mode: only a migration's cluster side answers them. */
const RING_MAX_REDIRECTS = 16;

/**
 * Ring mode has no topology to discover: the ring is the config (proxy/ring/), and a migration's
 * cluster side, when it has one, is loaded before the proxy serves.
 */
export async function ringRouting(config: Extract<Config, { mode: 'ring' }>, pool: BackendPool): Promise<Routing> {
  const clusters = new KnownClusters(pool, { refreshIntervalMs: RING_TARGET_REFRESH_MS, queryTimeoutMs: config.backend.commandTimeoutMs });
  const to = config.migration?.to;
  if (to !== undefined && 'cluster' in to) await clusters.load(to.cluster.seeds);
  // Sentinel-managed nodes are placed where their masters are now, and follow them (proxy/sentinel/).
  const masters = await startSentinelMasters(config);
  const at = masters?.addressOf ?? NO_MASTERS;
  const ring = new RingRouter(Placement.fromConfig(ringAt(config.ring, at), migrationAt(config.migration, at), undefined, clusters.ownersFor));
  const sentinel = masters === null ? null : new MasterFollower(masters, ring, pool, { failoverWaitMs: config.ring.sentinel?.failoverWaitMs ?? 10_000, queryTimeoutMs: config.backend.commandTimeoutMs });
  // A ring server that is down answers at once, as nutcracker's; a Sentinel master's waits for its successor.
  pool.setFailFast(ringServerFailsFast(ring, (address) => sentinel?.waitWindowMs(address) != null));
  // Started in done: ring B must refuse late copies from proxies still double-writing.
  if (ring.placement.phase === 'done') await fenceRingB(pool, ring.placement, config.backend.commandTimeoutMs);
  // Started without a migration on nodes a fleet in done has closed: refused (migration/closed-side.ts).
  if (config.migration === undefined) {
    const problem = await closedSideProblem(pool, ring.placement.from.masters(), ring.placement.from, config.backend.connectTimeoutMs);
    if (problem !== null) {
      masters?.stop();
      clusters.stop();
      pool.closeAll();
      throw new Error(problem);
    }
  }
  // Started with a migration: its carry (replication where A allows it), then what that carry needs.
  await decideCarryAtStart(pool, ring, config.migration?.carry, config.backend.commandTimeoutMs);
  // twemproxy's auto_eject_hosts; a migration keeps both rings fixed.
  if (config.ring.autoEjectHosts === true && config.migration === undefined) new NodeEjector(config.ring, ring, pool, (r) => ringAt(r, at));
  // ring.sentinel.readFrom: the replicas the sentinels name, checked as a cluster's are.
  const reads = config.ring.sentinel;
  const replicaReads =
    masters === null || reads === undefined || reads.readFrom === 'master'
      ? null
      : new ReplicaReads(pool, sentinelReplicas(masters), { checkIntervalMs: reads.replicaCheckIntervalMs, maxLagSeconds: reads.replicaMaxLagSeconds, queryTimeoutMs: config.backend.commandTimeoutMs });
  return {
    parts: {
      router: ring,
      ring,
      topology: null,
      clusters,
      replicaReads,
      sentinel,
      // A cluster side rides out its failovers as cluster mode does (proxy/server/ring-reload.ts too).
      forward: { maxRedirects: RING_MAX_REDIRECTS, retryWindowMs: clusters.any ? CLUSTER_RETRY_WINDOW_MS : RING_RETRY_WINDOW_MS },
    },
    start: async () => {
      await replicaReads?.start();
    },
  };
}

/**
 * Cluster mode: the slot map from the seeds, kept fresh, and optionally the replicas' health.
 * With a `migration:` block the router is a placement over this cluster (side A) and the target
 * (a ring, or a cluster whose slot map is loaded before the proxy serves).
 */
export async function clusterRouting(config: Extract<Config, { mode: 'cluster' }>, pool: BackendPool): Promise<Routing> {
  const topology = new ClusterTopology(pool, {
    seeds: config.cluster.seeds,
    refreshIntervalMs: config.cluster.refreshIntervalMs,
    queryTimeoutMs: config.backend.commandTimeoutMs,
  });
  pool.onConnectionLost(() => topology.requestRefresh());
  let ring: RingRouter | null = null;
  let clusters: KnownClusters | null = null;
  if (config.migration !== undefined) {
    clusters = new KnownClusters(pool, { refreshIntervalMs: config.cluster.refreshIntervalMs, queryTimeoutMs: config.backend.commandTimeoutMs });
    const to = config.migration.to;
    if ('cluster' in to) await clusters.load(to.cluster.seeds);
    ring = new RingRouter(Placement.forCluster(config.cluster.seeds, topology, config.migration, clusters.ownersFor));
  }
  const placementRouter = ring;
  const knownClusters = clusters;
  // Connections to nodes no longer in the map are closed, those of side B kept.
  topology.onChange((map) =>
    pool.retain(new Set([...map.addresses(), ...config.cluster.seeds, ...(placementRouter?.placement.to?.masters() ?? []), ...(knownClusters?.addresses() ?? [])])),
  );
  const replicaReads =
    config.cluster.readFrom === 'master'
      ? null
      : new ReplicaReads(pool, () => topology.current.masters, {
          checkIntervalMs: config.cluster.replicaCheckIntervalMs,
          maxLagSeconds: config.cluster.replicaMaxLagSeconds,
          queryTimeoutMs: config.backend.commandTimeoutMs,
        });
  return {
    parts: {
      router: ring ?? new ClusterRouter(topology),
      ring,
      topology,
      clusters,
      replicaReads,
      sentinel: null,
      forward: { maxRedirects: config.cluster.maxRedirects, retryWindowMs: config.cluster.retryWindowMs },
    },
    start: async () => {
      await topology.start();
      if (config.migration === undefined) {
        const problem = await closedSideProblem(pool, topology.masterAddresses(), new ClusterKeySpace(config.cluster.seeds, topology), config.backend.connectTimeoutMs);
        if (problem !== null) {
          topology.stop();
          pool.closeAll();
          throw new Error(problem);
        }
      }
      if (ring !== null) await decideCarryAtStart(pool, ring, config.migration?.carry, config.backend.commandTimeoutMs);
      await replicaReads?.start();
      // Started in done: side B must refuse late copies from proxies still double-writing.
      if (ring?.placement.phase === 'done') await fenceRingB(pool, ring.placement, config.backend.commandTimeoutMs);
    },
  };
}
