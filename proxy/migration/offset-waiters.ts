/** Promises of "every command through this offset is on B" (follow.ts appliedThrough), released as the offset advances. */
export class OffsetWaiters {
  private waiting: { offset: number; done: () => void }[] = [];

  wait(offset: number): Promise<void> {
    return new Promise((done) => this.waiting.push({ offset, done }));
  }

  /** Resolves every wait at or below `applied`. */
  release(applied: number): void {
    if (this.waiting.length === 0) return;
    const still: typeof this.waiting = [];
    for (const w of this.waiting) (w.offset <= applied ? w.done : () => still.push(w))();
    this.waiting = still;
  }

  /** The follow ended: every wait resolves. */
  releaseAll(): void {
    for (const w of this.waiting.splice(0)) w.done();
  }
}
