import { BackendPool } from '../backend/pool';
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

/** Why `next` may not follow `current`, or null. */
export function phaseChangeProblem(current: Placement, next: Placement): string | null {
  if (current.phase === 'done' && next.phase !== null && next.phase !== 'done' && current.to !== null) {
    return 'done is final: ring B is fenced and ring A no longer gets writes; going back would serve stale data';
  }
  return null;
}
