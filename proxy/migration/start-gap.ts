/**
 * A proxy that starts while writes converge cannot know what changed on side A while it was not
 * running. If another proxy of the fleet was converging, its feeds heard it; if none was and the
 * history copy has already begun (it will not pass those keys again), every node of A is a gap and
 * is re-walked (change-copier.ts) before read-new or done may follow. Before the copy begins, the
 * copy itself carries whatever changed.
 */
import { ProxyContext } from '../context';
import { ChangeCopier } from './change-copier';
import { readCopyProgress } from './copy-progress';
import { fleetOf } from './admin';

export async function coverStartGap(ctx: ProxyContext, changes: ChangeCopier): Promise<void> {
  const placement = ctx.ring?.placement;
  if (placement === undefined || !placement.converges) return;
  let others = 0;
  try {
    // Read before this proxy registers: the fleet here is the others.
    others = (await fleetOf(ctx, placement)).filter((r) => r.phase === 'double-write' || r.phase === 'read-new').length;
  } catch {
    others = 0; // unknown: assume nobody heard the changes
  }
  if (others > 0) return;
  const copy = await readCopyProgress(ctx).catch(() => null);
  if (copy !== null && copy.copied === 0 && copy.nodesDone === 0) return;
  changes.gapEverywhere('this proxy started after the history copy began, with no other proxy running: changes made meanwhile are unknown');
}
