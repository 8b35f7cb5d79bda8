/**
 * Prometheus metrics (SPEC section 7): a prom-client registry filled at scrape time from the plain
 * counters the hot path increments (ProxyStats, LatencyHistogram), and the HTTP endpoint serving it
 * on `metrics.listen` at /metrics.
 *
 * Nothing here runs per command: every metric has a collect() that copies the current value of a
 * counter when Prometheus scrapes. Other parts of the proxy add their own metrics the same way: a
 * Gauge or Counter with a collect(), registered on ProxyServer.metrics.
 */
import http from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { MIGRATION_PHASES, MigrationPhase, parseHostPort } from '../../config/schema';
import { LATENCY_BUCKETS_SECONDS, LatencyHistogram } from './latency-histogram';
import { ProxyStats } from './stats';
import { CommandInfo } from '../commands/table';
import { log } from './log';
import { FollowCounts, registerFollowMetrics } from './follow-metrics';

/** What the metrics read; all of it is cheap to read at scrape time. */
export interface MetricsSources {
  readonly stats: ProxyStats;
  backendConnections(): number;
  /** The command table in use (its entries carry the call counters). */
  commands(): Iterable<CommandInfo>;
  /** Ring mode: the migration phase, or null when no migration is configured. */
  migrationPhase(): MigrationPhase | null;
  /** Ring mode during a migration: the history copy's progress as saved on ring A's nodes, read at scrape time. */
  migrationCopy(): Promise<MigrationCopyProgress | null>;
  /** During a migration: what the change feeds of side A's nodes did (migration/change-copier.ts), else null. */
  migrationFeeds(): MigrationFeedCounts | null;
  /** Every routed node's PING at scrape time (proxy/server/backend-health.ts). */
  backendHealth(): Promise<BackendHealth>;
}

export interface MigrationFeedCounts {
  /** Nodes of side A with a change feed, and those whose changes are not all known to be on side B. */
  feeds: number;
  uncovered: number;
  /** Keys a feed named: copied to side B, already there (unchanged since a snapshot), failed (retried). */
  copied: number;
  unchanged: number;
  copyFailures: number;
  gaps: number;
  rewalks: number;
  /** Changes that met side B's fence (done) before their copy: not carried. */
  missedAfterFence: number;
  /** The replication carry: the nodes of side A this proxy follows as a replica. */
  follows?: FollowCounts[];
}

export interface MigrationCopyProgress {
  /** Keys `slotproxy migrate copy` has copied to ring B, over every node of ring A. */
  copied: number;
  /** Keys the copy has read on ring A (moving or not): its progress against the keys A holds. */
  scanned: number;
  /** Ring A nodes whose copy has finished, and all of them. */
  nodesDone: number;
  nodes: number;
  /** Under the replication carry: the history copy is each node's full sync (copied: keys restored, scanned: keys read). */
  carry?: 'replication';
  /** Keys the full syncs' snapshots hold (their RESIZEDB), null until every node's is known. */
  total?: number | null;
}

interface SnapshotValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
}

/**
 * A histogram whose buckets are a LatencyHistogram's, read at scrape time instead of observed here.
 * prom-client's Registry (and Histogram.get()) read a histogram through getForPromString(), so that
 * is the one method replaced; observe() is never called.
 */
class SnapshotHistogram extends Histogram<string> {
  constructor(
    private readonly source: LatencyHistogram,
    private readonly metricName: string,
    private readonly metricHelp: string,
    registry: Registry,
  ) {
    super({ name: metricName, help: metricHelp, buckets: [...LATENCY_BUCKETS_SECONDS], registers: [registry] });
  }

  async getForPromString(): Promise<{ name: string; help: string; type: string; aggregator: string; values: SnapshotValue[] }> {
    const cumulative = this.source.cumulative();
    const bounds: (number | string)[] = [...LATENCY_BUCKETS_SECONDS, '+Inf'];
    const value = (labels: Record<string, string | number>, v: number, suffix: string): SnapshotValue => ({
      labels,
      sharedLabels: {},
      value: v,
      metricName: `${this.metricName}${suffix}`,
    });
    const values = bounds.map((le, i) => value({ le }, cumulative[i], '_bucket'));
    values.push(value({}, this.source.sumMs / 1000, '_sum'), value({}, this.source.count, '_count'));
    return { name: this.metricName, help: this.metricHelp, type: 'histogram', aggregator: 'sum', values };
  }
}

/** The registry with every slotproxy metric; process metrics (CPU, memory, event-loop lag) included. */
export function createRegistry(sources: MetricsSources): Registry {
  const registry = new Registry();
  const { stats } = sources;
  collectDefaultMetrics({ register: registry, prefix: 'slotproxy_' });
  new Counter({
    name: 'slotproxy_commands_total',
    help: 'Commands received, by command name (subcommands as container|sub).',
    labelNames: ['command'],
    registers: [registry],
    collect() {
      this.reset();
      for (const info of sources.commands()) if (info.counters.calls > 0) this.inc({ command: info.name }, info.counters.calls);
    },
  });
  new SnapshotHistogram(stats.latency, 'slotproxy_command_duration_seconds', 'Time from receiving a command to its reply being ready, for commands sent to a node (retries and redirections included).', registry);
  new Counter({
    name: 'slotproxy_errors_total',
    help: 'Errors, by kind: protocol, crossslot, backend (connection lost/timeout), reply (error replies to forwarded commands), auth (wrong password), noauth, noperm (refused by the user\'s permissions), tls_handshake, maxclients.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ kind: 'protocol' }, stats.protocolErrors);
      this.inc({ kind: 'crossslot' }, stats.crossSlotErrors);
      this.inc({ kind: 'backend' }, stats.backendErrors);
      this.inc({ kind: 'reply' }, stats.replyErrors);
      this.inc({ kind: 'auth' }, stats.authFailures);
      this.inc({ kind: 'noauth' }, stats.noauthErrors);
      this.inc({ kind: 'noperm' }, stats.aclDenied.command + stats.aclDenied.key + stats.aclDenied.channel);
      this.inc({ kind: 'tls_handshake' }, stats.tlsHandshakeErrors);
      this.inc({ kind: 'maxclients' }, stats.rejectedConnections);
    },
  });
  new Counter({
    name: 'slotproxy_acl_denied_total',
    help: "Requests refused with NOPERM by the user's permissions, by what was refused: command, key, channel.",
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(stats.aclDenied)) this.inc({ reason }, n);
    },
  });
  new Counter({
    name: 'slotproxy_migration_target_refused_total',
    help: "During a migration: requests refused with CROSSSLOT only because the target's rules refuse them (keys on one node or slot of the source, not of the target), by command.",
    labelNames: ['command'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [command, n] of stats.targetRefusals) this.inc({ command }, n);
    },
  });
  new Counter({
    name: 'slotproxy_redirections_total',
    help: 'Cluster redirections followed, by type (moved, ask), and retries (tryagain, clusterdown, unreachable node).',
    labelNames: ['type'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ type: 'moved' }, stats.moved);
      this.inc({ type: 'ask' }, stats.ask);
      this.inc({ type: 'retry' }, stats.retries);
    },
  });
  new Gauge({
    name: 'slotproxy_backend_connections',
    help: 'Open shared connections to the Redis nodes.',
    registers: [registry],
    collect() {
      this.set(sources.backendConnections());
    },
  });
  new Gauge({
    name: 'slotproxy_backend_up',
    help: 'Each node the proxy routes to: 1 when it answered PING at scrape time, 0 when not.',
    labelNames: ['node'],
    registers: [registry],
    aggregator: 'min', // with --workers: 0 when any worker cannot reach the node
    async collect() {
      this.reset();
      for (const n of (await sources.backendHealth()).nodes) this.set({ node: n.addr }, n.up ? 1 : 0);
    },
  });
  new Gauge({
    name: 'slotproxy_migration_phase',
    help: 'The ring migration phase the proxy routes by: 1 for the current phase (none: no migration).',
    labelNames: ['phase'],
    registers: [registry],
    aggregator: 'max', // every worker routes by the same phase: with --workers, 1 and not N
    collect() {
      const current = sources.migrationPhase() ?? 'none';
      for (const phase of ['none', ...MIGRATION_PHASES]) this.set({ phase }, phase === current ? 1 : 0);
    },
  });
  // The copy runs as its own process (`slotproxy migrate copy`) and saves its progress on ring A's
  // nodes; the proxy reads it back when Prometheus scrapes, so a dashboard can follow the migration.
  let copyProgress: Promise<MigrationCopyProgress | null> | null = null;
  const readCopyProgress = (): Promise<MigrationCopyProgress | null> => (copyProgress ??= sources.migrationCopy().finally(() => (copyProgress = null)));
  new Gauge({
    name: 'slotproxy_migration_copied_keys',
    help: 'Ring migration: keys `slotproxy migrate copy` has copied to ring B so far (saved on ring A\'s nodes); 0 without a migration.',
    registers: [registry],
    aggregator: 'max',
    async collect() {
      this.set((await readCopyProgress())?.copied ?? 0);
    },
  });
  new Gauge({
    name: 'slotproxy_migration_copy_nodes',
    help: 'Ring migration: ring A nodes whose history copy is done, and all of them (state="done" / "total"); 0 without a migration.',
    labelNames: ['state'],
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const p = await readCopyProgress();
      this.set({ state: 'done' }, p?.nodesDone ?? 0);
      this.set({ state: 'total' }, p?.nodes ?? 0);
    },
  });
  new Gauge({
    name: 'slotproxy_migration_feeds',
    help: 'Migration: nodes of side A with a change feed (state="total"), and those with changes not all known to be on side B (state="uncovered": a switch to read-new or done waits for 0).',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const f = sources.migrationFeeds();
      this.set({ state: 'total' }, f?.feeds ?? 0);
      this.set({ state: 'uncovered' }, f?.uncovered ?? 0);
    },
  });
  new Counter({
    name: 'slotproxy_migration_feed_keys_total',
    help: 'Migration: keys a change feed named, by outcome: copied to side B, unchanged (a snapshot had carried them), failed (retried), missed_after_fence (changed on A after side B was fenced for done: not carried).',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      const f = sources.migrationFeeds();
      if (f === null) return;
      this.inc({ outcome: 'copied' }, f.copied);
      this.inc({ outcome: 'unchanged' }, f.unchanged);
      this.inc({ outcome: 'failed' }, f.copyFailures);
      this.inc({ outcome: 'missed_after_fence' }, f.missedAfterFence);
    },
  });
  registerFollowMetrics(registry, () => sources.migrationFeeds()?.follows ?? []);
  new Counter({
    name: 'slotproxy_migration_feed_gaps_total',
    help: 'Migration: times a node of side A may have had changes no feed saw (feed lost, flush, new master, failing copy), and re-walks that covered them (kind="gap" / "rewalk").',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      const f = sources.migrationFeeds();
      if (f === null) return;
      this.inc({ kind: 'gap' }, f.gaps);
      this.inc({ kind: 'rewalk' }, f.rewalks);
    },
  });
  new Gauge({
    name: 'slotproxy_connected_clients',
    help: 'Connected clients.',
    registers: [registry],
    collect() {
      this.set(stats.connectedClients);
    },
  });
  new Counter({
    name: 'slotproxy_connections_received_total',
    help: 'Client connections accepted.',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(stats.totalConnections);
    },
  });
  return registry;
}

/** What the endpoint serves: one process's registry, or the workers' metrics summed by the primary. */
export interface MetricsSource {
  metrics(): Promise<string>;
  readonly contentType: string;
}

/** One node's answer to the back-end health check (proxy/server/backend-health.ts). */
export interface NodeHealth {
  addr: string;
  up: boolean;
  /** Why the PING failed (null when up). */
  error: string | null;
}

export interface BackendHealth {
  nodes: NodeHealth[];
  /** Cluster mode: slots with no master in the slot map (0 in ring mode). */
  slotsWithoutMaster: number;
}

/** Healthy when every node answers and every slot has a master. */
export function allHealthy(health: BackendHealth): boolean {
  return health.slotsWithoutMaster === 0 && health.nodes.every((n) => n.up);
}

/**
 * Liveness and readiness for orchestrators, served beside /metrics: `readiness()` resolves null
 * when the proxy can serve (proxy/server/readiness.ts), else why not; `backends()` the nodes'
 * health (proxy/server/backend-health.ts), absent where there are no nodes (the --workers primary).
 */
export interface HealthSource {
  readiness(): Promise<string | null>;
  backends?(): Promise<BackendHealth>;
}

/** Serves what `route` names when it is its own (true), else leaves the response alone (false). */
export type ExtraRoute = (req: http.IncomingMessage, res: http.ServerResponse, route: string) => boolean;

/** How the listener is protected: who may read /metrics (null: anyone), and TLS (null: plain HTTP). */
export interface ListenerProtection {
  /** Resolves null when a request with this Authorization header may read /metrics, else the status and why not. */
  guard: ((authorization: string | undefined) => Promise<{ status: number; error: string } | null>) | null;
  tls: tls.TlsOptions | null;
}

const OPEN: ListenerProtection = { guard: null, tls: null };

/**
 * The HTTP endpoint: GET /metrics; GET /healthz (200 while the event loop answers); GET /readyz
 * (200 when ready, 503 with the reason otherwise); GET /health/backends (JSON, 200 when every node
 * answers, 503 otherwise); what `extra` serves (the console, proxy/console/);
 * anything else 404.
 */
export class MetricsServer {
  private constructor(private readonly server: http.Server | https.Server) {}

  static start(listen: string, registry: MetricsSource, health: HealthSource, extra: ExtraRoute | null = null, protection: ListenerProtection = OPEN): Promise<MetricsServer> {
    const handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
      const route = (req.url ?? '').split('?')[0];
      const text = (status: number, body: string): void => void res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
      if (req.method === 'GET' && route === '/healthz') return text(200, 'ok\n');
      if (req.method === 'GET' && route === '/readyz') {
        health.readiness().then(
          (problem) => text(problem === null ? 200 : 503, problem === null ? 'ready\n' : `not ready: ${problem}\n`),
          (err: Error) => text(503, `not ready: ${err.message}\n`),
        );
        return;
      }
      const backends = health.backends;
      if (req.method === 'GET' && route === '/health/backends' && backends !== undefined) {
        // It names the back-end nodes: guarded as /metrics is.
        const allowed = protection.guard === null ? Promise.resolve(null) : protection.guard(req.headers.authorization);
        void allowed.then((refused): Promise<BackendHealth | null> => (refused !== null ? (text(refused.status, `${refused.error}\n`), Promise.resolve(null)) : backends())).then(
          (h) => {
            if (h === null) return;
            const down = h.nodes.filter((n) => !n.up).map((n) => n.addr);
            const body = { healthy: allHealthy(h), down, slotsWithoutMaster: h.slotsWithoutMaster, nodes: h.nodes };
            res.writeHead(body.healthy ? 200 : 503, { 'content-type': 'application/json' }).end(`${JSON.stringify(body)}\n`);
          },
          (err: Error) => text(500, `back-end health failed: ${err.message}\n`),
        );
        return;
      }
      if (extra !== null && route !== '/metrics' && extra(req, res, route)) return;
      if (req.method !== 'GET' || route !== '/metrics') return text(404, `slotproxy: GET /metrics, /readyz, /healthz${backends === undefined ? '' : ', /health/backends'}${extra === null ? '' : ', or / for the console'}\n`);
      const allowed = protection.guard === null ? Promise.resolve(null) : protection.guard(req.headers.authorization);
      allowed
        .then(async (refused) => {
          if (refused !== null) {
            const challenge = refused.status === 401 ? { 'www-authenticate': 'Basic realm="slotproxy", charset="UTF-8"' } : {};
            return void res.writeHead(refused.status, { 'content-type': 'text/plain', ...challenge }).end(`${refused.error}\n`);
          }
          const body = await registry.metrics();
          res.writeHead(200, { 'content-type': registry.contentType }).end(body);
        })
        .catch((err: Error) => {
          log.error({ err: err.message }, 'metrics collection failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n');
        });
    };
    const server = protection.tls === null ? http.createServer(handle) : https.createServer(protection.tls, handle);
    const { host, port } = parseHostPort(listen);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        log.info({ metrics: server.address(), tls: protection.tls !== null, auth: protection.guard !== null }, 'metrics endpoint is listening');
        resolve(new MetricsServer(server));
      });
    });
  }

  /** SIGHUP: a new certificate for new connections (rotation); no-op over plain HTTP. */
  setSecureContext(options: tls.TlsOptions): void {
    if (this.server instanceof https.Server) this.server.setSecureContext(options);
  }

  get port(): number {
    const a = this.server.address();
    return typeof a === 'object' && a !== null ? a.port : 0;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
