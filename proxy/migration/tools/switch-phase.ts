/**
 * `slotproxy migrate phase PHASE -c FILE`: every live proxy of the ring (fleet.ts) is switched over
 * RESP with `PROXY MIGRATION PHASE`, then the fleet is read again until each one's record reports
 * the phase. A proxy that refuses, cannot be reached or does not report in time is named; nothing is
 * retried behind the operator's back.
 */
import { BackendPool } from '../../backend/pool';
import { request } from '../../backend/request';
import { errorText } from '../../resp/decode-reply';
import * as encode from '../../resp/encode';
import { MigrationPhase } from '../../../config/schema';
import { NodeCall, ProxyRecord, readFleet } from '../fleet';

export interface SwitchOutcome {
  proxy: ProxyRecord;
  /** Null when it switched and reported the phase, else why not. */
  problem: string | null;
}

export interface SwitchOptions {
  /** The proxies' client password (`auth.password`), sent as AUTH. */
  password?: string;
  timeoutMs: number;
}

export async function switchFleet(call: NodeCall, ringA: readonly string[], phase: MigrationPhase, opts: SwitchOptions): Promise<SwitchOutcome[]> {
  const fleet = await readFleet(call, ringA);
  const pool = new BackendPool({
    connectionsPerNode: 1,
    connectTimeoutMs: opts.timeoutMs,
    commandTimeoutMs: opts.timeoutMs,
    handshake: opts.password === undefined ? [] : [encode.command(['AUTH', opts.password])],
    tls: null,
  });
  try {
    const outcomes = await Promise.all(
      fleet.map(async (proxy): Promise<SwitchOutcome> => {
        try {
          const frame = await request(pool.connection(proxy.addr, 0), ['PROXY', 'MIGRATION', 'PHASE', phase], opts.timeoutMs);
          return { proxy, problem: errorText(frame) };
        } catch (err) {
          return { proxy, problem: `unreachable: ${err instanceof Error ? err.message : String(err)}` };
        }
      }),
    );
    // Each switched proxy renews its record at once; wait until every one reports the phase.
    const deadline = Date.now() + opts.timeoutMs;
    for (;;) {
      const now = new Map((await readFleet(call, ringA)).map((r) => [r.id, r]));
      const waiting = outcomes.filter((o) => o.problem === null && now.get(o.proxy.id)?.phase !== phase);
      if (waiting.length === 0) break;
      if (Date.now() > deadline) {
        for (const o of waiting) o.problem = now.has(o.proxy.id) ? `still reports ${now.get(o.proxy.id)!.phase}` : 'no longer registered (stopped?)';
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return outcomes;
  } finally {
    pool.closeAll();
  }
}
