/**
 * Promises of "every command through this offset is on B" (follow.ts appliedThrough), released as
 * the offset advances. Kept in offset order (barriers read A's offset as it grows, so nearly every
 * wait goes at the end): a release, which runs for every command applied, looks at the head only,
 * however many clients wait (in read-new, every write in flight).
 */
interface Waiter {
  offset: number;
  done: () => void;
}

export class OffsetWaiters {
  private waiting: Waiter[] = [];
  /** waiting[head] is the lowest offset still waited for. */
  private head = 0;

  wait(offset: number): Promise<void> {
    return new Promise((done) => this.insert({ offset, done }));
  }

  /** Resolves every wait at or below `applied`. */
  release(applied: number): void {
    const waiting = this.waiting;
    let i = this.head;
    if (i === waiting.length || waiting[i].offset > applied) return;
    while (i < waiting.length && waiting[i].offset <= applied) waiting[i++].done();
    this.head = i;
    if (i === waiting.length) this.clear();
    else if (i > 1024 && i * 2 > waiting.length) this.compact();
  }

  /** The follow ended: every wait resolves. */
  releaseAll(): void {
    const waiting = this.waiting;
    const from = this.head;
    this.clear();
    for (let i = from; i < waiting.length; i++) waiting[i].done();
  }

  private insert(w: Waiter): void {
    const waiting = this.waiting;
    if (waiting.length === this.head || waiting[waiting.length - 1].offset <= w.offset) {
      waiting.push(w);
      return;
    }
    // An offset read earlier answered later: its place by binary search, after equal ones.
    let lo = this.head;
    let hi = waiting.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (waiting[mid].offset <= w.offset) lo = mid + 1;
      else hi = mid;
    }
    waiting.splice(lo, 0, w);
  }

  private clear(): void {
    this.waiting = [];
    this.head = 0;
  }

  private compact(): void {
    this.waiting = this.waiting.slice(this.head);
    this.head = 0;
  }
}
