/**
 * What side B's rules refuse that side A took, so the operator sees it before `read-new`: a
 * multi-key request whose keys share a ring node (or slot) of A but not of B is refused with
 * CROSSSLOT during a migration (it must be valid on both sides), and counted here by command
 * (INFO proxy, /metrics, and each proxy's fleet registration, which `migrate status` shows). A
 * sample of the keys is logged at most once a second.
 */
import { ProxyContext } from '../context';
import { log } from '../telemetry/log';
import { showKey } from './tools/node-client';

const LOG_EVERY_MS = 1000;
const SAMPLE_KEYS = 4;
let lastLogAt = 0;

/** Called with a request refused with CROSSSLOT: counts it when only the target's rules refuse it. */
export function noteTargetRefusal(ctx: ProxyContext, command: string, keys: readonly Buffer[]): void {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.refusedOnlyByTarget(keys)) return;
  const counts = ctx.stats.targetRefusals;
  counts.set(command, (counts.get(command) ?? 0) + 1);
  const now = Date.now();
  if (now - lastLogAt < LOG_EVERY_MS) return;
  lastLogAt = now;
  log.warn(
    { command, keys: keys.slice(0, SAMPLE_KEYS).map(showKey), refusedSoFar: counts.get(command) },
    'refused during the migration: these keys share a node of the source but not of the target, which would refuse them; give them one hash tag',
  );
}

/** `mset=3,sunion=1`, or `-` when nothing was refused (fleet names and INFO hold no spaces). */
export function targetRefusalSummary(counts: ReadonlyMap<string, number>): string {
  if (counts.size === 0) return '-';
  return [...counts].map(([c, n]) => `${c}=${n}`).join(',');
}
