/**
 * A client's write during a migration's double-write or read-new phase, for keys whose owner in
 * ring B differs from their node in ring A (proxy/migration/converge.ts says why this converges):
 *
 *   on A, one burst on the client's lane:  MULTI, <the write>, SNAPSHOT key..., EXEC
 *   then on each key's B owner:            APPLY key snapshot
 *   then the client gets the write's reply (its element of EXEC's reply, forwarded untouched).
 *
 * MULTI makes each snapshot the state right after this very write, numbered v = (version before
 * the write) + 1, which is what makes `done` safe: once ring B is fenced, APPLY answers with the
 * last version B took. If that is >= v, an earlier-applied snapshot already carried this write;
 * if not, the write never reached B, and it is run again on B (now the only ring), exactly once.
 *
 * Writes of one turn to the same node on the same connection share the burst (converging-batch.ts:
 * MULTI, w1 ... wn, SNAPSHOT of all their keys, EXEC; then one APPLY per node of B), each client
 * getting its own element of EXEC's reply.
 *
 * Queue-time errors (EXECABORT) mean nothing ran: the client gets the write's own error (a shared
 * burst is first sent again a write at a time). A lost connection after the burst was written
 * leaves the outcome unknown: the client gets that error, and the keys are still copied (snapshot
 * and apply on their own) so B converges either way.
 */
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { requestRaw } from '../backend/request';
import { CopyTarget, missedByFence } from './copy-keys';
import { BurstResult, BurstWrite, sendConverging, sharesBursts } from './converging-batch';
import { Redirect, redirectOf } from './redirect';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

export class ConvergingWrite extends ReplySlot implements BurstWrite {
  /** Settles when the client's reply is known (read-new holds the session's next requests on it). */
  readonly settled: Promise<void>;
  private settle: () => void = () => undefined;

  constructor(
    private readonly ctx: ProxyContext,
    owner: ReplyOwner,
    readonly payload: Buffer,
    private address: string,
    readonly targets: readonly CopyTarget[],
    /** A script or function: it may write keys it does not declare, which the change feeds carry (change-copier.ts). */
    readonly undeclared = false,
    /**
     * Writes Redis may refuse when out of memory (denyoom) or not: only writes alike share a burst.
     * null: the write goes in a burst of its own.
     */
    private readonly oomClass: string | null = null,
  ) {
    super(owner);
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  get clientId(): number {
    return this.owner.id;
  }

  /** A cluster side A redirected the burst: nothing ran; these bound how often it is sent again. */
  private hops = 0;
  private failoverTries = 0;
  private asking = false;
  private readonly startedAt = Date.now();

  /** `alone`: in a burst of its own (sent again after a shared burst was refused, or a redirection). */
  start(alone = false): void {
    // The client's protocol lane: the reply is the client's, and its reads to A use the same lane.
    const conn = this.ctx.pool.connection(this.address, this.owner.id, this.owner.protocol);
    sendConverging(this.ctx, conn, this.address, alone || this.asking || this.undeclared ? null : this.group(), this, this.asking);
  }

  /** Which burst it may share: writes alike, on a ring side A (a cluster's slots may be moving: one burst each). */
  private group(): string | null {
    if (this.oomClass === null || (this.targets[0]?.fromOwners ?? null) !== null || !sharesBursts(this.address)) return null;
    return this.oomClass;
  }

  burstDone(r: BurstResult): void {
    this.settleWith(r).catch((err: unknown) => this.finish(encode.error(`ERR slotproxy: ${String(err)}`)));
  }

  private async settleWith(r: BurstResult): Promise<void> {
    switch (r.kind) {
      case 'failed':
        if (!r.written && this.waitsForFailover(r.message)) return;
        this.ctx.stats.backendErrors++;
        return this.finish(encode.error(r.message));
      case 'copy-failed':
        this.ctx.stats.backendErrors++;
        return this.finish(encode.error(errors.migrationCopyFailed(this.address, r.message)));
      case 'aborted': {
        // Nothing ran. In a shared burst, a write refused at queue time gets its own refusal; the
        // others (and a cluster's redirection) are sent again a write at a time.
        if (!r.alone) {
          if (r.queued[0] === 45 && redirectOf(r.queued, this.address) === null) return this.finish(r.queued);
          // A later request of the client is behind the burst already: sent again, this would run after it.
          if (!r.resendable) return this.finish(encode.error(errors.migrationBurstRefused(this.address)));
          return this.start(true);
        }
        // A cluster A's redirection is followed (any command of the burst may carry it, or EXEC
        // itself), else the write's own queueing error says why.
        const redirect = r.frames.map((f) => redirectOf(f, this.address)).find((x) => x !== null) ?? null;
        if (await this.followed(redirect)) return this.start(true);
        return this.finish(r.queued[0] === 45 ? r.queued : r.exec);
      }
      case 'ran':
        break;
    }
    // Fenced: ring B is the only ring now. Did an earlier snapshot carry this write there?
    const missed = missedByFence(r.outcomes, r.snapshots);
    if (missed === 'none') return this.finish(r.reply);
    // Snapshots taken after the burst (NOSCRIPT) cannot tell whether an earlier one carried it.
    if (missed === 'some' || !r.exact) return this.finish(encode.error(errors.migrationSwitchedMidWrite(this.targets[0].to)));
    // Run it once on B, where nothing of it arrived; its reply is the client's.
    try {
      this.finish(await requestRaw(this.ctx.pool.connection(this.targets[0].to, this.owner.id, this.owner.protocol), this.payload));
    } catch (err) {
      this.finish(encode.error(err instanceof Error ? err.message : String(err)));
    }
  }

  /**
   * Side A's node is a Sentinel master that could not be reached and nothing was written: the write
   * waits for the failover and goes to the promoted master, as a plain request does
   * (dispatch/forward.ts), up to ring.sentinel.failoverWaitMs; then Sentinel's clear error.
   */
  private waitsForFailover(message: string): boolean {
    const sentinel = this.ctx.sentinel;
    const window = sentinel?.waitWindowMs(this.address) ?? null;
    if (sentinel === null || window === null) return false;
    if (Date.now() - this.startedAt >= window) {
      this.finish(encode.error(sentinel.gaveUp(this.address, message)));
      return true;
    }
    this.ctx.stats.retries++;
    sentinel.retryAfter(this.address, Math.min(500, 20 * 2 ** this.failoverTries++), () => {
      this.address = sentinel.masterNow(this.address) ?? this.address;
      this.start(true);
    });
    return true;
  }

  /** True when the burst is to be sent again after `r` (bounded by the proxy's redirect limits). */
  private async followed(r: Redirect | null): Promise<boolean> {
    const { maxRedirects, retryWindowMs } = this.ctx.forward;
    if (r === null || this.hops++ >= maxRedirects || Date.now() - this.startedAt > retryWindowMs) return false;
    this.asking = r.kind === 'ask';
    if (r.kind === 'retry') await new Promise((resolve) => setTimeout(resolve, Math.min(500, 20 * 2 ** this.hops)));
    else {
      if (r.kind === 'moved') this.ctx.ring?.applyMoved(r.slot, r.address, this.address);
      this.address = r.address;
    }
    return true;
  }

  private finish(frame: Buffer): void {
    this.complete(frame);
    this.settle();
  }
}
