/**
 * `slotproxy nutcracker [flags]`: nutcracker's own flags, so that a service file only changes the
 * binary's name. It serves the file as `slotproxy start -c FILE` does (cmd/serve.ts).
 * - `-c FILE` (default conf/nutcracker.yml, as nutcracker), `-t` (check and exit 0/1, in
 *   nutcracker's words), `-o FILE` (the log file), `-v N` (nutcracker's 0-11 onto the log levels),
 *   `-p FILE` (the pid, removed on exit), `-V`, `-h`, `-D` (nutcracker's stats, described).
 * - `-d`: run in the background (cmd/daemonize.ts); the command returns once the daemon serves.
 * - `-s PORT`, `-a ADDR`, `-i MS`: nutcracker's stats port (proxy/telemetry/nutcracker-stats.ts).
 *   Served only when -s or -a is given, then with nutcracker's defaults for the other (port 22222,
 *   address 0.0.0.0): slotproxy binds nothing beyond loopback unless told. -i (default 30000 ms)
 *   alone changes nothing. Without them, the file's `stats` section (a slotproxy config) applies.
 * - `-m`: accepted, with one warning line on stderr (slotproxy has no mbufs).
 * - `--workers N` (slotproxy's own, no nutcracker flag): as `slotproxy start --workers`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { ConfigError, ConfigOverrides } from '../config/load';
import { loadServedFile } from '../config/served-file';
import { VERSION } from '../proxy/server/version';
import { fail } from './fail';
import { NUTCRACKER_STATS_DESCRIPTION } from './nutcracker-stats';
import { daemonize, isDaemonChild, tellFailed, tellServing } from './daemonize';
import { startFromFile } from './serve';
import { isWorkerProcess } from './workers';

interface NutcrackerFlags {
  confFile: string;
  testConf?: true;
  output?: string;
  verbose?: number;
  pidFile?: string;
  daemonize?: true;
  describeStats?: true;
  statsPort?: string;
  statsAddr?: string;
  statsInterval?: string;
  mbufSize?: string;
  workers?: number;
}

/** nutcracker's log levels (nc_log.h: LOG_EMERG 0 ... LOG_PVERB 11; default 5, LOG_NOTICE) as slotproxy's. */
export function nutcrackerLogLevel(verbosity: number): string {
  if (verbosity <= 2) return 'fatal';
  if (verbosity === 3) return 'error';
  if (verbosity === 4) return 'warn';
  if (verbosity <= 6) return 'info';
  if (verbosity === 7) return 'debug';
  return 'trace';
}

function verbosity(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 11) throw new InvalidArgumentError('expected a level from 0 to 11');
  return n;
}

function workerCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
  return n;
}

/** nutcracker's stats defaults (nc_core.h: STATS_PORT, STATS_ADDR, STATS_INTERVAL). */
export const NUTCRACKER_STATS_PORT = 22222;
export const NUTCRACKER_STATS_ADDR = '0.0.0.0';
export const NUTCRACKER_STATS_INTERVAL_MS = 30_000;

function statsPort(value: string): string {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port from 0 to 65535');
  return value;
}

function statsInterval(value: string): string {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a number of milliseconds, at least 1');
  return value;
}

/** The stats port the flags ask for: only with -s or -a, nutcracker's default for the one not given. */
export function statsFromFlags(opts: Pick<NutcrackerFlags, 'statsPort' | 'statsAddr' | 'statsInterval'>): { listen: string; intervalMs: number } | undefined {
  if (opts.statsPort === undefined && opts.statsAddr === undefined) return undefined;
  const addr = opts.statsAddr ?? NUTCRACKER_STATS_ADDR;
  const host = addr.includes(':') && !addr.startsWith('[') ? `[${addr}]` : addr;
  return {
    listen: `${host}:${opts.statsPort ?? NUTCRACKER_STATS_PORT}`,
    intervalMs: opts.statsInterval === undefined ? NUTCRACKER_STATS_INTERVAL_MS : Number(opts.statsInterval),
  };
}

/** The one line saying that -m is accepted and not used. */
function mbufWarning(opts: NutcrackerFlags): string | null {
  if (opts.mbufSize === undefined) return null;
  return `slotproxy nutcracker: warning: -m ${opts.mbufSize} accepted but not used: slotproxy has no mbufs\n`;
}

/** Writes the pid to `file` and removes it when the process exits (only if it still holds this pid). */
function writePidFile(file: string): void {
  const pid = String(process.pid);
  try {
    fs.writeFileSync(file, `${pid}\n`);
  } catch (err) {
    throw new Error(`cannot write the pid file ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  process.on('exit', () => {
    try {
      if (fs.readFileSync(file, 'utf8').trim() === pid) fs.unlinkSync(file);
    } catch {
      // Already gone.
    }
  });
}

/** nutcracker -t: its line on stderr (a tool may match it), then slotproxy's reasons, one a line. */
function testConf(file: string, overrides: ConfigOverrides): never {
  try {
    loadServedFile(file, overrides);
  } catch (err) {
    process.stderr.write(`nutcracker: configuration file '${file}' syntax is invalid\n`);
    const problems = err instanceof ConfigError ? err.problems : [err instanceof Error ? err.message : String(err)];
    for (const p of problems) process.stderr.write(`  ${p}\n`);
    process.exit(1);
  }
  process.stderr.write(`nutcracker: configuration file '${file}' syntax is ok\n`);
  process.exit(0);
}

export function registerNutcracker(program: Command): void {
  program
    .command('nutcracker')
    .description("serve a nutcracker.yml with nutcracker's flags (a service file changes only the binary's name)")
    .version(`slotproxy ${VERSION} (nutcracker's flags)`, '-V, --version', 'show version and exit')
    .helpOption('-h, --help', 'this help')
    .option('-c, --conf-file <file>', 'set configuration file', 'conf/nutcracker.yml')
    .option('-t, --test-conf', 'test configuration for syntax errors and exit')
    .option('-o, --output <file>', 'set logging file (default: stderr); SIGUSR1 and SIGHUP reopen it')
    .option('-v, --verbose <n>', 'set logging level 0-11, as nutcracker (default: 5, info)', verbosity)
    .option('-p, --pid-file <file>', 'write the pid here; removed on exit')
    .option('-d, --daemonize', 'run as a daemon: return once it serves (exit 0), or print why it could not start')
    .option('-D, --describe-stats', "print nutcracker's stats description and exit")
    .option('-s, --stats-port <port>', `serve nutcracker's stats JSON on this port (with -a alone: ${NUTCRACKER_STATS_PORT})`, statsPort)
    .option('-a, --stats-addr <addr>', `on this address (with -s alone: ${NUTCRACKER_STATS_ADDR}); neither: no stats port`)
    .option('-i, --stats-interval <ms>', `rebuild the stats JSON this often (default: ${NUTCRACKER_STATS_INTERVAL_MS} ms)`, statsInterval)
    .option('-m, --mbuf-size <bytes>', 'accepted; slotproxy has no mbufs')
    .option('--workers <n>', 'slotproxy\'s own: proxy processes sharing each listen (the stats port sums them)', workerCount)
    .action(async (opts: NutcrackerFlags) => {
      try {
        if (opts.describeStats === true) {
          process.stdout.write(`${NUTCRACKER_STATS_DESCRIPTION}\nNote: slotproxy serves these on its stats port with -s/-a (or stats.listen in a slotproxy config); its Prometheus /metrics (metrics.listen) has its own counters.\n`);
          return;
        }
        // With -d, the parent prints nothing but a failure: the daemon writes the rest to -o. A
        // worker of --workers runs this command again: -d and the warning are the primary's.
        const worker = isWorkerProcess();
        const background = opts.daemonize === true && !isDaemonChild() && !worker;
        const warning = mbufWarning(opts);
        if (warning !== null && !background && !worker) process.stderr.write(warning);
        const overrides: ConfigOverrides = {
          logFile: opts.output === undefined ? undefined : path.resolve(opts.output),
          logLevel: opts.verbose === undefined ? undefined : nutcrackerLogLevel(opts.verbose),
          stats: statsFromFlags(opts),
          workers: opts.workers,
        };
        if (opts.testConf === true) testConf(opts.confFile, overrides);
        if (background) await daemonize(overrides.logFile);
        if (opts.pidFile !== undefined && !worker) writePidFile(path.resolve(opts.pidFile));
        await startFromFile(opts.confFile, overrides);
        tellServing();
      } catch (err) {
        if (isDaemonChild()) tellFailed(err);
        else fail(err);
      }
    });
}
