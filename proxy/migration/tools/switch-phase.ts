/**
 * `slotproxy migrate phase PHASE -c FILE`: every live proxy of the ring (fleet.ts) is switched over
 * RESP with `PROXY MIGRATION PHASE` (TLS as its listener speaks it, proxy-tls.ts), then the fleet
 * is read again until each one's record reports the phase. The workers of one --workers proxy
 * share its address and each has a record: one request to that address switches them all
 * (cmd/worker-phase.ts). A proxy that refuses, cannot be reached or does not report in time is
 * named; nothing is retried behind the operator's back.
 */
import { MigrationPhase } from '../../../config/schema';
import { errorText } from '../../resp/decode-reply';
import { NodeCall, ProxyRecord, readFleet } from '../fleet';
import { ProxyLinkOptions, askProxy } from './proxy-link';

export interface SwitchOutcome {
  proxy: ProxyRecord;
  /** Null when it switched and reported the phase, else why not. */
  problem: string | null;
}

export async function switchFleet(call: NodeCall, ringA: readonly string[], phase: MigrationPhase, opts: ProxyLinkOptions): Promise<SwitchOutcome[]> {
  const fleet = await readFleet(call, ringA);
  const addresses = [...new Set(fleet.map((p) => p.addr))];
  const answers = new Map(
    await Promise.all(
      addresses.map(async (addr): Promise<[string, string | null]> => {
        try {
          return [addr, errorText(await askProxy(addr, ['PROXY', 'MIGRATION', 'PHASE', phase], opts))];
        } catch (err) {
          return [addr, `unreachable: ${err instanceof Error ? err.message : String(err)}`];
        }
      }),
    ),
  );
  const outcomes = fleet.map((proxy): SwitchOutcome => ({ proxy, problem: answers.get(proxy.addr) ?? null }));
  // Each switched proxy renews its record at once; wait until every one reports the phase.
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const now = new Map((await readFleet(call, ringA)).map((r) => [r.id, r]));
    const waiting = outcomes.filter((o) => o.problem === null && now.get(o.proxy.id)?.phase !== phase);
    // Of a refused --workers proxy, some workers may have switched: their records say which.
    for (const o of outcomes) if (o.problem !== null && now.get(o.proxy.id)?.phase === phase && !o.problem.startsWith('unreachable')) o.problem = null;
    if (waiting.length === 0) break;
    if (Date.now() > deadline) {
      for (const o of waiting) o.problem = now.has(o.proxy.id) ? `still reports ${now.get(o.proxy.id)!.phase}` : 'no longer registered (stopped?)';
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return outcomes;
}
