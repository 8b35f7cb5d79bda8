import { BackendPool } from '../backend/pool';
import { MigrationChanges } from '../context';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { SLOT_COUNT } from '../../sharding/slot';
import { FENCE_KEY, inSlot } from './converge';
import { ownersOf } from './copy-keys';
import { sideRequest } from './side-request';

/**
 * Before a proxy writes to ring B alone (`done`), every node of B refuses further snapshots from
 * ring A (proxy/migration/converge.ts): a proxy still in double-write or read-new then learns, from the
 * refusal, whether its write reached B, and runs it on B when it did not. Resolves once every B
 * node has the fence; throws (and nothing may switch) when one cannot be reached. On a Redis
 * Cluster side the fence is one key per slot (APPLY reads the one of its key's slot), each set on
 * the slot's master, redirects followed.
 */
export async function fenceRingB(pool: BackendPool, placement: Placement, timeoutMs: number): Promise<void> {
  const to = placement.to;
  if (to === null) return;
  const owners = ownersOf(to);
  if (owners === null) {
    await Promise.all(
      to.masters().map(async (addr) => {
        const frame = await request(pool.connection(addr, 0), ['SET', FENCE_KEY, '1'], timeoutMs);
        const err = errorText(frame);
        if (err !== null) throw new Error(`${addr}: ${err}`);
      }),
    );
    return;
  }
  const slots = Array.from({ length: SLOT_COUNT }, (_, s) => s);
  await Promise.all(
    slots.map(async (slot) => {
      const addr = owners.ownerOf(slot) ?? '';
      const frame = await sideRequest(pool, owners, addr, ['SET', inSlot(FENCE_KEY, slot), '1'], { lane: 0, timeoutMs, retryWindowMs: timeoutMs });
      const err = errorText(frame);
      if (err !== null) throw new Error(`slot ${slot} (${addr}): ${err}`);
    }),
  );
}

/**
 * Whether side B holds the fence: some proxy of the fleet entered `done` (one node of a ring B, the
 * fence key of slot 0 of a cluster B, tells; migration/tools/verify-closed.ts reads it alike).
 */
export async function sideBFenced(pool: BackendPool, placement: Placement, timeoutMs: number): Promise<boolean> {
  const to = placement.to;
  if (to === null) return false;
  const owners = ownersOf(to);
  const address = owners === null ? to.masters()[0] : owners.ownerOf(0);
  if (address === undefined || address === null) return false;
  const frame = await sideRequest(pool, owners, address, ['EXISTS', owners === null ? FENCE_KEY : inSlot(FENCE_KEY, 0)], { lane: 0, timeoutMs, retryWindowMs: timeoutMs });
  const err = errorText(frame);
  if (err !== null) throw new Error(`${address}: ${err}`);
  return frame.toString() !== ':0\r\n';
}

/** Why `next` may not follow `current`, or null. */
export function phaseChangeProblem(current: Placement, next: Placement): string | null {
  if (current.phase === 'done' && next.phase !== null && next.phase !== 'done' && current.to !== null) {
    return 'done is final: ring B is fenced and ring A no longer gets writes; going back would serve stale data';
  }
  return null;
}

/** How long a switch to read-new or done waits for follows catching up (docs/migration.md). */
export const CATCH_UP_WAIT_MS = 30_000;
const CATCH_UP_POLL_MS = 50;

/** What the waits below read of the change copier. */
export type Coverage = Pick<MigrationChanges, 'uncovered' | 'catchingUp'>;

/**
 * Why `next` must wait for the carry (change-copier.ts): reads moving to side B (read-new), or
 * writes (done), while some node of side A may have changes that never reached B. Null when
 * nothing is missing.
 */
export function coverageProblem(changes: Coverage | null, current: Placement, next: Placement): string | null {
  if (changes === null || !current.converges || next.to === null) return null;
  const ahead = next.phase === 'done' || (next.phase === 'read-new' && current.phase === 'double-write');
  if (!ahead) return null;
  const open = changes.uncovered();
  if (open.length === 0) return null;
  const hint = changes.catchingUp()
    ? 'each follow catches up by itself: a full sync, a snapshot restored, a link resumed'
    : 'a node is re-walked as soon as its change feed is up again; slotproxy migrate copy --restart covers it too';
  return `changes on side A are not all known to be on side B: ${open.join('; ')} (${hint})`;
}

/**
 * coverageProblem, waited out while the only nodes not covered are follows catching up (their
 * full sync under way, a link being resumed, on this proxy or the one that follows the node):
 * null once covered; the problem at once when some node will not catch up by itself, or once
 * `timeoutMs` passed. `current` and `next` are read again at each look (a failover may swap the
 * placement meanwhile).
 */
export async function coverageAwaited(changes: Coverage | null, current: () => Placement, next: (p: Placement) => Placement, timeoutMs: number): Promise<string | null> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const p = current();
    const problem = coverageProblem(changes, p, next(p));
    if (problem === null) return null;
    if (changes?.catchingUp() !== true) return problem;
    if (Date.now() >= until) return `${problem}; waited ${Math.round(timeoutMs / 1000)} s for them`;
    await new Promise((resolve) => setTimeout(resolve, CATCH_UP_POLL_MS));
  }
}

/** Resolves once `changes` has every node covered, one that will not catch up by itself, or after `timeoutMs`. */
export async function caughtUp(changes: Coverage, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (changes.uncovered().length > 0 && changes.catchingUp() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, CATCH_UP_POLL_MS));
}
