/**
 * `--workers N`: N proxy processes (Node cluster workers) sharing the listening port, for machines
 * with cores to spare. Each worker is a whole proxy with its own back-end connections, so a node
 * sees N x backend.connectionsPerNode connections. The primary only supervises: it forwards
 * SIGTERM/SIGINT (drain and exit), SIGHUP (reload), SIGTTIN/SIGTTOU (log level) and SIGUSR1 (log
 * reopen), acting on the last three and SIGHUP's reopen itself too, and replaces a worker that dies.
 * With `metrics` the primary serves /metrics and the console for the whole process group.
 * With `stats` (nutcracker's stats port) the primary serves it, from every worker's counts summed
 * (cmd/worker-stats.ts), once every worker serves. A migration phase switched over RESP through
 * one worker is relayed to every serving worker (cmd/worker-phase.ts).
 */
import cluster, { Worker } from 'node:cluster';
import { ClientTlsConfig, MetricsConfig, parseHostPort } from '../config/schema';
import { clientTlsOptions } from '../proxy/security/tls';
import { VERSION } from '../proxy/server/version';
import { log } from '../proxy/telemetry/log';
import { NutcrackerStatsServer } from '../proxy/telemetry/nutcracker-stats';
import { handleNutcrackerSignals, reopenLogOnSignal, signalReceived } from './signals';
import { gatherWorkerStats } from './worker-stats';
import { relayPhaseSwitch } from './worker-phase';

const RESTART_DELAY_MS = 1000;
/** What a worker sends the primary once all its pools (and its stats answers) are set up. */
const SERVING = 'slotproxy:worker-serving';

/** In a worker, once it serves: tells the primary. */
export function tellPrimaryServing(): void {
  process.send?.({ type: SERVING });
}

/**
 * `metrics`: the primary serves /metrics at its `listen`, summing every worker's metrics, and the
 * console, merging every worker's state (cmd/worker-console.ts), each worker checking the
 * credentials `metrics.auth` asks for; with `metrics.tls`, over HTTPS. `stats`:
 * nutcracker's stats port, served by the primary. Resolves once every worker has served (and the
 * stats port listens).
 */
export async function superviseWorkers(count: number, metrics?: MetricsConfig, stats?: { listen: string; intervalMs: number }): Promise<void> {
  let stopping = false;
  /** Workers serving clients: a worker listens only once its topology and command table are loaded. */
  const listening = new Set<number>();
  cluster.on('listening', (worker) => listening.add(worker.id));
  /** Workers that said they serve, every pool of the file. */
  const serving = new Set<number>();
  let allServing: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (allServing = resolve));
  const servingWorkers = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && serving.has(w.id) && w.isConnected());
  /**
   * Workers forked and not exited. Not cluster.workers: Node removes a worker from it only once it
   * has both exited and disconnected, in either order, so the first of the last worker's two events
   * still finds it there.
   */
  const alive = new Set<Worker>();
  const fork = (): Worker => {
    const worker = cluster.fork();
    alive.add(worker);
    // A message sent to a worker that has just died (its disconnect not yet seen) fails with
    // EPIPE, as an 'error' event: unheard, it would end the primary. The worker's 'exit' follows.
    worker.on('error', (err: Error) => log.debug({ pid: worker.process.pid, err: err.message }, 'a message to a worker failed'));
    worker.on('message', (m: { type?: unknown } | null) => relayPhaseSwitch(worker, m, servingWorkers));
    worker.on('message', (m: { type?: unknown } | null) => {
      if (m?.type !== SERVING) return;
      serving.add(worker.id);
      if (serving.size >= count) allServing();
    });
    worker.on('exit', () => listening.delete(worker.id));
    worker.on('exit', () => serving.delete(worker.id));
    worker.on('exit', (code, signal) => {
      alive.delete(worker);
      if (stopping) {
        if (alive.size === 0) process.exit(0);
        return;
      }
      log.error({ pid: worker.process.pid, code, signal }, 'a worker died; starting a new one');
      // Not once stopping: a worker forked then would never be told to stop.
      setTimeout(() => {
        if (!stopping) fork();
      }, RESTART_DELAY_MS);
    });
    return worker;
  };
  for (let i = 0; i < count; i++) fork();
  const forward = (signal: NodeJS.Signals): void => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
  };
  /** `received`: a signal sent to the primary, said in nutcracker's words; otherwise the primary's own decision. */
  const stop = (signal: NodeJS.Signals, received = false): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: count }, received ? signalReceived(signal, 'stopping the workers') : 'stopping the workers');
    // Every worker dead already (one waiting to be replaced): nothing to wait for.
    if (alive.size === 0) process.exit(0);
    forward('SIGTERM');
  };
  process.on('SIGTERM', () => stop('SIGTERM', true));
  process.on('SIGINT', () => stop('SIGINT', true));
  process.on('SIGHUP', () => {
    reopenLogOnSignal('SIGHUP', 'passing it on to the workers');
    forward('SIGHUP');
  });
  handleNutcrackerSignals(forward);
  log.info({ workers: count }, 'started worker processes');
  if (metrics !== undefined) {
    // Loaded only when asked for, as in proxy/server/server.ts.
    const { MetricsServer } = require('../proxy/telemetry/metrics') as typeof import('../proxy/telemetry/metrics');
    const { workersMetrics } = require('../proxy/telemetry/worker-metrics') as typeof import('../proxy/telemetry/worker-metrics');
    const { consoleRoute } = require('../proxy/console/http') as typeof import('../proxy/console/http');
    const { workersConsole, workersRefusal } = require('./worker-console') as typeof import('./worker-console');
    // Ready when every worker serves; each worker's own /readyz conditions are met before it listens.
    const readiness = (): Promise<string | null> => Promise.resolve(listening.size >= count ? null : `${listening.size} of ${count} workers are serving`);
    const { tls } = metrics;
    const protection = {
      guard: metrics.auth === undefined ? null : (authorization: string | undefined) => workersRefusal('metrics', authorization),
      tls: tls === undefined ? null : clientTlsOptions(tls),
    };
    MetricsServer.start(metrics.listen, workersMetrics(), { readiness }, metrics.console ? consoleRoute(workersConsole()) : null, protection).then(
      (server) => {
        // The workers re-read their files on SIGHUP; the primary re-reads the listener's certificate.
        if (tls !== undefined) process.on('SIGHUP', () => reloadCertificate(server, tls));
      },
      (err: Error) => {
        log.fatal({ err: err.message, metrics: metrics.listen }, 'cannot listen for /metrics');
        stop('SIGTERM');
      },
    );
  }
  await ready;
  if (stats !== undefined && !stopping) {
    try {
      const server = await NutcrackerStatsServer.start({ listen: stats.listen, intervalMs: stats.intervalMs, version: VERSION }, gatherWorkerStats);
      process.stdout.write(`nutcracker stats at ${parseHostPort(stats.listen).host}:${server.port}\n`);
    } catch (err) {
      log.fatal({ err: err instanceof Error ? err.message : String(err), stats: stats.listen }, 'cannot listen for the nutcracker stats');
      stop('SIGTERM');
      throw err;
    }
  }
}

function reloadCertificate(server: { setSecureContext(options: object): void }, tls: ClientTlsConfig): void {
  try {
    server.setSecureContext(clientTlsOptions(tls));
  } catch (err) {
    log.error({ err: err instanceof Error ? err.message : String(err) }, 'the /metrics certificate cannot be read; the old one stays');
  }
}

export function isWorkerProcess(): boolean {
  return !cluster.isPrimary;
}
