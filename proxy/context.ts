/**
 * What every part of a running proxy shares: the back-end pool, the router and its topology, the
 * command table and the counters. One per proxy process; sessions hold a reference to it.
 * The one file at the top of proxy/: above the parts it gathers, below those that use it.
 *
 * May import: backend, client, cluster, commands, ring, scripts, security, telemetry, tracking, sharding.
 */
import { BackendPool } from './backend/pool';
import { CommandTable } from './commands/table';
import { Router } from '../sharding/router';
import { RingRouter } from './ring/router';
import { ProxyStats } from './telemetry/stats';
import { MigrationFeedCounts } from './telemetry/metrics';
import { ClusterTopology } from './cluster/topology';
import { KnownClusters } from './cluster/known-clusters';
import { ReplicaReads } from './cluster/replica-reads';
import { ScriptStore } from './scripts/store';
import { ClientAuth } from './security/auth';
import { AclLog } from './security/acl-log';
import { ClientList } from './client/client-list';
import { ClientCaching } from './tracking/client-caching';

export interface ForwardOptions {
  /** MOVED/ASK hops before a request is answered with an error. */
  maxRedirects: number;
  /** How long TRYAGAIN, CLUSTERDOWN and unreachable nodes are retried before the error is passed on. */
  retryWindowMs: number;
}

/**
 * During a migration, what is known of the changes on side A's nodes reaching side B
 * (migration/change-copier.ts implements it; declared here so that dispatch can wait on it).
 */
export interface MigrationChanges {
  /** Resolves once every change made on `address` before now is on side B (null), or with why not; null when nothing needs to wait. */
  after(address: string): Promise<string | null> | null;
  /** Every change heard so far, on every node, is on side B; resolves with what could not be confirmed. */
  settle(): Promise<string[]>;
  /** False while side B's node `address` is known to be unreachable (writes moving there then converge). */
  reachesSideB(address: string): boolean;
  /** This proxy's id in the fleet (it acknowledges side A's closing under it). */
  selfId(): string;
  /** Nodes whose changes are not all known to be on side B, with why: a switch to read-new or done waits for none. */
  uncovered(): string[];
  /** True while every node not covered is a follow catching up (replication carry): a switch waits for it (migration/fence.ts). */
  catchingUp(): boolean;
  /** `address=state` per node of side A. */
  states(): string[];
  /** `address=proxy id` of the proxy holding each node's copier (migration/copier-lease.ts). */
  copiers(): string[];
  /** The nodes of side A whose copier this proxy holds. */
  held(): string[];
  /** `live`, the nodes not covered (`addr=state,...`), or `-` without feeds (the fleet record). */
  summary(): string;
  infoLines(): string[];
  counts(): MigrationFeedCounts;
  /** Before stop() on a clean shutdown: copies what was heard and hands the copier leases back. */
  release(timeoutMs: number): Promise<void>;
  stop(): void;
}

/**
 * Ring mode with servers given by their Sentinel master name (proxy/sentinel/ implements it;
 * declared here so that dispatch can wait out a failover): where each master is, and how a request
 * for a master that is down waits for Sentinel to promote a replica.
 */
export interface SentinelFollower {
  /** Where master `name` is now (undefined while no sentinel has said and the config gives no addr). */
  addressOf(name: string): string | undefined;
  /** Asks the sentinels for masters a reloaded config names (those nobody knows stay unknown). */
  learn(names: readonly string[]): Promise<void>;
  /** How long a request for `address` may wait for a failover; null when `address` is no Sentinel master's. */
  waitWindowMs(address: string): number | null;
  /** Runs `retry` after `delayMs`, or at once when `address`'s master moves meanwhile (or has moved). */
  retryAfter(address: string, delayMs: number, retry: () => void): void;
  /**
   * True while Sentinel promotes a replica of the master at `address` (a write it acknowledged now
   * would be dropped when it is demoted): writes wait, through retryAfter, for the move.
   */
  holdsWrites(address: string): boolean;
  /** `address` refused a write as a replica (READONLY): its master is asked for again. */
  demoted(address: string): void;
  /** Where the master that was at `address` is now (undefined when `address` is no Sentinel master's). */
  masterNow(address: string): string | undefined;
  /** The error of a request whose wait ended with no failover; `cause` the last error it got. */
  gaveUp(address: string, cause: string): string;
  stop(): void;
}

/** One worker's answer to a phase switch relayed to every worker of a --workers process group. */
export interface WorkerSwitch {
  pid: number;
  /** Its id in the fleet. */
  id: string;
  /** Null once it switched, else why not. */
  problem: string | null;
}

/** Switches every worker of the process group, the asking one included, to `phase`. */
export type WorkerPhaseRelay = (phase: string) => Promise<WorkerSwitch[]>;

export interface ProxyContext {
  /** The back end's kind; a ring migrated into a cluster becomes 'cluster' when its migration finishes (server/finish-reload.ts). */
  mode: 'cluster' | 'ring';
  readonly pool: BackendPool;
  readonly router: Router;
  /** Ring mode only: the ring router, whose placement a migration phase switch replaces whole. */
  readonly ring: RingRouter | null;
  /** Cluster mode only: MOVED patches it and asks for a refresh. */
  readonly topology: ClusterTopology | null;
  /** Ring mode only: the slot maps of clusters a migration goes to (the ring router follows their MOVEDs). */
  readonly clusters: KnownClusters | null;
  /** Cluster mode with `readFrom` other than master: the replicas read-only commands may use. */
  readonly replicaReads: ReplicaReads | null;
  table: CommandTable;
  readonly stats: ProxyStats;
  /** SHA1 -> body of every script seen, for NOSCRIPT healing (scripts/store.ts). */
  readonly scripts: ScriptStore;
  readonly forward: ForwardOptions;
  /** `crossSlot`: refuse multi-key commands spanning shards (default), or split MGET/MSET/DEL/... (dispatch/split.ts). */
  readonly crossSlot?: 'refuse' | 'split';
  /** `redis_version` of the back end (Valkey 8 says 7.2.4): what it is compatible with. */
  backendVersion: string;
  /** HELLO's `server` and `version` as the back end answers them: `redis` and redis_version, or `valkey` and valkey_version. */
  backendServer: { name: string; version: string };
  /** The proxy's clients (CLIENT LIST, KILL, UNBLOCK). */
  readonly clients: ClientList;
  /** CLIENT TRACKING: who read what, and the nodes' invalidations relayed (tracking/). */
  readonly caching: ClientCaching;
  /** A migration's change feeds (ring or cluster mode with a migration: block), else null. */
  changes: MigrationChanges | null;
  /** Ring mode with Sentinel-managed servers (ring.sentinels), else null. */
  readonly sentinel: SentinelFollower | null;
  /** Client users and passwords (CONFIG SET requirepass changes them; a reload that changes `auth` replaces them). */
  auth: ClientAuth;
  /** ACL LOG: refusals of every user (kept across reloads, as Redis keeps it across ACL LOAD). */
  readonly aclLog: AclLog;
  /**
   * Under --workers (cmd/worker-phase.ts): `PROXY MIGRATION PHASE` through any worker switches
   * every worker, as one proxy would. Unset in a single process.
   */
  switchWorkers?: WorkerPhaseRelay;
}
