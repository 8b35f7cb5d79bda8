/**
 * The proxy process's front door: loads what routing needs (topology, command table), then accepts
 * clients (up to maxClients), each served by a Session over shared back-end connections.
 *
 *   m client sessions --(Dispatcher, Router)--> n shared back-end connections (lanes per node)
 *
 * Shutdown (SIGTERM via cmd/): stop accepting, let sessions finish their in-flight replies, close.
 */
import cluster from 'node:cluster';
import net from 'node:net';
import tls from 'node:tls';
import { Config, LimitsConfig, parseHostPort } from '../../config/schema';
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { CommandTable } from '../commands/table';
import { ProxyContext, WorkerPhaseRelay } from '../context';
import { Dispatcher } from '../dispatch/dispatcher';
import { Session, SessionHost } from './session';
import { ClientList } from '../client/client-list';
import { ScriptStore } from '../scripts/store';
import { ScriptPreloader, readScriptFiles, startPreloading } from '../scripts/preloader';
import { ProxyStats } from '../telemetry/stats';
import { decodeReply, errorText } from '../resp/decode-reply';
import * as encode from '../resp/encode';
import { log, setLogLevel } from '../telemetry/log';

import { VERSION } from './version';
import { ClientAuth } from '../security/auth';
import { AclLog } from '../security/acl-log';
import { backendTls, clientTlsOptions } from '../security/tls';
import type { MetricsServer } from '../telemetry/metrics';
import type { ConsoleSource } from '../console/http';
import type { HttpScope, Refusal } from '../console/http-auth';
import type { ConsoleState } from '../console/state';
import type { ConsoleRecorder } from '../console/recorder';
import type { NutcrackerPoolSource } from '../telemetry/nutcracker-stats';
import { restartOnlyChanges } from './reload';
import { applyRingReload } from './ring-reload';
import { readinessProblem } from './readiness';
import { backendHealth } from './backend-health';
import { Ring } from '../../sharding/ring';
import { readCopyProgress } from '../migration/copy-progress';
import { FleetRegistration, newFleetId } from '../migration/registration';
import { carryToTarget } from '../migration/carry';
import { ChangeCopier } from '../migration/change-copier';
import { proxyInfoSection } from './info-section';
import { coverStartGap } from '../migration/start-gap';
import { raiseFleetReadBarrier, switchPhaseHere } from '../migration/admin';
import { ClientCaching } from '../tracking/client-caching';
import { readNodes, watchPlacement } from './caching-watch';
import { clusterRouting, ringRouting } from './routing';

const MAX_CLIENTS_REACHED = encode.error('ERR max number of clients reached');

export class ProxyServer {
  /** Every client, for CLIENT LIST/KILL (ctx.clients) and the shutdown drain. */
  private readonly sessions: ClientList<Session>;
  private readonly listener: net.Server | tls.Server;
  private readonly dispatcher: Dispatcher;
  /** The live limits: a reload (SIGHUP) updates this object in place, and sessions and decoders read it. */
  private readonly limits: LimitsConfig;
  /** What every session shares (server/session.ts), made once. */
  private readonly sessionHost: SessionHost;
  private readonly reloadListeners: ((next: Config) => void)[] = [];
  private metricsServer: MetricsServer | null = null;
  /** In a worker with `metrics`: what the primary asks (cmd/worker-console.ts), as it serves the listener. */
  workerHttp: WorkerHttp | null = null;
  /** The console's samples and events (proxy/console/), while it is served. */
  private consoleRecorder: ConsoleRecorder | null = null;
  private file: string | null = null;
  /** Puts the config's scripts on every master, now and whenever one lacks them. */
  private preloader: ScriptPreloader | null = null;
  private registration: FleetRegistration | null = null;
  /** The reloaded config that finished a migration (its mode and cluster applied live, server/finish-reload.ts). */
  private finishedBy: Config | null = null;
  /**
   * `log.level` as the config file last said it. A reload sets the level only when the file changed
   * it, so a level stepped by SIGTTIN/SIGTTOU outlives a SIGHUP (which logrotate may send).
   */
  private fileLogLevel: string | null = null;
  /** The `auth` section of the file last applied: a reload that leaves it as it was keeps CONFIG SET requirepass's changes. */
  private fileAuth: string;

  private constructor(readonly config: Config, private readonly ctx: ProxyContext, sessions: ClientList<Session>) {
    this.sessions = sessions;
    this.fileAuth = JSON.stringify(config.auth ?? null);
    this.dispatcher = new Dispatcher(ctx, {
      proxySection: () => proxyInfoSection(this.ctx, this.config),
      maxClients: () => this.limits.maxClients,
      blockedClients: () => {
        let n = 0;
        for (const s of this.sessions) if (s.blocked !== null) n++;
        return n;
      },
      pubsubClients: () => {
        let n = 0;
        for (const s of this.sessions) if (s.subscribed) n++;
        return n;
      },
    });
    this.limits = { ...config.limits };
    const stats = ctx.stats;
    this.sessionHost = {
      dispatcher: this.dispatcher,
      caching: ctx.caching,
      stats,
      limits: this.limits,
      sessionClosed: (s) => {
        stats.connectedClients--;
        this.sessions.delete(s);
      },
    };
    this.listener =
      config.tls === undefined
        ? net.createServer({ noDelay: true, pauseOnConnect: true }, (socket) => this.accept(socket))
        : tls.createServer({ ...clientTlsOptions(config.tls), noDelay: true }, (socket) => this.accept(socket));
    // A failed handshake never becomes a session; count it, do not crash or log a stack per attempt.
    this.listener.on('tlsClientError', () => ctx.stats.tlsHandshakeErrors++);
  }

  /** Starts a proxy: resolves once it is listening and has loaded its topology and command table. */
  static async start(config: Config): Promise<ProxyServer> {
    setLogLevel(config.log.level);
    const pool = new BackendPool({
      connectionsPerNode: config.backend.connectionsPerNode,
      maxConnectsPerSecond: config.backend.maxConnectsPerSecond,
      connectTimeoutMs: config.backend.connectTimeoutMs,
      commandTimeoutMs: config.backend.commandTimeoutMs,
      timeoutBehindScripts: config.backend.timeoutBehindScripts,
      handshake: backendHandshake(config),
      tls: backendTls(config.backend.tls),
    });
    const routing = config.mode === 'ring' ? await ringRouting(config, pool) : await clusterRouting(config, pool);
    const clients = new ClientList<Session>();
    const caching = new ClientCaching(pool, {
      maxKeys: config.limits.trackingTableMaxKeys,
      nodes: () => readNodes(routing.parts),
      client: (id) => clients.get(id),
      readyTimeoutMs: config.backend.connectTimeoutMs,
      backend: () => ({ name: ctx.backendServer.name, version: ctx.backendVersion }),
    });
    const ctx: ProxyContext = {
      mode: config.mode,
      pool,
      ...routing.parts,
      table: CommandTable.fallback(),
      stats: new ProxyStats(),
      crossSlot: config.crossSlot,
      backendVersion: '7.0.0',
      backendServer: { name: 'redis', version: '7.0.0' },
      auth: new ClientAuth({ users: [] }), // no one signs in before the real one, below, once the command table the users' rules name commands from is loaded
      scripts: new ScriptStore(config.limits.scriptStoreBytes),
      clients,
      caching,
      changes: null,
      aclLog: new AclLog(),
    };
    await routing.start();
    watchPlacement(ctx);
    /** This proxy's fleet id, known once it registers (below). */
    const fleetId = { id: '' };
    /** It takes nodes' copiers under the id it registers under (migration/copier-lease.ts). */
    const leaseId = newFleetId();
    if (ctx.ring !== null) {
      ctx.ring.carry.spool = config.migration?.spool ?? null;
      // A migration's change feeds are up before the proxy serves it.
      const changes = new ChangeCopier(ctx, ctx.ring, () => fleetId.id, leaseId);
      ctx.changes = changes;
      await changes.ready(config.backend.connectTimeoutMs);
      await coverStartGap(ctx, changes);
      // Started reading from side B: the fleet's read barrier first (migration/read-barrier.ts).
      if (ctx.ring.placement.phase === 'read-new') await raiseStartBarrier(ctx);
    }
    await loadBackendFacts(ctx);
    try {
      ctx.auth = ClientAuth.fromConfig(config.auth, ctx.table, config.mode);
    } catch (err) {
      // A rule naming a command the back end does not have: nothing serves yet, stop what started.
      ctx.topology?.stop();
      ctx.clusters?.stop();
      ctx.replicaReads?.stop();
      ctx.sentinel?.stop();
      caching.stop();
      ctx.changes?.stop();
      pool.closeAll();
      throw err;
    }
    const server = new ProxyServer(config, ctx, clients);
    const preloader = await startPreloading(ctx, config.scripts);
    ctx.topology?.onChange(() => preloader.checkAll());
    server.preloader = preloader;
    // A migration: side B gets A's function libraries and the known scripts before clients come.
    await carryToTarget(ctx);
    await server.listen();
    if (ctx.ring !== null) {
      // Ring mode: other proxies of the ring and the `migrate` commands can see this one.
      server.registration = new FleetRegistration(ctx.pool, ctx.ring, server.address, VERSION, ctx.stats.targetRefusals, () => ctx.changes?.summary() ?? '-', () => ctx.changes?.held() ?? [], leaseId, () => server.configFile);
      server.registration.start();
      fleetId.id = server.registration.id;
      // The nodes it copies are named in its registration as soon as that changes (migration/copier-lease.ts).
      const registration = server.registration;
      if (ctx.changes instanceof ChangeCopier) ctx.changes.onHeldChange = () => registration.beat();
    }
    return server;
  }

  /** The file this proxy was started from, absolute (cmd/serve.ts sets it): shown by the console, named in its fleet record. */
  get configFile(): string | null {
    return this.file;
  }

  set configFile(file: string | null) {
    this.file = file;
    this.registration?.beat();
  }

  /**
   * Under --workers (cmd/worker-phase.ts): `PROXY MIGRATION PHASE` through this worker goes to every
   * worker by `relay`; what is returned runs a relayed switch here alone (null once switched, else why not).
   */
  relayPhaseSwitches(relay: WorkerPhaseRelay): { switchHere: (phase: string) => Promise<string | null>; fleetId: () => string } {
    this.ctx.switchWorkers = relay;
    return { switchHere: (phase) => switchPhaseHere(this.ctx, phase), fleetId: () => this.registration?.id ?? '' };
  }

  /** The address clients connect to (the real port when the config asked for port 0). */
  get address(): { host: string; port: number } {
    const a = this.listener.address() as net.AddressInfo;
    return { host: a.address, port: a.port };
  }

  /**
   * Applies a reloaded config's ring and migration settings (SIGHUP). Throws, changing nothing,
   * when the new config cannot be applied without a restart.
   */
  reloadRing(next: Config): void {
    if (applyRingReload(this.ctx, this.config, next)) this.finishedBy = next;
  }

  get stats(): ProxyStats {
    return this.ctx.stats;
  }

  /**
   * This proxy as a nutcracker pool in the stats JSON (telemetry/nutcracker-stats.ts), read now:
   * its servers are the ring's nodes, keyed as nutcracker keys them (the name, else host:port), each
   * at its address now (a Sentinel-managed one's moves with its master).
   */
  nutcrackerPool(): NutcrackerPoolSource {
    const s = this.ctx.stats;
    const live = this.ctx.ring?.placement.from;
    const addrOf = (i: number, configured: string | undefined): string => (live instanceof Ring ? live.nodes[i]?.addr : undefined) ?? configured ?? '';
    // A cluster's servers are its masters as the slot map has them, keyed host:port.
    const nodes = this.config.mode === 'ring'
      ? this.config.ring.nodes.map((n, i) => ({ key: n.name ?? n.addr ?? '', addr: addrOf(i, n.addr) }))
      : (this.ctx.topology?.masterAddresses() ?? []).map((addr) => ({ key: addr, addr }));
    const servers = nodes.map(({ key, addr }) => ({ key, ...this.ctx.pool.nodeStats(addr) }));
    return {
      clientEof: s.clientEof,
      clientErr: s.clientErr,
      clientConnections: s.connectedClients,
      totalClients: s.totalConnections,
      forwardErrors: s.backendErrors,
      backendConnectsStarted: this.ctx.pool.connectsStarted,
      servers,
    };
  }

  /** The /metrics endpoint's port, or null without `metrics.listen`. */
  get metricsPort(): number | null {
    return this.metricsServer?.port ?? null;
  }

  /** Called with the new config on every accepted reload (scripts, migration phase ... hook in here). */
  onReload(listener: (next: Config) => void): void {
    this.reloadListeners.push(listener);
  }

  /**
   * SIGHUP, step one: checks what `next` changes and reads the files it names; throws, changing
   * nothing, when something cannot be applied. Returns step two, which applies it and cannot fail:
   * limits (connected clients too, except idleClientTimeoutMs, which applies to new clients), log
   * level (when the file changed it), client users and passwords (for the next AUTH; signed-in clients stay signed in), the
   * client TLS certificate (for new connections) and the back-end username and password (for
   * back-end connections opened from then on). Other changes are reported as needing a restart.
   */
  prepareReload(next: Config): () => void {
    const tlsOn = this.config.tls !== undefined;
    if ((next.tls !== undefined) !== tlsOn) throw new Error('tls: turning TLS on or off needs a restart');
    // Read and parse the certificate now, so that a bad one refuses the reload before anything changes.
    const tlsOptions = next.tls === undefined ? null : clientTlsOptions(next.tls);
    if (tlsOptions !== null) tls.createSecureContext(tlsOptions);
    // The /metrics listener's certificate is re-read too (its other settings need a restart).
    const metricsTls = next.metrics?.tls === undefined || this.config.metrics?.tls === undefined ? null : clientTlsOptions(next.metrics.tls);
    if (metricsTls !== null) tls.createSecureContext(metricsTls);
    // The file's users replace the running ones only when its `auth` section changed, so that an
    // unrelated reload does not undo a password set with CONFIG SET requirepass (docs/security.md).
    const nextAuth = JSON.stringify(next.auth ?? null);
    const auth = nextAuth === this.fileAuth && next.mode === this.ctx.mode ? null : ClientAuth.fromConfig(next.auth, this.ctx.table, next.mode);
    const handshake = backendHandshake(next);
    // Read the script files now too: one that is missing refuses the reload. (Always reloaded: the
    // files may have changed under the same names, and loading what a master has is a no-op.)
    const scripts = readScriptFiles(next.scripts);
    return () => {
      // A finished migration's new back end (mode, cluster seeds) is applied by the ring reload.
      const needRestart = restartOnlyChanges(this.config, next).filter((f) => this.finishedBy !== next || (f !== 'mode' && f !== 'cluster'));
      Object.assign(this.limits, next.limits);
      if (next.log.level !== (this.fileLogLevel ?? this.config.log.level)) setLogLevel(next.log.level);
      this.fileLogLevel = next.log.level;
      if (auth !== null) {
        this.ctx.auth = auth;
        this.fileAuth = nextAuth;
        // As ACL SETUSER on Redis: signed-in clients get their user's new permissions at once.
        for (const s of this.sessions) s.refreshPermissions();
      }
      this.ctx.pool.setHandshake(handshake);
      void this.preloader?.reload(scripts);
      if (tlsOptions !== null) (this.listener as tls.Server).setSecureContext(tlsOptions);
      if (metricsTls !== null) this.metricsServer?.setSecureContext(metricsTls);
      // Into a cluster: nothing of side A is routed to any more, so this proxy leaves A's fleet.
      if (this.finishedBy === next && next.mode === 'cluster' && this.config.mode === 'ring') {
        this.registration?.stop();
        this.registration = null;
      }
      for (const l of this.reloadListeners) l(next);
      if (needRestart.length > 0) log.warn({ fields: needRestart }, 'these changes need a restart and were not applied');
    };
  }

  /** Stops accepting, waits (up to `graceMs`) for in-flight replies, then closes everything. */
  async close(graceMs = 5000): Promise<void> {
    const closed = new Promise<void>((resolve) => this.listener.close(() => resolve()));
    const deadline = Date.now() + graceMs;
    this.registration?.stop();
    for (const s of this.sessions) s.drainThenClose();
    while (this.sessions.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const s of this.sessions) s.destroy();
    await this.metricsServer?.close();
    this.consoleRecorder?.stop();
    this.ctx.topology?.stop();
    this.ctx.clusters?.stop();
    this.ctx.replicaReads?.stop();
    this.ctx.sentinel?.stop();
    this.ctx.caching.stop();
    // What its copiers heard is copied before it goes (migration/copier-lease.ts: another proxy takes them over).
    await this.ctx.changes?.release(Math.min(1000, Math.max(0, deadline - Date.now())) || 200);
    this.ctx.changes?.stop();
    this.preloader?.stop();
    this.ctx.pool.closeAll();
    await closed;
  }

  private listen(): Promise<void> {
    const { host, port } = parseHostPort(this.config.listen);
    return new Promise<void>((resolve, reject) => {
      this.listener.once('error', reject);
      this.listener.listen(port, host, () => {
        this.listener.off('error', reject);
        log.info({ listen: this.address, mode: this.config.mode, tls: this.config.tls !== undefined }, 'slotproxy is listening');
        resolve();
      });
    }).then(async () => {
      if (this.config.metrics === undefined) return;
      // Loaded only with a `metrics` section: prom-client costs a proxy without one ~4 MiB of RSS.
      const metrics = require('../telemetry/metrics') as typeof import('../telemetry/metrics');
      const ctx = this.ctx;
      const registry = metrics.createRegistry({
        stats: ctx.stats,
        backendConnections: () => ctx.pool.openConnections,
        commands: () => ctx.table.all(),
        migrationPhase: () => ctx.ring?.placement.phase ?? null,
        migrationCopy: () => readCopyProgress(ctx),
        migrationFeeds: () => ctx.changes?.counts() ?? null,
        backendHealth: () => backendHealth(ctx),
      });
      const metricsConfig = this.config.metrics;
      const { httpRefusal } = require('../console/http-auth') as typeof import('../console/http-auth');
      const guard = (scope: HttpScope, authorization: string | undefined): Refusal | null => httpRefusal(ctx, metricsConfig.auth, scope, authorization);
      const consoleSource = this.startConsole();
      // A worker's metrics (and console) are served, summed with its siblings', by the primary
      // (cmd/workers.ts), which asks a worker whether a request may read them.
      if (cluster.isWorker) {
        (require('../telemetry/worker-metrics') as typeof import('../telemetry/worker-metrics')).shareWithPrimary(registry);
        this.workerHttp = { refusal: guard, consoleState: consoleSource === null ? null : () => consoleSource.state() };
        return;
      }
      const { consoleRoute } = require('../console/http') as typeof import('../console/http');
      this.metricsServer = await metrics.MetricsServer.start(metricsConfig.listen, registry, { readiness: () => readinessProblem(ctx), backends: () => backendHealth(ctx) }, consoleSource === null ? null : consoleRoute(consoleSource), {
        guard: metricsConfig.auth === undefined ? null : (authorization) => Promise.resolve(guard('metrics', authorization)),
        tls: metricsConfig.tls === undefined ? null : clientTlsOptions(metricsConfig.tls),
      });
    });
  }

  /** The console's source (proxy/console/), its recorder sampling from now on; null when `metrics.console` is false. */
  private startConsole(): ConsoleSource | null {
    const config = this.config;
    if (config.metrics?.console === false) return null;
    const { ConsoleRecorder } = require('../console/recorder') as typeof import('../console/recorder');
    const { localConsole } = require('../console/http') as typeof import('../console/http');
    const recorder = new ConsoleRecorder(this.ctx, config.mode === 'ring' ? config.ring.nodes.map((n) => n.master) : []);
    recorder.start();
    this.consoleRecorder = recorder;
    this.onReload(() => recorder.reloaded());
    return localConsole({ ctx: this.ctx, config, recorder, version: VERSION, address: () => this.address, configFile: () => this.configFile }, () => config.metrics?.auth);
  }

  private accept(socket: net.Socket): void {
    const stats = this.ctx.stats;
    if (this.sessions.size >= this.limits.maxClients) {
      stats.rejectedConnections++;
      socket.on('error', () => undefined);
      socket.resume(); // a plain socket is accepted paused: read, so the client's FIN closes it
      socket.end(MAX_CLIENTS_REACHED);
      return;
    }
    stats.totalConnections++;
    stats.connectedClients++;
    this.sessions.add(new Session(socket, this.sessionHost));
  }
}

/** A worker's side of the HTTP listener the primary serves. */
export interface WorkerHttp {
  refusal(scope: HttpScope, authorization: string | undefined): Refusal | null;
  /** Null when `metrics.console` is false. */
  consoleState: (() => Promise<ConsoleState>) | null;
}

function backendHandshake(config: Config): Buffer[] {
  const { username, password } = config.backend;
  const out: Buffer[] = [];
  if (password !== undefined) out.push(encode.command(username === undefined ? ['AUTH', password] : ['AUTH', username, password]));
  // A replica serves reads of its master's slots only on a READONLY connection; masters ignore it.
  if (config.mode === 'cluster' && config.cluster.readFrom !== 'master') out.push(encode.command(['READONLY']));
  return out;
}

/**
 * The node's `busy-reply-threshold` (`lua-time-limit` before Redis 7.0): how long a script runs
 * before the node answers other clients -BUSY, which is when the pool stops sending on a lane stuck
 * behind it (backend/pool.ts). The default stays when CONFIG is not allowed.
 */
async function learnBusyThreshold(ctx: ProxyContext, address: string): Promise<void> {
  try {
    for (const name of ['busy-reply-threshold', 'lua-time-limit']) {
      const reply = decodeReply(await request(ctx.pool.connection(address, 0), ['CONFIG', 'GET', name], 10_000), true);
      if (Array.isArray(reply) && reply.length === 2) return ctx.pool.setBusyAfter(Number(String(reply[1])));
    }
  } catch {
    // Keep the default.
  }
}

/** The command table and version of the back end; the recorded table stays if no master answers. */
async function loadBackendFacts(ctx: ProxyContext): Promise<void> {
  for (const address of ctx.router.masters()) {
    try {
      const conn = ctx.pool.connection(address, 0);
      const table = await request(conn, ['COMMAND'], 10_000);
      if (errorText(table) !== null) throw new Error(errorText(table) ?? '');
      ctx.table = CommandTable.fromCommandReply(decodeReply(table));
      const info = decodeReply(await request(conn, ['INFO', 'server'], 10_000));
      const text = Buffer.isBuffer(info) ? info.toString() : String(info);
      const field = (name: string): string | undefined => new RegExp(`(?:^|\r\n)${name}:([^\r\n]+)`).exec(text)?.[1];
      ctx.backendVersion = field('redis_version') ?? ctx.backendVersion;
      const name = field('server_name') ?? 'redis';
      ctx.backendServer = { name, version: field(`${name}_version`) ?? ctx.backendVersion };
      await learnBusyThreshold(ctx, address);
      log.info({ node: address, commands: ctx.table.size, redisVersion: ctx.backendVersion }, 'command table loaded from the back end');
      return;
    } catch (err) {
      log.warn({ node: address, err: (err as Error).message }, 'cannot load COMMAND from this master');
    }
  }
  log.warn('no master answered COMMAND; using the table recorded from Redis 7.0');
}

/**
 * A proxy started in read-new: before it serves reads from B, no proxy of the fleet answers a write
 * before B holds it. When that cannot be confirmed, it stops what it started and does not serve.
 */
async function raiseStartBarrier(ctx: ProxyContext): Promise<void> {
  const placement = ctx.ring?.placement;
  if (placement === undefined) return;
  try {
    await raiseFleetReadBarrier(ctx, placement);
  } catch (err) {
    ctx.caching.stop();
    ctx.changes?.stop();
    ctx.topology?.stop();
    ctx.clusters?.stop();
    ctx.replicaReads?.stop();
    ctx.sentinel?.stop();
    ctx.pool.closeAll();
    throw new Error(`migration.phase read-new: ${err instanceof Error ? err.message : String(err)}`);
  }
}
