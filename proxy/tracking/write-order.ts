/**
 * The order keys are written in, as the proxy sends the writes: a node's change feed reports the
 * keys of one event-loop turn in one batch, sorted, while one Redis sends a default-mode client
 * one invalidation per key in the order the keys changed (`MSET b a` tells b first; a MULTI's
 * commands in turn). Keys written through this proxy are told in the order it sent them; keys it
 * never saw written (a script's own, another client of the node) follow, in the batch's order.
 */
const MAX_KEYS = 10_000;

export class WriteOrder {
  /** Key (latin1) -> when it was last written (a counter), oldest first. */
  private readonly seq = new Map<string, number>();
  private next = 0;

  note(key: Buffer): void {
    const k = key.toString('latin1');
    this.seq.delete(k); // re-inserted last: the Map stays in write order
    this.seq.set(k, this.next++);
    // A write that changed nothing leaves its keys here; the oldest go first.
    if (this.seq.size > MAX_KEYS) this.seq.delete(this.seq.keys().next().value as string);
  }

  /** `keys` (one batch) in write order; each key's record is used up. */
  sort(keys: Buffer[]): Buffer[] {
    if (keys.length < 2 || this.seq.size === 0) {
      for (const k of keys) this.seq.delete(k.toString('latin1'));
      return keys;
    }
    const order = keys.map((key, i) => {
      const k = key.toString('latin1');
      const at = this.seq.get(k);
      this.seq.delete(k);
      return { key, at: at ?? Number.MAX_SAFE_INTEGER, i };
    });
    order.sort((x, y) => x.at - y.at || x.i - y.i);
    return order.map((o) => o.key);
  }
}
