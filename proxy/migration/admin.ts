/**
 * `PROXY MIGRATION PHASE <phase>` and `PROXY MIGRATION STATUS`: the migration switched and read
 * over RESP. A phase set here lasts until the next reload (SIGHUP) or restart, which take the
 * phase from the config file; write the file too when the change must stick.
 */
import { MIGRATION_PHASES, MigrationPhase } from '../../config/schema';
import { ProxyContext } from '../context';
import { log } from '../telemetry/log';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { fenceRingB, phaseChangeProblem } from './fence';

const FENCE_TIMEOUT_MS = 5000;
const USAGE = errors.PROXY_COMMAND_USAGE;

export function isProxyCommand(name: Buffer): boolean {
  return name.length === 5 && name.toString('latin1').toLowerCase() === 'proxy';
}

export function proxyCommand(ctx: ProxyContext, args: Buffer[]): Buffer | Promise<Buffer> {
  const words = args.slice(1).map((a) => a.toString('utf8'));
  if (words.length < 2 || words[0].toLowerCase() !== 'migration') return encode.error(USAGE);
  const ring = ctx.ring;
  if (ring === null) return encode.error(errors.MIGRATION_NEEDS_RING);
  const sub = words[1].toLowerCase();
  if (sub === 'status' && words.length === 2) return encode.bulk(statusText(ctx));
  if (sub === 'phase' && words.length === 3) {
    const phase = words[2].toLowerCase();
    if (!(MIGRATION_PHASES as readonly string[]).includes(phase)) return encode.error(USAGE);
    if (!ring.placement.migrating) return encode.error(errors.NO_MIGRATION);
    const current = ring.placement;
    const next = current.withPhase(phase as MigrationPhase);
    const problem = phaseChangeProblem(current, next);
    if (problem !== null) return encode.error(errors.migrationPhaseRefused(problem));
    const swap = (): Buffer => {
      ring.swap(next);
      log.info({ from: current.phase, to: phase }, 'migration phase switched over RESP');
      return encode.OK;
    };
    if (phase !== 'done' || current.phase === 'done') return swap();
    return fenceRingB(ctx.pool, next, FENCE_TIMEOUT_MS).then(swap, (err: unknown) =>
      encode.error(errors.migrationPhaseRefused(`cannot fence ring B, phase unchanged: ${err instanceof Error ? err.message : String(err)}`)),
    );
  }
  return encode.error(USAGE);
}

function statusText(ctx: ProxyContext): string {
  const p = ctx.ring?.placement;
  if (p === undefined) return '';
  const nodes = (r: typeof p.from): string => r.nodes.map((n) => `${n.name}=${n.addr}`).join(',');
  const lines = [`phase:${p.phase ?? 'none'}`, `hash:${p.from.hash}`, `from:${nodes(p.from)}`];
  if (p.to !== null) lines.push(`to:${nodes(p.to)}`, `to_hash:${p.to.hash}`);
  return lines.join('\r\n') + '\r\n';
}
