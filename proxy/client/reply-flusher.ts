/**
 * Writes client replies in batches, once per event-loop turn. The replies a client is owed arrive
 * in several back-end reads of one turn (its pipelined requests went to several nodes); each read
 * only lists the sessions it completed a reply for, and every listed session is written once, in
 * a setImmediate callback: that runs after all the socket reads of the turn's poll phase, so a
 * client gets one write for all of them instead of one per back-end read (bench/NOTES.md, round 5).
 */
// Imported, not the global: Node 20's global `performance` is a getter, called on every use.
import { performance } from 'node:perf_hooks';

export interface Flushable {
  flushReplies(): void;
}

let ready: Flushable[] = [];
let depth = 0;
let flushScheduled = false;

/** `session` has a reply at the head of its queue; it is written once this turn's reads are handled. */
export function markReady(session: Flushable): void {
  ready.push(session);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushReady);
  }
}

/** When the outermost running batch began (performance.now()). */
let batchStartedAt = 0;

/**
 * A clock for latency metrics that costs one performance.now() per socket read instead of one per
 * command: inside a batch, the time the read's handling began; outside (timers), the time now.
 */
export function batchClock(): number {
  return depth > 0 ? batchStartedAt : performance.now();
}

/**
 * Runs `work(arg)` (a socket read's handling) with the batch clock set. The argument is passed,
 * not captured, so a read costs no closure.
 */
export function inBatch<T>(work: (arg: T) => void, arg: T): void {
  if (depth === 0) batchStartedAt = performance.now();
  depth++;
  try {
    work(arg);
  } finally {
    depth--;
  }
}

/**
 * inBatch in two halves, for a caller that has more than one argument to pass and no closure to
 * spare (server/session.ts): `batchBegin(); try { ... } finally { batchEnd(); }`.
 */
export function batchBegin(): void {
  if (depth === 0) batchStartedAt = performance.now();
  depth++;
}

export function batchEnd(): void {
  depth--;
}

function flushReady(): void {
  flushScheduled = false;
  while (ready.length > 0) {
    const batch = ready;
    ready = [];
    for (let i = 0; i < batch.length; i++) batch[i].flushReplies();
  }
}
