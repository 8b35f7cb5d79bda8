/**
 * FLUSHALL and FLUSHDB under client-side caching. One Redis tells every other tracking client of a
 * flush before it answers, and forgets its whole tracking table. Through the proxy each node's
 * feed tells it on its own connection, maybe after the reply: a read sent after the reply would
 * then be forgotten by a node's late null. So a flush's reply waits, in a place of its own before
 * it (a gate), until every feed up when it was sent has told it (or HOLD_MAX_MS).
 */
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { versionAtLeast } from '../resp/backend-version';

/** Longest a flush's reply waits for the feeds (a node that refused the flush tells nothing). */
const HOLD_MAX_MS = 1000;

interface Gate<F> {
  readonly slot: ReplySlot;
  readonly waiting: Set<F>;
}

/** `F`: a node's change feed. */
export class FlushGates<F> {
  private readonly gates: Gate<F>[] = [];

  /** A flush is about to be dispatched: its reply waits behind a place tracked now, for `feeds`. */
  open(client: ReplyOwner & { track<S extends ReplySlot>(slot: S): S }, feeds: F[]): void {
    if (feeds.length === 0) return;
    const gate = { slot: client.track(new ReplySlot(client)), waiting: new Set(feeds) };
    this.gates.push(gate);
    setTimeout(() => this.pass(gate), HOLD_MAX_MS).unref();
  }

  /** `feed` told a flush, or went away: gates waiting for it need it no more. */
  told(feed: F): void {
    for (const gate of [...this.gates]) {
      gate.waiting.delete(feed);
      if (gate.waiting.size === 0) this.pass(gate);
    }
  }

  private pass(gate: Gate<F>): void {
    const at = this.gates.indexOf(gate);
    if (at >= 0) this.gates.splice(at, 1);
    gate.slot.complete(Buffer.alloc(0));
  }
}

/** FLUSHALL or FLUSHDB as a node runs it (no argument, SYNC or ASYNC): every node's feed tells it. */
export function isFlush(name: string, args: readonly Buffer[]): boolean {
  if (name !== 'flushall' && name !== 'flushdb') return false;
  if (args.length === 1) return true;
  const mode = args.length === 2 ? args[1].toString('latin1').toLowerCase() : '';
  return mode === 'sync' || mode === 'async';
}

/**
 * Redis 7.4 and later (not Valkey 8) run a SYNC flush in the background and answer once it is
 * done: the flushing client's own null invalidation comes before the reply. SYNC: the argument, or
 * none with lazyfree-lazy-user-flush off. (Inside MULTI a flush is never run that way.)
 */
export function flushTellsFirst(backend: { name: string; version: string }, args: readonly Buffer[], lazyUserFlush: boolean): boolean {
  if (backend.name !== 'redis' || !versionAtLeast(backend.version, 7, 4)) return false;
  if (args.length === 1) return !lazyUserFlush;
  return args.length === 2 && args[1].toString('latin1').toLowerCase() === 'sync';
}
