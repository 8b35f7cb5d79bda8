#!/usr/bin/env -S node --max-semi-space-size=16 --expose-gc
/**
 * The `slotproxy` command: argv -> config -> proxy. No proxy logic of its own.
 * Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or usage.
 * The shebang carries cmd/node-flags.ts's V8 flags (env -S passes them to node).
 */
import path from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { keySlot } from '../sharding/slot';
import { ConfigError, loadConfigFile } from '../config/load';
import { Config } from '../config/schema';
import { fail } from './fail';
import { startFromFile } from './serve';
import { loadServedFile } from '../config/served-file';
import { registerNutcracker } from './nutcracker';
import { hashTag } from '../sharding/hash-tag';
import { Placement } from '../sharding/migration';
import { describeOwner } from '../proxy/ring/describe';
import { migrationAt, ringAt } from '../sharding/master-addresses';
import { NO_MASTERS, startSentinelMasters } from '../proxy/sentinel/start';
import { registerImportTwemproxy } from './import-twemproxy';
import { registerMigrate } from './migrate';

import { VERSION } from '../proxy/server/version';
import { ClientAuth } from '../proxy/security/auth';
import { CommandTable } from '../proxy/commands/table';

// Output cut short by its reader (`slotproxy slot ... | head -1`) ends the command quietly, as
// other command-line tools end on SIGPIPE, instead of an unhandled EPIPE with a stack trace.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new InvalidArgumentError('expected a port number (1-65535)');
  return n;
}

const program = new Command()
  .name('slotproxy')
  .description('A cluster-aware Redis proxy: clients see one Redis server, slotproxy routes each command to the node that owns its keys.')
  .version(VERSION)
  // Program options (-V, -h) only before the command: \`slotproxy nutcracker -V\` is nutcracker's -V.
  .enablePositionalOptions()
  .showHelpAfterError();

program
  .command('start')
  .description('start the proxy (a slotproxy config, or a twemproxy nutcracker.yml as it is: every pool, each on its listen)')
  .requiredOption('-c, --config <file>', 'YAML (or JSON) config file, or a nutcracker.yml')
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
      await startFromFile(opts.config, { listen: opts.listen, seeds: opts.seeds, logLevel: opts.logLevel, logFile, workers: opts.workers });
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
      // Loaded only here: a proxy started with `start` never needs the sandbox's cluster tooling.
      const { runSandbox } = require('./sandbox/run') as typeof import('./sandbox/run');
      await runSandbox(opts);
    } catch (err) {
      fail(err);
    }
  });

program
  .command('check-config')
  .description('validate a config file (or a nutcracker.yml, each pool as start -c takes it); exit 0 when it is valid, 2 with the problems when not')
  .argument('<file>')
  .action((file: string) => {
    try {
      const served = loadServedFile(file, {});
      for (const { config } of served) checkUserRules(config, file);
      for (const { warnings } of served) for (const w of warnings) process.stderr.write(`${file}: warning: ${w}\n`);
      for (const { pool, config: c } of served) {
        const backend = c.mode === 'cluster' ? `${c.cluster.seeds.length} seed(s)` : `${c.ring.nodes.length} ring node(s)`;
        const what = `mode ${c.mode}${c.mode === 'ring' && c.ring.distribution !== undefined && c.ring.distribution !== 'ketama' ? ` (${c.ring.distribution})` : ''}, ${backend}, listen ${c.listen}`;
        process.stdout.write(pool === null ? `${file}: OK (${what})\n` : `${file}: pool ${pool} OK (${what})\n`);
      }
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
  .action(async (keys: string[], opts: { config?: string }) => {
    try {
      const cfg = opts.config === undefined ? null : loadConfigFile(opts.config);
      // Nodes given by their Sentinel master name are shown where the sentinels say they are.
      const masters = cfg === null ? null : await startSentinelMasters(cfg);
      masters?.stop();
      const at = masters?.addressOf ?? NO_MASTERS;
      // A cluster side is not asked for its slot map here: its owner shows as the key's slot.
      const placement = cfg?.mode === 'ring' ? Placement.fromConfig(ringAt(cfg.ring, at), migrationAt(cfg.migration, at), undefined, () => UNKNOWN_OWNERS) : null;
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
registerNutcracker(program);

program.parseAsync(process.argv).catch(fail);
