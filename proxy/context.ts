/**
 * What every part of a running proxy shares: the back-end pool, the router and its topology, the
 * command table and the counters. One per proxy process; sessions hold a reference to it.
 */
import { BackendPool } from './backend/pool';
import { CommandTable } from './commands/table';
import { Router } from './router';
import { ProxyStats } from './stats';
import { ClusterTopology } from './cluster/topology';

export interface ForwardOptions {
  /** MOVED/ASK hops before a request is answered with an error. */
  maxRedirects: number;
  /** How long TRYAGAIN, CLUSTERDOWN and unreachable nodes are retried before the error is passed on. */
  retryWindowMs: number;
}

export interface ProxyContext {
  readonly mode: 'cluster' | 'ring';
  readonly pool: BackendPool;
  readonly router: Router;
  /** Cluster mode only: MOVED patches it and asks for a refresh. */
  readonly topology: ClusterTopology | null;
  table: CommandTable;
  readonly stats: ProxyStats;
  readonly forward: ForwardOptions;
  /** `redis_version` of the back end, for HELLO. */
  backendVersion: string;
}
