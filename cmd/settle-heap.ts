/**
 * Hands back the young generation that start-up grew, once the proxy sits idle after it.
 *
 * Loading the program grows V8's semi-spaces from 0.5 to 4 MiB (the modules' objects survive
 * scavenges). V8 shrinks them again only in a collection that finds the recent allocation rate
 * low, and an idle proxy makes no collection at all: it kept 8 MiB of young generation committed
 * for good (bench/NOTES.md, round 9). A few scavenges of an empty young generation (tens of µs
 * each) push start-up's samples out of V8's allocation-rate record, and the next one shrinks it.
 * Skipped while a client is connected: there the load sizes the young generation. Needs
 * `--expose-gc` (cmd/node-flags.ts); without it, nothing.
 */
import v8 from 'node:v8';

/** Past V8's 5 s allocation-rate window, counted from when the proxy serves. */
export const SETTLE_AFTER_MS = 6_000;
/** V8 keeps the last 10 collections' allocation samples; a few more than that. */
const MAX_SCAVENGES = 16;

function youngGenerationBytes(): number {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
}

export function settleHeapWhenIdle(idle: () => boolean): void {
  const collect = globalThis.gc;
  if (collect === undefined) return;
  setTimeout(() => {
    if (!idle()) return;
    const grown = youngGenerationBytes();
    // gc(true) is a scavenge on Node 20 (its V8 takes no options object).
    for (let i = 0; i < MAX_SCAVENGES && youngGenerationBytes() >= grown; i++) collect(true);
  }, SETTLE_AFTER_MS).unref();
}
