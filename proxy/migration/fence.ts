import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';
import { FENCE_KEY } from './converge';

/**
 * Before a proxy writes to ring B alone (`done`), every node of B refuses further snapshots from
 * ring A (proxy/migration/converge.ts): a proxy still in double-write or read-new then learns, from the
 * refusal, whether its write reached B, and runs it on B when it did not. Resolves once every B
 * node has the fence; throws (and nothing may switch) when one cannot be reached.
 */
export async function fenceRingB(pool: BackendPool, placement: Placement, timeoutMs: number): Promise<void> {
  if (placement.to === null) return;
  await Promise.all(
    placement.to.addresses.map(async (addr) => {
      const frame = await request(pool.connection(addr, 0), ['SET', FENCE_KEY, '1'], timeoutMs);
      const err = errorText(frame);
      if (err !== null) throw new Error(`${addr}: ${err}`);
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
