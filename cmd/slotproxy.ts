#!/usr/bin/env -S node --max-semi-space-size=16
/**
 * The `slotproxy` command: argv -> config -> proxy. No proxy logic of its own.
 * Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or usage.
 * The shebang carries cmd/node-flags.ts's V8 flags (env -S passes them to node).
 */
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { keySlot } from '../sharding/slot';
import { ConfigError, ConfigOverrides, applyOverrides, loadConfigFile } from '../config/load';
import { Config, parseHostPort } from '../config/schema';
import { ProxyServer } from '../proxy/server/server';
import { log, logTo, reopenLogFile, setLogLevel } from '../proxy/telemetry/log';
import { handleNutcrackerSignals } from './signals';
import { hashTag } from '../sharding/hash-tag';
import { runSandbox } from './sandbox/run';
import { Placement } from '../sharding/migration';
import { describeOwner } from '../proxy/ring/describe';
import { registerImportTwemproxy } from './import-twemproxy';
import { registerMigrate } from './migrate';
import { isWorkerProcess, superviseWorkers } from './workers';

import { VERSION } from '../proxy/server/version';
import { ClientAuth } from '../proxy/security/auth';
import { CommandTable } from '../proxy/commands/table';

function fail(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`slotproxy: invalid configuration${err.file !== undefined ? ` in ${err.file}` : ''}:\n`);
    for (const p of err.problems) process.stderr.write(`  ${p}\n`);
    process.exit(2);
  }
  process.stderr.write(`slotproxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('expected a port number (1-65535)');
  return n;
}

/**
 * Starts a proxy and wires the signals: SIGTERM/SIGINT drain and exit 0, SIGHUP reopens the log
 * file and re-reads the config file, the others as nutcracker (cmd/signals.ts).
 */
async function serve(config: Config, file: string | null, overrides: ConfigOverrides): Promise<void> {
  setLogLevel(config.log.level);
  openLogFile(config.log.file);
  // Before the start, which may wait for the back end: SIGTTIN would stop the process, SIGUSR2 end it.
  handleNutcrackerSignals();
  const server = await ProxyServer.start(config);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: draining in-flight replies');
    server.close().then(() => process.exit(0), fail);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    if (file === null) {
      reopenLogFile('SIGHUP');
      return;
    }
    let next: Config;
    let apply: () => void;
    try {
      next = applyOverrides(loadConfigFile(file), overrides);
      // Everything that can fail is checked before anything is applied.
      apply = server.prepareReload(next);
      server.reloadRing(next);
    } catch (err) {
      reopenLogFile('SIGHUP');
      log.error({ file, err: err instanceof ConfigError ? err.problems : String(err) }, 'reload refused; the running configuration stays');
      return;
    }
    // The log file first (reopened, or the one the file now names), so that what follows is in it.
    switchLogFile(next.log.file);
    apply();
    log.info({ file }, 'configuration reloaded (limits, log level, log file, auth and permissions, TLS certificate, back-end credentials, scripts, ring and migration applied)');
  });
  // Printed once the signals are handled, so whoever waits for it may stop the proxy at once.
  // A worker prints nothing: N workers would print it N times.
  if (!isWorkerProcess()) process.stdout.write(startBanner(server));
}

/** `log.file` at start: logs go there from now on; exit 1 when it cannot be opened. */
function openLogFile(logFile: string | undefined): void {
  try {
    logTo(logFile ?? null);
  } catch (err) {
    throw new Error(`cannot open the log file ${logFile ?? ''}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** `log.file` on SIGHUP: reopened under its name, or switched to the file the config now names. A file that cannot be opened keeps the logs where they went. */
function switchLogFile(logFile: string | undefined): void {
  try {
    logTo(logFile ?? null);
    if (logFile !== undefined) log.info({ signal: 'SIGHUP', file: logFile }, 'log file reopened');
  } catch (err) {
    log.error({ signal: 'SIGHUP', file: logFile, err: err instanceof Error ? err.message : String(err) }, 'cannot open the log file; logging on to the old one');
  }
}

/** What `slotproxy start` prints on stdout once it serves: where clients and Prometheus connect. */
function startBanner(server: ProxyServer): string {
  const { host, port } = server.address;
  const lines = [`slotproxy ${VERSION} listening on ${host}:${port} (${server.config.mode} mode)`];
  const metricsPort = server.metricsPort;
  if (server.config.metrics !== undefined && metricsPort !== null) {
    lines.push(`metrics at http://${parseHostPort(server.config.metrics.listen).host}:${metricsPort}/metrics`);
  }
  return `${lines.join('\n')}\n`;
}

const program = new Command()
  .name('slotproxy')
  .description('A cluster-aware Redis proxy: clients see one Redis server, slotproxy routes each command to the node that owns its keys.')
  .version(VERSION)
  .showHelpAfterError();

program
  .command('start')
  .description('start the proxy')
  .requiredOption('-c, --config <file>', 'YAML (or JSON) config file')
  .option('--listen <host:port>', 'address for clients (overrides the file)')
  .option('--seeds <host:port,...>', 'cluster seed nodes (overrides the file)', (v: string) => v.split(',').filter((s) => s !== ''))
  .option('--log-level <level>', 'fatal | error | warn | info | debug | trace | silent')
  .option('-o, --log-file <file>', 'append logs to this file instead of stderr (overrides the file); SIGUSR1 and SIGHUP reopen it')
  .option('--workers <n>', 'proxy processes sharing the port (overrides the file)', (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of at least 1');
    return n;
  })
  .action(async (opts: { config: string; listen?: string; seeds?: string[]; logLevel?: string; logFile?: string; workers?: number }) => {
    try {
      const logFile = opts.logFile === undefined ? undefined : path.resolve(opts.logFile);
      const overrides: ConfigOverrides = { listen: opts.listen, seeds: opts.seeds, logLevel: opts.logLevel, logFile, workers: opts.workers };
      const config = applyOverrides(loadConfigFile(opts.config), overrides);
      if (config.workers > 1 && !isWorkerProcess()) {
        setLogLevel(config.log.level);
        openLogFile(config.log.file);
        superviseWorkers(config.workers, config.metrics?.listen);
        return;
      }
      await serve(config, opts.config, overrides);
    } catch (err) {
      fail(err);
    }
  });

program
  .command('sandbox')
  .description('start a local 3-master, 3-replica Redis Cluster (redis-server from the OS) with the proxy in front; Ctrl-C tears it all down')
  .option('--base-port <port>', 'first Redis port; nodes use 6 consecutive ports', port, 7001)
  .option('--listen <host:port>', 'address for clients', '127.0.0.1:7777')
  .action(async (opts: { basePort: number; listen: string }) => {
    try {
      await runSandbox(opts);
    } catch (err) {
      fail(err);
    }
  });

program
  .command('check-config')
  .description('validate a config file; exit 0 when it is valid, 2 with the problems when not')
  .argument('<file>')
  .action((file: string) => {
    try {
      const c = loadConfigFile(file);
      checkUserRules(c, file);
      const backend = c.mode === 'cluster' ? `${c.cluster.seeds.length} seed(s)` : `${c.ring.nodes.length} ring node(s)`;
      process.stdout.write(`${file}: OK (mode ${c.mode}, ${backend}, listen ${c.listen})\n`);
    } catch (err) {
      fail(err);
    }
  });

/** A cluster whose slot map the command does not load: no slot has a known owner. */
const UNKNOWN_OWNERS = { ownerOf: () => null, masterAddresses: () => [], applyMoved: () => undefined, requestRefresh: () => undefined };

program
  .command('slot')
  .description("print each key's hash slot and hash tag (with -c and a ring config, its owner node)")
  .argument('<key...>')
  .option('-c, --config <file>', 'ring mode: also print the owner node (in both rings during a migration)')
  .action((keys: string[], opts: { config?: string }) => {
    try {
      const cfg = opts.config === undefined ? null : loadConfigFile(opts.config);
      // A cluster side is not asked for its slot map here: its owner shows as the key's slot.
      const placement = cfg?.mode === 'ring' ? Placement.fromConfig(cfg.ring, cfg.migration, undefined, () => UNKNOWN_OWNERS) : null;
      for (const key of keys) {
        const buf = Buffer.from(key);
        const tag = hashTag(buf);
        const ring = placement === null ? '' : `\t${describeOwner(placement, buf)}`;
        process.stdout.write(`${key}\tslot=${keySlot(buf)}\ttag=${tag === null ? '-' : tag.toString()}${ring}\n`);
      }
    } catch (err) {
      fail(err);
    }
  });

/**
 * The command names in `auth.users[].commands`, against the table recorded from Redis 7.0 (a
 * running proxy checks them against its back end's own table, modules' commands included).
 */
function checkUserRules(c: Config, file: string): void {
  try {
    ClientAuth.fromConfig(c.auth, CommandTable.fallback(), c.mode);
  } catch (err) {
    throw err instanceof ConfigError ? new ConfigError(err.problems, file) : err;
  }
}

registerImportTwemproxy(program, fail);
registerMigrate(program, fail);

program.parseAsync(process.argv).catch(fail);
