/**
 * `PROXY MIGRATION PHASE` under --workers: every worker is a proxy of the fleet, with its own
 * placement, change feeds and record, but clients (and `slotproxy migrate phase`) reach whichever
 * worker the shared listener hands them to. So the worker a switch reaches asks the primary, which
 * has every serving worker run the switch itself (its own checks, barriers and fence) and answers
 * with what each said; the asking worker replies OK once all have switched, else names the
 * workers that did not (proxy/migration/admin.ts). A worker not serving yet (starting, replacing
 * one that died) is not asked: it takes the phase from the config file as it starts.
 */
import { Worker } from 'node:cluster';
import type { WorkerSwitch } from '../proxy/context';
import type { ProxyServer } from '../proxy/server/server';

/** Worker -> primary: switch every worker's `pool` (its index in the served file) to `phase`. */
const RELAY = 'slotproxy:phase-relay?';
/** Primary -> the asking worker: what every worker said. */
const RELAYED = 'slotproxy:phase-relay';
/** Primary -> each worker: switch `pool` to `phase` here. */
const SWITCH = 'slotproxy:phase?';
/** Each worker -> primary: its outcome. */
const SWITCHED = 'slotproxy:phase';
/** A worker's own switch waits at most 5 s per step (fleet, close, fence): this bounds them all. */
const SWITCH_WITHIN_MS = 20_000;
const RELAY_WITHIN_MS = SWITCH_WITHIN_MS + 5000;

interface PhaseMessage {
  type: string;
  id: number;
  pool: number;
  phase: string;
}

interface SwitchedMessage {
  type: typeof SWITCHED;
  id: number;
  outcome: WorkerSwitch;
}

interface RelayedMessage {
  type: typeof RELAYED;
  id: number;
  outcomes: WorkerSwitch[];
}

let nextId = 0;

function isPhaseMessage(m: unknown, type: string): m is PhaseMessage {
  const p = m as Partial<PhaseMessage> | null;
  return p?.type === type && typeof p.id === 'number' && typeof p.pool === 'number' && typeof p.phase === 'string';
}

/**
 * Resolves with the first message from `source` that `pick` accepts, or `fallback()` after `ms`.
 * `send` runs once listening; it settles the wait itself when its message cannot be sent (the
 * other end has just died: EPIPE comes to the send's callback on a later turn).
 */
function reply<T>(source: NodeJS.EventEmitter, pick: (m: unknown) => T | undefined, ms: number, fallback: () => T, send: (settle: (value: T) => void) => void): Promise<T> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (value: T): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      source.off('message', onMessage);
      resolve(value);
    };
    const onMessage = (m: unknown): void => {
      const value = pick(m);
      if (value !== undefined) done(value);
    };
    const timer = setTimeout(() => done(fallback()), ms);
    source.on('message', onMessage);
    send(done);
  });
}

/**
 * In a worker, once its proxies serve: a switch through any of them goes to every worker (through
 * the primary), and a switch the primary relays runs here.
 */
export function relayPhaseSwitches(servers: readonly ProxyServer[]): void {
  const here = servers.map((server, pool) =>
    server.relayPhaseSwitches(async (phase) => {
      const id = nextId++;
      let unsent: string | null = null;
      const outcomes = await reply<WorkerSwitch[] | null>(process, (m) => {
        const r = m as Partial<RelayedMessage> | null;
        return r?.type === RELAYED && r.id === id && Array.isArray(r.outcomes) ? r.outcomes : undefined;
      }, RELAY_WITHIN_MS, () => null, (settle) =>
        process.send?.({ type: RELAY, id, pool, phase } satisfies PhaseMessage, undefined, {}, (err: Error | null) => {
          if (err === null) return;
          unsent = err.message;
          settle(null);
        }),
      );
      if (outcomes === null) throw new Error(unsent === null ? `the primary process did not answer within ${RELAY_WITHIN_MS} ms` : `the primary process cannot be asked: ${unsent}`);
      return outcomes;
    }),
  );
  process.on('message', (m: unknown) => {
    if (!isPhaseMessage(m, SWITCH)) return;
    const pool = here[m.pool];
    // Not sent (the primary is gone): nobody waits for it.
    const outcome = (problem: string | null): void =>
      void process.send?.({ type: SWITCHED, id: m.id, outcome: { pid: process.pid, id: pool?.fleetId() ?? '', problem } } satisfies SwitchedMessage, undefined, {}, () => undefined);
    if (pool === undefined) return outcome(`no pool ${m.pool} in this worker`);
    pool.switchHere(m.phase).then(outcome, (err: unknown) => outcome(err instanceof Error ? err.message : String(err)));
  });
}

/** In the primary: a worker's RELAY message, run on every worker `serving()` lists. */
export function relayPhaseSwitch(from: Worker, m: unknown, serving: () => Worker[]): void {
  if (!isPhaseMessage(m, RELAY)) return;
  const ask = (worker: Worker): Promise<WorkerSwitch> => {
    const id = nextId++;
    const pid = worker.process.pid ?? 0;
    return reply<WorkerSwitch>(worker, (r) => {
      const s = r as Partial<SwitchedMessage> | null;
      return s?.type === SWITCHED && s.id === id && s.outcome !== undefined ? s.outcome : undefined;
    }, SWITCH_WITHIN_MS, () => ({ pid, id: '', problem: `did not answer within ${SWITCH_WITHIN_MS} ms` }), (settle) =>
      worker.send({ type: SWITCH, id, pool: m.pool, phase: m.phase } satisfies PhaseMessage, (err: Error | null) => {
        if (err !== null) settle({ pid, id: '', problem: `cannot be asked: ${err.message}` });
      }),
    );
  };
  void Promise.all(serving().map(ask)).then((outcomes) => {
    // The asking worker gone meanwhile: nobody waits for the answer.
    if (from.isConnected()) from.send({ type: RELAYED, id: m.id, outcomes } satisfies RelayedMessage, () => undefined);
  });
}
