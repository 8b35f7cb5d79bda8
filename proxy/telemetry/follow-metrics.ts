/** The replication carry's metrics: one series per followed node of side A (migration/followers.ts counts()). */
import { Counter, Gauge, Registry } from 'prom-client';

/** What migration/followers.ts counts() says of one followed node. */
export interface FollowCounts {
  node: string;
  /** live, connecting, full-sync, loading, lost, failed, stopped */
  state: string;
  /** Bytes received from the node and not yet applied on side B. */
  lagBytes: number;
  /** Age of the oldest command received and not yet applied on side B (0 when none waits). */
  lagSeconds: number;
  fullSyncs: number;
  resumes: number;
  /** Stream bytes waiting in the follow's spool file for side B. */
  spoolBytes: number;
  /** Times the spool filled and the link stopped being read until side B caught up. */
  spoolFulls: number;
  /** The spool is full now: the link is not read. */
  spoolFull: boolean;
}

const FOLLOW_STATES = ['live', 'connecting', 'full-sync', 'loading', 'lost', 'failed', 'stopped'];

export function registerFollowMetrics(registry: Registry, follows: () => FollowCounts[]): void {
  /** A gauge or counter with one value per followed node. */
  const perNode = (kind: 'gauge' | 'counter', name: string, help: string, value: (f: FollowCounts) => number): void => {
    const collect = function (this: Gauge | Counter): void {
      this.reset();
      for (const f of follows()) (this instanceof Gauge ? this.set({ node: f.node }, value(f)) : this.inc({ node: f.node }, value(f)));
    };
    if (kind === 'gauge') new Gauge({ name, help, labelNames: ['node'], registers: [registry], collect });
    else new Counter({ name, help, labelNames: ['node'], registers: [registry], collect });
  };
  perNode('gauge', 'slotproxy_migration_follow_lag_bytes', "Migration, replication carry: bytes of a node of side A's replication stream received and not yet applied on side B.", (f) => f.lagBytes);
  perNode('gauge', 'slotproxy_migration_follow_lag_seconds', "Migration, replication carry: age of the oldest command of a node of side A's stream not yet applied on side B.", (f) => f.lagSeconds);
  new Gauge({
    name: 'slotproxy_migration_follow_state',
    help: 'Migration, replication carry: 1 for the state each followed node of side A is in (live when its stream is applied as it comes).',
    labelNames: ['node', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const f of follows()) for (const state of FOLLOW_STATES) this.set({ node: f.node, state }, f.state === state ? 1 : 0);
    },
  });
  new Counter({
    name: 'slotproxy_migration_follow_syncs_total',
    help: 'Migration, replication carry: full syncs (kind="full") and resumes with +CONTINUE (kind="resume") of the followed nodes of side A.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ kind: 'full' }, follows().reduce((n, f) => n + f.fullSyncs, 0));
      this.inc({ kind: 'resume' }, follows().reduce((n, f) => n + f.resumes, 0));
    },
  });
  perNode('gauge', 'slotproxy_migration_follow_spool_bytes', "Migration, replication carry: bytes of a node of side A's stream waiting in the follow's spool file for side B.", (f) => f.spoolBytes);
  perNode(
    'gauge',
    'slotproxy_migration_follow_spool_paused',
    "Migration, replication carry: 1 while a follow's spool is full and its link to the node of side A is not read (side B is slower than A's writes; A holds the stream, and cuts the link past its client-output-buffer-limit for replicas).",
    (f) => (f.spoolFull ? 1 : 0),
  );
  perNode('counter', 'slotproxy_migration_follow_spool_full_total', "Migration, replication carry: times a follow's spool filled and its link stopped being read until side B caught up (side A held the stream, as for a slow replica).", (f) => f.spoolFulls);
}
