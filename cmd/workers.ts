/**
 * `--workers N`: N proxy processes (Node cluster workers) sharing the listening port, for machines
 * with cores to spare. Each worker is a whole proxy with its own back-end connections, so a node
 * sees N x backend.connectionsPerNode connections. The primary only supervises: it forwards
 * SIGTERM/SIGINT (drain and exit), SIGHUP (reload), SIGTTIN/SIGTTOU (log level) and SIGUSR1 (log
 * reopen), acting on the last three and SIGHUP's reopen itself too, and replaces a worker that dies.
 */
import cluster, { Worker } from 'node:cluster';
import { log, reopenLogFile } from '../proxy/telemetry/log';
import { handleNutcrackerSignals } from './signals';

const RESTART_DELAY_MS = 1000;

/** `metricsListen`: the primary serves /metrics there, summing every worker's metrics. */
export function superviseWorkers(count: number, metricsListen?: string): void {
  let stopping = false;
  /** Workers serving clients: a worker listens only once its topology and command table are loaded. */
  const listening = new Set<number>();
  cluster.on('listening', (worker) => listening.add(worker.id));
  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on('exit', () => listening.delete(worker.id));
    worker.on('exit', (code, signal) => {
      if (stopping) {
        if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
        return;
      }
      log.error({ pid: worker.process.pid, code, signal }, 'a worker died; starting a new one');
      setTimeout(fork, RESTART_DELAY_MS);
    });
    return worker;
  };
  for (let i = 0; i < count; i++) fork();
  const forward = (signal: NodeJS.Signals): void => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill(signal);
  };
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: count }, 'stopping the workers');
    forward('SIGTERM');
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    reopenLogFile('SIGHUP');
    forward('SIGHUP');
  });
  handleNutcrackerSignals(forward);
  log.info({ workers: count }, 'started worker processes');
  if (metricsListen !== undefined) {
    // Loaded only when asked for, as in proxy/server/server.ts.
    const { MetricsServer, workersMetrics } = require('../proxy/telemetry/metrics') as typeof import('../proxy/telemetry/metrics');
    // Ready when every worker serves; each worker's own /readyz conditions are met before it listens.
    const readiness = (): Promise<string | null> => Promise.resolve(listening.size >= count ? null : `${listening.size} of ${count} workers are serving`);
    MetricsServer.start(metricsListen, workersMetrics(), { readiness }).catch((err: Error) => {
      log.fatal({ err: err.message, metrics: metricsListen }, 'cannot listen for /metrics');
      stop('SIGTERM');
    });
  }
}

export function isWorkerProcess(): boolean {
  return !cluster.isPrimary;
}
