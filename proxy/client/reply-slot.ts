/**
 * A place in a session's reply order. A session appends one slot per request, in request order,
 * and writes replies to its client strictly from the head, so replies come back in request order
 * whichever node (or the proxy itself) answers first.
 */
export interface ReplyOwner {
  /** Used to pin the session to the same shared back-end connection on every node. */
  readonly id: number;
  /** The client's RESP version (HELLO 3 makes it 3): forwarded replies must come from a back-end connection speaking it. */
  protocol: 2 | 3;
  onSlotFilled(slot: ReplySlot): void;
  /** A CLIENT TRACKING client: its reads go to masters, never to a replica that may lag behind an invalidation. */
  readonly readsMasterOnly?: boolean;
}

export class ReplySlot {
  reply: Buffer | null = null;
  /** CLIENT REPLY OFF or SKIP: the reply keeps its place in the order but is not written. */
  silent = false;
  /** Run once the reply is in, after the owner heard of it (MONITOR's line: dispatch/monitor.ts). */
  onFilled: ((reply: Buffer) => void) | null = null;

  constructor(readonly owner: ReplyOwner) {}

  /** Fills the slot; only the first reply counts. */
  complete(frame: Buffer): void {
    if (this.reply !== null) return;
    this.reply = frame;
    this.owner.onSlotFilled(this);
    if (this.onFilled !== null) this.onFilled(frame);
  }
}

/** A slot whose reply has not come yet. */
export function isUnanswered(slot: ReplySlot): boolean {
  return slot.reply === null;
}
