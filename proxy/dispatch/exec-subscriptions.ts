/**
 * (P|S)(UN)SUBSCRIBE inside MULTI. One Redis queues them and runs them at EXEC, and their
 * confirmations are written inside EXEC's reply, in their commands' places (the array counts one
 * element per command, even when a command names several channels and writes one confirmation
 * each: redis/redis#12207). Through the proxy the node runs the other commands, so the client's
 * EXEC reply is cut at those places: the part up to the first one is EXEC's own slot, the
 * confirmations go in the slots the subscription tracks, and the node's remaining elements in
 * places tracked after them. They run when EXEC is sent, so a transaction that may not run (one
 * with WATCH) refuses them when they are queued (transaction.ts).
 */
import { ReplySlot, ReplyOwner } from '../client/reply-slot';
import { arrayElements } from '../resp/reply-framer';

/** A subscription command queued in MULTI: its place among the queued commands, and how it runs. */
export interface QueuedSubscription {
  /** Its index among every command queued (the node's and these). */
  readonly at: number;
  /** Runs it as outside MULTI (the subscription tracks its confirmations' places). */
  readonly run: () => void;
}

export const SUBSCRIPTION_COMMANDS: ReadonlySet<string> = new Set(['subscribe', 'unsubscribe', 'psubscribe', 'punsubscribe', 'ssubscribe', 'sunsubscribe']);

/** EXEC's reply cut around the subscriptions: made when EXEC is sent, filled when the node answers. */
export class ExecSubscriptions {
  /** parts[k]: the node's elements after the k-th subscription command (before the next one). */
  private readonly parts: ReplySlot[] = [];

  /** `total`: commands queued, the node's and the subscriptions. Call right after EXEC's own slot is tracked. */
  constructor(
    owner: ReplyOwner & { track<S extends ReplySlot>(slot: S): S },
    private readonly subscriptions: readonly QueuedSubscription[],
    private readonly total: number,
  ) {
    for (const s of subscriptions) {
      s.run();
      this.parts.push(owner.track(new ReplySlot(owner)));
    }
  }

  /** The node's EXEC reply: what EXEC's own slot gets; the parts are filled. */
  split(frame: Buffer): Buffer {
    const elements = frame[0] === 42 /* * */ ? arrayElements(frame) : null;
    const ran = elements !== null && elements.length === this.total - this.subscriptions.length;
    if (!ran) {
      // Nothing ran (an error, nil): the subscriptions already did; their places carry nothing more.
      for (const p of this.parts) p.complete(Buffer.alloc(0));
      return frame;
    }
    const cuts: Buffer[][] = [[]];
    let next = 0;
    for (let i = 0; i < this.total; i++) {
      if (next < this.subscriptions.length && this.subscriptions[next].at === i) {
        next++;
        cuts.push([]);
      } else cuts[cuts.length - 1].push(elements.shift() as Buffer);
    }
    this.parts.forEach((p, k) => p.complete(Buffer.concat(cuts[k + 1])));
    return Buffer.concat([Buffer.from(`*${this.total}\r\n`), ...cuts[0]]);
  }
}
