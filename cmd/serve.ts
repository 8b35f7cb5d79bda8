/**
 * `slotproxy start -c FILE` (and `slotproxy nutcracker`): the file's proxies started and its signals
 * wired. A slotproxy config is one proxy; a nutcracker.yml is one proxy per pool, each on its own
 * `listen`, all in this process (config/served-file.ts).
 * - SIGTERM/SIGINT: every proxy drains, then exit 0.
 * - SIGHUP: reopen the log file, re-read the file and apply to each proxy what it can change live;
 *   a pool the file adds or removes is refused with a log line (a restart serves it), and a pool
 *   whose change cannot be applied keeps its running configuration, the other pools reloading.
 * - the others as nutcracker (cmd/signals.ts); the log level is process-wide.
 */
import path from 'node:path';
import { ConfigError, ConfigOverrides } from '../config/load';
import { Config, parseHostPort } from '../config/schema';
import { ServedConfig, loadServedFile } from '../config/served-file';
import { ProxyServer } from '../proxy/server/server';
import { VERSION } from '../proxy/server/version';
import { log, logTo, setLogLevel } from '../proxy/telemetry/log';
import { NutcrackerStatsServer } from '../proxy/telemetry/nutcracker-stats';
import { fail } from './fail';
import { handleNutcrackerSignals, logSignal, reopenLogOnSignal, signalReceived } from './signals';
import { settleHeapWhenIdle } from './settle-heap';
import { answerStatsRequests } from './worker-stats';
import { isWorkerProcess, superviseWorkers, tellPrimaryServing } from './workers';
import { answerHttpRequests } from './worker-console';
import { relayPhaseSwitches } from './worker-phase';

/** What SIGHUP does besides the log file, in its log line. */
const RELOADING = 'reloading the configuration';

interface Running {
  pool: string | null;
  server: ProxyServer;
}

/** Loads `file`, then serves it (or, with `workers` > 1, supervises worker processes that do). */
export async function startFromFile(file: string, overrides: ConfigOverrides): Promise<void> {
  const served = loadServedFile(file, overrides);
  const first = served[0].config;
  if (first.workers > 1 && !isWorkerProcess()) {
    setLogLevel(first.log.level);
    openLogFile(first.log.file);
    logWarnings(served, file);
    await superviseWorkers(first.workers, first.metrics, first.stats);
    return;
  }
  await serve(served, file, overrides);
}

/** What the file leaves to a default that may be a trap (config/warnings.ts), once per process tree. */
function logWarnings(served: ServedConfig[], file: string): void {
  for (const { warnings } of served) for (const w of warnings) log.warn({ file }, w);
}

async function serve(served: ServedConfig[], file: string, overrides: ConfigOverrides): Promise<void> {
  // Level and log file are process-wide, and the same in every pool (from the flags).
  setLogLevel(served[0].config.log.level);
  openLogFile(served[0].config.log.file);
  // Before the start, which may wait for the back end: SIGTTIN would stop the process, SIGUSR2 end it.
  handleNutcrackerSignals();
  if (!isWorkerProcess()) logWarnings(served, file); // a worker's would repeat the primary's
  const running: Running[] = [];
  let statsServer: NutcrackerStatsServer | null = null;
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, signalReceived(signal, 'shutting down: draining in-flight replies'));
    Promise.all([...running.map((r) => r.server.close()), statsServer?.close()]).then(() => process.exit(0), fail);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => reload(running, file, overrides));
  for (const { pool, config } of served) {
    if (stopping) break;
    const server = await ProxyServer.start(config);
    server.configFile = path.resolve(file);
    running.push({ pool, server });
  }
  // One stats port for every pool (the flags set it alike in each), each pool under its name;
  // under --workers the primary serves it, summing what each worker says (cmd/worker-stats.ts).
  const stats = served[0].config.stats;
  if (stats !== undefined && !stopping) {
    const pools = running.map((r) => ({ name: r.pool ?? stats.pool, read: () => r.server.nutcrackerPool() }));
    if (isWorkerProcess()) answerStatsRequests(pools);
    else statsServer = await NutcrackerStatsServer.start({ listen: stats.listen, intervalMs: stats.intervalMs, version: VERSION }, pools);
  }
  // Under --workers the primary serves /metrics and the console, asking the workers (cmd/worker-console.ts).
  const http = running.find((r) => r.server.workerHttp !== null)?.server.workerHttp;
  if (isWorkerProcess() && http != null) answerHttpRequests(http);
  if (isWorkerProcess()) relayPhaseSwitches(running.map((r) => r.server));
  // Printed once the signals are handled, so whoever waits for it may stop the proxy at once.
  // A worker prints nothing (N workers would print it N times): it tells the primary.
  if (isWorkerProcess()) tellPrimaryServing();
  else {
    for (const r of running) process.stdout.write(startBanner(r));
    if (stats !== undefined && statsServer !== null) process.stdout.write(`nutcracker stats at ${parseHostPort(stats.listen).host}:${statsServer.port}\n`);
  }
  settleHeapWhenIdle(() => running.every((r) => r.server.stats.connectedClients === 0));
}

function problems(err: unknown): string[] | string {
  return err instanceof ConfigError ? err.problems : String(err);
}

/** SIGHUP: everything that can fail is checked, pool by pool, before anything is applied. */
function reload(running: Running[], file: string, overrides: ConfigOverrides): void {
  let next: ServedConfig[];
  try {
    next = loadServedFile(file, overrides);
  } catch (err) {
    reopenLogOnSignal('SIGHUP', RELOADING);
    log.error({ file, err: problems(err) }, 'reload refused; the running configuration stays');
    return;
  }
  const applies: { pool: string | null; apply: () => void }[] = [];
  // Said once the log file is settled, so that they are in the file that follows.
  const refusals: (() => void)[] = [];
  for (const { pool, server } of running) {
    const config = next.find((n) => n.pool === pool)?.config;
    if (config === undefined) {
      refusals.push(() => log.error({ file, pool }, 'reload: this pool is no longer in the file; it keeps serving until a restart stops it'));
      continue;
    }
    try {
      const apply = server.prepareReload(config);
      server.reloadRing(config);
      applies.push({ pool, apply });
    } catch (err) {
      refusals.push(() => log.error({ file, ...(pool === null ? {} : { pool }), err: problems(err) }, 'reload refused; the running configuration stays'));
    }
  }
  for (const { pool } of next) {
    if (!running.some((r) => r.pool === pool)) refusals.push(() => log.error({ file, pool }, 'reload: a pool added to the file is not started; restart to serve it'));
  }
  // The log file first (reopened, or the one the file now names), so that what follows is in it.
  if (applies.length === 0) reopenLogOnSignal('SIGHUP', RELOADING);
  else switchLogFile(next[0].config.log.file);
  for (const r of refusals) r();
  for (const { pool, apply } of applies) {
    apply();
    log.info({ file, ...(pool === null ? {} : { pool }) }, 'configuration reloaded (limits, log level, log file, auth and permissions, TLS certificate, back-end credentials, scripts, ring and migration applied)');
  }
}

/** `log.file` at start: logs go there from now on; exit 1 when it cannot be opened. */
export function openLogFile(logFile: string | undefined): void {
  try {
    logTo(logFile ?? null);
  } catch (err) {
    throw new Error(`cannot open the log file ${logFile ?? ''}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * `log.file` on SIGHUP: reopened under its name, or switched to the file the config now names,
 * SIGHUP's own line first in it. A file that cannot be opened keeps the logs where they went.
 */
function switchLogFile(logFile: string | undefined): void {
  const received = (): void => logSignal('SIGHUP', logFile === undefined ? RELOADING : `reopening log file and ${RELOADING}`);
  try {
    logTo(logFile ?? null);
  } catch (err) {
    received();
    log.error({ signal: 'SIGHUP', file: logFile, err: err instanceof Error ? err.message : String(err) }, 'cannot open the log file; logging on to the old one');
    return;
  }
  received();
  if (logFile !== undefined) log.info({ signal: 'SIGHUP', file: logFile }, 'log file reopened');
}

/** What `slotproxy start` prints on stdout once a proxy serves: where clients and Prometheus connect. */
function startBanner({ pool, server }: Running): string {
  const { host, port } = server.address;
  const config: Config = server.config;
  const lines = [`slotproxy ${VERSION} listening on ${host}:${port} (${config.mode} mode${pool === null ? '' : `, twemproxy pool ${pool}`})`];
  const metricsPort = server.metricsPort;
  if (config.metrics !== undefined && metricsPort !== null) {
    lines.push(`metrics at http://${parseHostPort(config.metrics.listen).host}:${metricsPort}/metrics`);
  }
  return `${lines.join('\n')}\n`;
}
