/**
 * Whether this proxy answers double-write's writes after side A alone (proxy/dispatch/carried-write.ts), and how
 * many such writes are in flight: the fleet's read barrier (proxy/migration/read-barrier.ts) waits for them.
 */
export class CarryState {
  /**
   * False while some proxy of the fleet may read from B (a read barrier heard, a proxy in
   * read-new), at start and after every switch: writes converge then. The copier's fleet check
   * (read-barrier.ts) sets it once no proxy reads from B.
   */
  answerAfterA = false;
  /**
   * migration.carry: replication: side A's nodes are followed as replicas (migration/follow.ts), so
   * every write is forwarded to A alone, and a write that must be on B before its reply waits for
   * its node's applied offset instead of converging.
   */
  replication = false;
  /** Why this carry (migration/carry-choice.ts), for INFO and `migrate status`. */
  why = '';
  /** migration.spool: where a follow's snapshot and stream wait for side B, and how much of the stream (null: the defaults). */
  spool: { dir?: string; maxBytes: number } | null = null;
  /** Bumped whenever writes must converge again: a fleet check begun before may not lift that. */
  epoch = 0;
  private inFlight = 0;
  private released: { promise: Promise<void>; resolve: () => void } | null = null;
  private waiters: (() => void)[] = [];
  /** Of `inFlight`, the writes not held for B, and who waits for none of them. */
  private afterA = 0;
  private afterAWaiters: (() => void)[] = [];

  /** From now on writes converge (answered once B holds them), until the next fleet check says otherwise. */
  converge(): void {
    this.answerAfterA = false;
    this.epoch++;
  }

  /** No proxy reads from B (as found by a check begun at `epoch`): writes are answered after A. */
  answerAfterAFrom(epoch: number): void {
    if (epoch !== this.epoch) return;
    this.answerAfterA = true;
    const released = this.released;
    this.released = null;
    released?.resolve();
  }

  /**
   * Resolves once writes are answered after A again (answerAfterAFrom). Under the replication
   * carry a double-write reply held for B is released by it too: once no proxy of the fleet reads
   * from B, nothing needs the write on B first (a proxy at start, before its fleet check, would
   * otherwise hold every write until its followers' full syncs end). Shared by every held write.
   */
  answeredAfterA(): Promise<void> {
    if (this.answerAfterA) return Promise.resolve();
    if (this.released === null) {
      let resolve: () => void = () => undefined;
      const promise = new Promise<void>((r) => (resolve = r));
      this.released = { promise, resolve };
    }
    return this.released.promise;
  }

  /** `heldForB`: its reply waits until B holds it (replication carry, converging): the read barrier need not wait for it. */
  begin(heldForB = false): void {
    this.inFlight++;
    if (!heldForB) this.afterA++;
  }

  end(heldForB = false): void {
    if (!heldForB && --this.afterA === 0) for (const w of this.afterAWaiters.splice(0)) w();
    if (--this.inFlight > 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** Null when no carried write is in flight, else a promise that resolves when none is. */
  drained(): Promise<void> | null {
    if (this.inFlight === 0) return null;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * As drained, for the writes that may be answered before B holds them only: under a steady load
   * on the replication carry, writes held for B keep coming and the count of all might never reach 0.
   */
  drainedAfterA(): Promise<void> | null {
    if (this.afterA === 0) return null;
    return new Promise((resolve) => this.afterAWaiters.push(resolve));
  }
}
