/**
 * `slotproxy migrate copy|verify|cleanup|status -c FILE`: the offline half of a ring migration
 * (SPEC 6). They talk to the Redis nodes directly; the proxies do the online half.
 * Exit codes: 0 ok, 1 failure (verify: differences found), 2 bad configuration or usage.
 */
import { Command, InvalidArgumentError } from 'commander';
import { loadConfigFile } from '../config/load';
import { Config } from '../config/schema';
import { Placement } from '../sharding/migration';
import { Ring } from '../sharding/ring';
import { NodeClient } from '../proxy/migration/tools/node-client';
import { followLines, followStates } from '../proxy/migration/tools/follow-status';
import { copyHistory } from '../proxy/migration/tools/copy-history';
import { readSyncRecords } from '../proxy/migration/tools/follow-copy';
import { describeSync } from '../proxy/migration/follow-progress';
import { verifyMoved } from '../proxy/migration/tools/verify';
import { saveVerifyRecord } from '../proxy/migration/tools/verify-record';
import { cleanupMoved } from '../proxy/migration/tools/cleanup';
import { libraryStatusLines, verifyLibraries } from '../proxy/migration/tools/libraries';
import { CLUSTER_COPY_STATE_KEY, READ_COPY_STATE, parseCopyState, readCopyState } from '../proxy/migration/tools/copy';
import { ownersOf } from '../proxy/migration/copy-keys';
import { ProxyRecord, describeProxies, isBehind, readFleet } from '../proxy/migration/fleet';
import { switchFleet } from '../proxy/migration/tools/switch-phase';
import { ProxyTlsFlags, proxyTls } from '../proxy/migration/tools/proxy-tls';
import { proxyCredentials } from '../proxy/migration/tools/proxy-credentials';
import { filesNotSaying } from '../proxy/migration/tools/phase-files';
import { writePhase } from '../config/write-phase';
import { MIGRATION_PHASES, MigrationPhase } from '../config/schema';
import { proxiesNotDone, registerFinish } from './migrate-finish';

function wholeNumber(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a whole number');
  return n;
}

function migratingConfig(file: string): { config: Config; phase: MigrationPhase } {
  const config = loadConfigFile(file);
  if (config.migration === undefined) throw new Error(`${file}: migrate needs a migration: section`);
  return { config, phase: config.migration.phase };
}

/** Every live proxy of the ring, read from side A's nodes (a cluster's masters). */
function fleetOf(nodes: NodeClient, placement: Placement): Promise<ProxyRecord[]> {
  return readFleet((addr, args) => nodes.call(addr, args), placement.from.masters());
}

/** Connections to both sides (a cluster side's slot map loaded first) and the config's placement. */
async function withNodes<T>(config: Config, work: (nodes: NodeClient, placement: Placement) => Promise<T>): Promise<T> {
  const nodes = new NodeClient(config);
  try {
    await nodes.start();
    return await work(nodes, nodes.placement());
  } finally {
    nodes.close();
  }
}

export function registerMigrate(program: Command, fail: (err: unknown) => never): void {
  const migrate = program.command('migrate').description('move keys from side A (ring: or cluster:) to side B (migration.to:, a ring or a cluster)');
  registerFinish(migrate, fail);

  migrate
    .command('copy')
    .description('copy every key whose owner changes to its owner in side B (run while the proxies are in double-write); resumable')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .option('--rate <keys/s>', 'at most this many keys per second (0: no cap); under the replication carry, moving keys restored on side B per second by the full syncs', wholeNumber, 0)
    .option('--batch <n>', 'keys per SCAN batch', wholeNumber, 500)
    .option('--restart', 'forget the saved progress and start over (replication carry: a new full sync of every node of side A)')
    .action(async (opts: { config: string; rate: number; batch: number; restart?: boolean }) => {
      try {
        const { config, phase } = migratingConfig(opts.config);
        if (phase === 'done') throw new Error('the config says phase done: nothing is double-written any more, so copying now could lose writes');
        const r = await withNodes(config, async (nodes, placement) => {
          // A proxy that does not double-write yet would write keys the copy has already passed.
          const early = (await fleetOf(nodes, placement)).filter((p) => isBehind(p.phase, 'double-write'));
          if (early.length > 0) throw new Error(`refused: live proxies are not double-writing yet: ${describeProxies(early)}; switch them first (slotproxy migrate phase double-write -c FILE)`);
          // Under the replication carry the history is each node's full sync, run by the proxy that follows it: started (--restart) or watched.
          const print = (lines: string[]): void => void process.stdout.write(`${lines.join('\n')}\n`);
          return copyHistory(nodes, placement, { rate: opts.rate, batch: Math.max(1, opts.batch), restart: opts.restart === true, progress: true }, print, () =>
            process.stdout.write('copy: the migration is carried by replication: the history is the full sync of each node of side A, run by the proxy that follows it\n'),
          );
        });
        if (r.carry === 'replication') {
          const how = r.already === true ? 'were restored on side B before this run (--restart runs new ones)' : 'are restored on side B';
          process.stdout.write(`copy: the full syncs of side A ${how}: ${r.scanned} of ${r.total ?? r.scanned} keys read, ${r.copied} restored, ${r.seconds.toFixed(1)} s\n`);
          return;
        }
        process.stdout.write(`copy: ${r.scanned} keys scanned, ${r.copied} copied, ${r.skippedNewer} already newer in side B, ${r.seconds.toFixed(1)} s (${Math.round(r.scanned / Math.max(r.seconds, 0.001))} keys/s)\n`);
      } catch (err) {
        fail(err);
      }
    });

  migrate
    .command('verify')
    .description('count keys that differ between side A and side B (value, type, TTL); exit 1 when any do')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .option('--ttl-tolerance <ms>', 'TTLs closer than this count as equal', wholeNumber, 2000)
    .option('--show <n>', 'differences to list', wholeNumber, 10)
    .action(async (opts: { config: string; ttlTolerance: number; show: number }) => {
      try {
        const { config } = migratingConfig(opts.config);
        const r = await withNodes(config, (nodes, placement) => verifyMoved(nodes, placement, { ttlToleranceMs: opts.ttlTolerance, batch: 500, show: opts.show, progress: true }));
        for (const e of r.examples) process.stdout.write(`  differs: ${e}\n`);
        // For the proxies' console; a verify whose result cannot be saved still reports it.
        const record = { at: Date.now(), compared: r.compared, differing: r.differing, inFlight: r.inFlight };
        await withNodes(config, (nodes, placement) => saveVerifyRecord(nodes, placement, record)).catch(() => undefined);
        if (r.closedSideA !== undefined) {
          const { fence } = r.closedSideA;
          process.stdout.write(
            `verify: side A is closed (phase done): B alone takes writes, so its keys are no longer compared with A's; checked on B: ` +
              `${r.compared} moved keys of A, each with A's last state applied on B (${r.differing} differ), B fenced on ${fence.fenced} of ${fence.of} ${fence.unit}\n`,
          );
        } else {
          process.stdout.write(`verify: ${r.compared} moved keys compared, ${r.differing} differ, ${r.rechecked} rechecked${r.inFlight > 0 ? ` (${r.inFlight} still being written: B kept catching up)` : ''}\n`);
        }
        const librariesDiffer = await withNodes(config, (nodes, placement) => verifyLibraries(nodes, placement, (line) => process.stdout.write(line)));
        if (r.differing > 0) process.exit(1);
        if (librariesDiffer > 0) process.exit(1);
      } catch (err) {
        fail(err);
      }
    });

  migrate
    .command('cleanup')
    .description('after phase done: delete moved keys from their old owners, and the migration bookkeeping')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .option('--force', 'skip both checks (the file says phase done; every live proxy of the fleet is in done): keys side A may still serve, or a proxy still writes to, are deleted anyway')
    .action(async (opts: { config: string; force?: boolean }) => {
      try {
        const { config, phase } = migratingConfig(opts.config);
        if (phase !== 'done' && opts.force !== true) throw new Error(`the config says phase ${phase}: cleanup deletes keys side A still serves; switch every proxy to done first (or --force, which skips this check)`);
        const r = await withNodes(config, async (nodes, placement) => {
          // The file is one proxy's word: every live proxy must have stopped using side A.
          const behind = opts.force === true ? [] : await proxiesNotDone(nodes);
          if (behind.length > 0) throw new Error(`refused: live proxies are not in done: ${describeProxies(behind)}; they still read or write side A's keys (slotproxy migrate phase done -c FILE, or --force, which skips this check)`);
          return cleanupMoved(nodes, placement, { batch: 500, progress: true });
        });
        process.stdout.write(`cleanup: ${r.deleted} moved keys deleted from their old owners\n`);
      } catch (err) {
        fail(err);
      }
    });

  migrate
    .command('phase <phase>')
    .description('switch every live proxy of the fleet to PHASE over RESP (TLS when the config\'s listener has tls:), wait until each reports it, write it into the config file, and name the fleet\'s other config files that do not say it')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .option('--timeout <ms>', 'how long to wait for each proxy', wholeNumber, 10_000)
    .option('--no-write', 'leave the config file as it is')
    .option('--tls-ca <file>', 'TLS: the CA that signed the proxies\' certificates (default: the config\'s tls.ca, else Node\'s built-in CAs)')
    .option('--tls-cert <file>', 'TLS: the client certificate to present (default: the config\'s tls.cert, when its listener asks for one)')
    .option('--tls-key <file>', 'TLS: the key of --tls-cert')
    .option('--tls-servername <name>', 'TLS: the name the proxies\' certificates carry, also sent as SNI (default: each proxy\'s registered host)')
    .option('--user <name>', 'AUTH as this user of the config\'s auth.users, with its password there (default: auth.password, else the only user)')
    .action(async (phase: string, opts: { config: string; timeout: number; write: boolean; user?: string } & ProxyTlsFlags) => {
      try {
        if (!(MIGRATION_PHASES as readonly string[]).includes(phase)) throw new Error(`phase must be one of ${MIGRATION_PHASES.join(', ')}`);
        const { config } = migratingConfig(opts.config);
        const tls = proxyTls(config.tls, opts);
        const credentials = proxyCredentials(config.auth, opts.user);
        const outcomes = await withNodes(config, (nodes, placement) =>
          switchFleet((addr, args) => nodes.call(addr, args), placement.from.masters(), phase as MigrationPhase, { ...credentials, tls, timeoutMs: opts.timeout }),
        );
        if (outcomes.length === 0) throw new Error('no live proxy is registered on side A');
        for (const o of outcomes) process.stdout.write(`  ${o.proxy.id} ${o.proxy.addr}: ${o.problem ?? phase}\n`);
        const failed = outcomes.filter((o) => o.problem !== null).length;
        if (failed > 0) {
          process.stdout.write(`phase: ${outcomes.length - failed} of ${outcomes.length} proxies in ${phase}; the config file is unchanged\n`);
          process.exit(1);
        }
        // A proxy restarted from now on takes its phase from the file: it must say the same.
        if (opts.write) writePhase(opts.config, phase as MigrationPhase);
        process.stdout.write(`phase: all ${outcomes.length} proxies in ${phase}${opts.write ? `; ${opts.config} says ${phase}` : ''}\n`);
        const behind = filesNotSaying(outcomes.map((o) => o.proxy), phase);
        if (behind.length > 0) {
          process.stdout.write(`phase: config files of the fleet that may not say ${phase} (a proxy reloading or restarting from one goes back to its phase; run slotproxy migrate phase ${phase} -c FILE on its host, or edit it):\n`);
          for (const line of behind) process.stdout.write(`  ${line}\n`);
        }
      } catch (err) {
        fail(err);
      }
    });

  migrate
    .command('status')
    .description('print the phase, both rings, and the copy progress saved on the nodes')
    .requiredOption('-c, --config <file>', 'the proxies\' config file')
    .action(async (opts: { config: string }) => {
      try {
        const { config, phase } = migratingConfig(opts.config);
        const lines = [`phase: ${phase}`];
        await withNodes(config, async (nodes, placement) => {
          const fleet = await fleetOf(nodes, placement).catch((err: unknown) => err instanceof Error ? err : new Error(String(err)));
          if (fleet instanceof Error) lines.push(`proxies: unknown (${fleet.message})`);
          else {
            lines.push(`proxies (${fleet.length} live):`);
            for (const p of fleet) {
              lines.push(`  ${p.id} ${p.addr} ${p.phase}`);
              if (p.config !== '-') lines.push(`    config file: ${p.host}:${p.config}`);
              lines.push(`    refused because the target would refuse it: ${p.targetRefused === '-' ? 'nothing' : p.targetRefused}`);
              if (p.feeds !== '-') lines.push(`    change feeds: ${p.feeds === 'live' ? 'all live' : `${p.feeds} (read-new and done wait for these: a change feed until its node is re-walked, a follow until it is live)`}`);
              if (p.feeds !== '-') lines.push(`    copies the changes of: ${p.copies === '-' ? 'no node (other proxies do)' : p.copies}`);
            }
          }
          // Under the replication carry the history copy is each node's full sync (follow-progress.ts).
          const replication = (await nodes.carry(placement)) === 'replication';
          const syncs = replication ? await readSyncRecords(nodes, placement) : [];
          for (const [which, side] of [['A', placement.from], ['B', placement.to]] as const) {
            if (side === null) continue;
            const ring = side instanceof Ring ? side : null;
            lines.push(ring === null ? `cluster ${which} (masters now):` : `ring ${which} (${ring.hash}):`);
            if (which === 'A' && ring === null && !replication) {
              const owners = ownersOf(side);
              const { cursor, copied } = parseCopyState(await nodes.callOn(owners, owners?.ownerOf(0) ?? '', readCopyState(CLUSTER_COPY_STATE_KEY)).catch(() => null));
              lines.push(`  copy ${cursor === null ? 'not started' : cursor === 'done' ? 'done' : `at slot ${cursor}`}${cursor === null ? '' : ` (${copied} keys copied)`}`);
            }
            const listed = ring?.nodes ?? side.masters().map((addr) => ({ name: 'master', addr, weight: 0, points: 0 }));
            for (const n of listed) {
              let state: string;
              try {
                const keys = Number(await nodes.call(n.addr, ['DBSIZE']));
                let progress = '';
                if (which === 'A' && replication) progress = `, ${describeSync(syncs[side.masters().indexOf(n.addr)] ?? null)}`;
                else if (which === 'A' && ring !== null) {
                  const { cursor, copied } = parseCopyState(await nodes.call(n.addr, READ_COPY_STATE));
                  progress = `, copy ${cursor === null ? 'not started' : cursor === 'done' ? 'done' : `at cursor ${cursor}`}${cursor === null ? '' : ` (${copied} keys copied)`}`;
                }
                state = `${keys} keys${progress}`;
              } catch (err) {
                state = `unreachable (${err instanceof Error ? err.message : String(err)})`;
              }
              lines.push(ring === null ? `  ${n.addr}: ${state}` : `  ${n.name} ${n.addr} weight ${n.weight} points ${n.points}: ${state}`);
            }
          }
          if (replication) lines.push('replication carry (side A followed as replicas):', ...followLines(await followStates(nodes, placement)));
          lines.push(...(await libraryStatusLines(nodes, placement)));
        });
        process.stdout.write(`${lines.join('\n')}\n`);
      } catch (err) {
        fail(err);
      }
    });
}
