/**
 * Whether a difference `migrate verify` saw between A and B lasts. Under live writes a key can
 * differ for an instant: A took a write whose copy to B is still on its way. So a differing key is
 * read again on both sides, a few times with a growing pause, and judged by the versions each side
 * keeps (../converge.ts): A's is the last snapshot A took, B's the last one B applied; and by
 * whether A changed since its last snapshot (a write the change feed has yet to copy).
 *
 * - A and B agree at some read: no difference.
 * - Equal versions, A still in the state of that snapshot, different states, and neither side
 *   changed between two reads: B holds A's snapshot but not its state, so something changed B
 *   behind the migration's back. Lasting, known without waiting out the rechecks.
 * - A copy pending (B behind A, or A changed since its snapshot): in flight while B's version still
 *   advances between the last two reads (a hot key may never be caught equal at one instant, but
 *   its copies keep landing); lasting when B did not move (a copy was lost, or never made).
 * - B ahead of A: versions A never handed out. Lasting.
 */
import { KeyState, sameState } from './key-state';

/** Both sides' states, read as close together as possible, and why they differ (null: they agree). */
export interface Observation {
  a: KeyState;
  b: KeyState;
  diff: string | null;
}

export interface RecheckPolicy {
  /** Reads after the first; 0 reports the first difference. */
  times: number;
  /** Pause before the first recheck; each next pause doubles it. */
  firstDelayMs: number;
}

export const DEFAULT_RECHECK: RecheckPolicy = Object.freeze({ times: 5, firstDelayMs: 50 });

export type Verdict =
  | { kind: 'same' }
  | { kind: 'differs'; why: string }
  /** Still differing after every recheck, but B's copies kept arriving: not a difference. */
  | { kind: 'in-flight' };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Rechecks a key whose first observation `first` differed (with `times` 0: its difference as it is). */
export async function recheck(observe: () => Promise<Observation>, first: Observation, policy: RecheckPolicy): Promise<Verdict> {
  let prev = first;
  let cur = first;
  for (let i = 1; i <= policy.times; i++) {
    await sleep(policy.firstDelayMs * 2 ** (i - 1));
    prev = cur;
    cur = await observe();
    if (cur.diff === null) return { kind: 'same' };
    // Settled: B has A's snapshot, A is still in its state, nothing moved since the last read.
    const settled = cur.a.version === cur.b.version && !cur.a.changedSinceSnapshot && sameState(prev.a, cur.a) && sameState(prev.b, cur.b);
    if (settled) break;
  }
  const behind = cur.b.version < cur.a.version;
  if ((behind || cur.a.changedSinceSnapshot) && cur.b.version > prev.b.version) return { kind: 'in-flight' };
  return { kind: 'differs', why: explain(cur, policy.times > 0 && behind) };
}

function explain(o: Observation, stuck: boolean): string {
  const unsaved = o.a.changedSinceSnapshot && o.a.version > 0 ? '; A changed since that snapshot' : '';
  return `${o.diff ?? ''} (A at version ${o.a.version}, B at ${o.b.version}${stuck ? ', not advancing' : ''}${unsaved})`;
}
