/**
 * Writes client replies in batches. A back-end read delivers replies for many sessions; instead of
 * one process.nextTick per session, sessions with replies ready are listed here and written in one
 * pass when the read has been handled (`inBatch`), or on the next tick when a reply completes
 * outside any batch (timers, merges).
 */
export interface Flushable {
  flushReplies(): void;
}

let ready: Flushable[] = [];
let depth = 0;
let tickScheduled = false;

/** `session` has a reply at the head of its queue; it is written once the current batch ends. */
export function markReady(session: Flushable): void {
  ready.push(session);
  if (depth === 0 && !tickScheduled) {
    tickScheduled = true;
    process.nextTick(flushReady);
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
 * Runs `work(arg)` (a socket read's handling) and then writes every reply it completed. The
 * argument is passed, not captured, so a read costs no closure.
 */
export function inBatch<T>(work: (arg: T) => void, arg: T): void {
  if (depth === 0) batchStartedAt = performance.now();
  depth++;
  try {
    work(arg);
  } finally {
    if (--depth === 0) flushReady();
  }
}

function flushReady(): void {
  tickScheduled = false;
  while (ready.length > 0) {
    const batch = ready;
    ready = [];
    for (let i = 0; i < batch.length; i++) batch[i].flushReplies();
  }
}
