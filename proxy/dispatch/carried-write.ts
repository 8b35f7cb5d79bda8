/**
 * A write answered after side A alone (double-write, while no proxy of the fleet reads from B): it
 * is forwarded to A as without a migration, and the node's change feed carries the key to B
 * (proxy/migration/change-copier.ts: SNAPSHOT "only if changed" on A, APPLY on B, newest version wins). Exact for
 * the same reason a write made straight on A's node is: the node names the key on its feed after
 * the write, the copier snapshots it after hearing that, so the snapshot holds the write (or a
 * later state), and B keeps the highest-numbered snapshot it sees.
 *
 * What it gives up is read-your-writes on B, which nothing needs while every proxy reads from A.
 * Before any proxy reads from B, the fleet's read barrier (proxy/migration/read-barrier.ts) turns every proxy's
 * writes back into converging ones (proxy/migration/converging-write.ts: answered once B holds them) and waits
 * until the carried writes in flight are answered and the feeds have copied what they heard.
 * The ring router's CarryState (proxy/ring/carry-state.ts) counts them for that wait; it reaches
 * this file as the start.ts decision hands it over (`CarriedCount`), so dispatch needs no ring import.
 */

/** What counts carried writes in flight (proxy/ring/carry-state.ts). */
export interface CarriedCount {
  /** `heldForB`: the reply waits until B holds the write. */
  begin(heldForB: boolean): void;
  end(heldForB: boolean): void;
  /** Resolves once no proxy of the fleet reads from B (a reply held for B may go then). */
  answeredAfterA(): Promise<void>;
}
import { ForwardedCommand } from './forward';
import { ProxyContext } from '../context';
import { ReplyOwner } from '../client/reply-slot';
import * as encode from '../resp/encode';

/**
 * A write forwarded to side A's node, counted in `carried` until its reply is known. With
 * `waitOnB` (the replication carry while some proxy may read from B) its reply is held until the
 * node's changes before now are on B (ProxyContext.changes.after: its follower's applied offset).
 */
export class CarriedWrite extends ForwardedCommand {
  private counted = true;
  private settled = false;
  private settle: (() => void) | null = null;
  private waited: Promise<void> | null = null;

  constructor(
    ctx: ProxyContext,
    owner: ReplyOwner,
    payload: Buffer,
    shard: number,
    private readonly carried: CarriedCount,
    private readonly waitOnB = false,
    /** Double-write: a reply held for B also goes once no proxy reads from B (CarriedCount.answeredAfterA). */
    private readonly releasedWithoutB = false,
  ) {
    super(ctx, owner, payload, shard, false);
    carried.begin(waitOnB);
  }

  /** A carried write goes to side A in every phase (read-new included): A's stream carries it to B. */
  protected override nodeOf(shard: number): string | null {
    return this.ctx.ring?.placement.writeAddress(shard) ?? super.nodeOf(shard);
  }

  /**
   * Resolves once the reply is given (with waitOnB: once the write is on B, or why not was said).
   * Made when asked: only a read-new client's next requests wait for it, not every write.
   */
  get onB(): Promise<void> {
    this.waited ??= this.settled ? Promise.resolve() : new Promise((resolve) => (this.settle = resolve));
    return this.waited;
  }

  override complete(frame: Buffer): void {
    const after = this.waitOnB && frame[0] !== 45 ? this.ctx.changes?.after(this.node) ?? null : null;
    if (after === null) return this.finish(frame);
    const held = this.releasedWithoutB ? Promise.race([after, this.carried.answeredAfterA().then(() => null)]) : after;
    void held.then((problem) => this.finish(problem === null ? frame : encode.error(`ERR slotproxy: the write ran on ${this.node} but its copy to side B was not confirmed: ${problem}`)));
  }

  private finish(frame: Buffer): void {
    super.complete(frame);
    this.settled = true;
    this.settle?.();
    if (!this.counted) return;
    this.counted = false;
    this.carried.end(this.waitOnB);
  }
}
