/**
 * A FIFO with O(1) push and shift. Array#shift is O(n) once V8 leaves its fast path, and the
 * back-end in-flight queue can hold tens of thousands of entries under pipelining.
 */
/**
 * What an empty queue holds: shared and never written (push replaces it), so the many queues that
 * sit empty (one per idle client) hold no array of their own. Not frozen: a frozen array has
 * another elements kind, which would make every access to `items` polymorphic.
 */
const EMPTY: undefined[] = [];

export class Queue<T> {
  private items: (T | undefined)[] = EMPTY as (T | undefined)[];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    if (this.items === EMPTY) this.items = [item];
    else this.items.push(item);
  }

  peek(): T | undefined {
    return this.items[this.head];
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined;
    this.head++;
    if (this.head === this.items.length) {
      this.items = EMPTY as (T | undefined)[];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Whether an item passes `test`. */
  some(test: (item: T) => boolean): boolean {
    for (let i = this.head; i < this.items.length; i++) if (test(this.items[i] as T)) return true;
    return false;
  }

  /** Empties the queue, returning what it held in order. */
  drain(): T[] {
    const out = this.items.slice(this.head) as T[];
    this.items = EMPTY as (T | undefined)[];
    this.head = 0;
    return out;
  }
}
