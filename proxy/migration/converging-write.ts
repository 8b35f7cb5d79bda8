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
 * Queue-time errors (EXECABORT) mean nothing ran: the client gets the write's own error. A lost
 * connection after the burst was written leaves the outcome unknown: the client gets that error,
 * and the keys are still copied (snapshot and apply on their own) so B converges either way.
 */
import { BackendRequest } from '../backend/connection';
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { arrayElements } from '../resp/reply-framer';
import { requestRaw } from '../backend/request';
import { ApplyOutcome, Snapshot, parseSnapshot, snapshotCommand } from './converge';
import { CopyTarget, applySnapshots, missedByFence, snapshotThenApply } from './copy-keys';
import { Redirect, redirectOf } from './redirect';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';

const MULTI = encode.command(['MULTI']);
const ASKING = encode.command(['ASKING']);
const EXEC = encode.command(['EXEC']);

/** One command of the burst: its reply frame, or the failure. */
class Part implements BackendRequest {
  frame: Buffer | null = null;
  failure: { message: string; written: boolean } | null = null;

  constructor(readonly payload: Buffer, private readonly done: () => void) {}

  onReply(frame: Buffer): void {
    this.frame = frame;
    this.done();
  }

  onFailure(message: string, written: boolean): void {
    this.failure = { message, written };
    this.done();
  }
}

export class ConvergingWrite extends ReplySlot {
  /** Settles when the client's reply is known (read-new holds the session's next requests on it). */
  readonly settled: Promise<void>;
  private settle: () => void = () => undefined;

  constructor(
    private readonly ctx: ProxyContext,
    owner: ReplyOwner,
    private readonly payload: Buffer,
    private address: string,
    private readonly targets: readonly CopyTarget[],
    /** A script or function: it may write keys it does not declare, which the change feeds carry (change-copier.ts). */
    private readonly undeclared = false,
  ) {
    super(owner);
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  /** A cluster side A redirected the burst: nothing ran; these bound how often it is sent again. */
  private hops = 0;
  private asking = false;
  private readonly startedAt = Date.now();

  start(): void {
    // The client's protocol lane: the reply is the client's, and its reads to A use the same lane.
    const conn = this.ctx.pool.connection(this.address, this.owner.id, this.owner.protocol);
    let missing = 3 + this.targets.length;
    const parts: Part[] = [];
    const done = (): void => {
      if (--missing === 0) this.burstDone(parts).catch((err: unknown) => this.finish(encode.error(`ERR slotproxy: ${String(err)}`)));
    };
    // ASK: ASKING holds for a whole MULTI (Redis keeps the flag until EXEC).
    if (this.asking) conn.send({ payload: ASKING, onReply: () => undefined, onFailure: () => undefined });
    parts.push(new Part(MULTI, done), new Part(this.payload, done));
    for (const t of this.targets) parts.push(new Part(encode.command(snapshotCommand(t.key, false, t.fromBook)), done));
    parts.push(new Part(EXEC, done));
    // Adjacent on one connection, sent in one turn: nothing of this lane's other clients between.
    for (const p of parts) conn.send(p);
  }

  private async burstDone(parts: Part[]): Promise<void> {
    const write = parts[1];
    const exec = parts[parts.length - 1];
    const failed = parts.find((p) => p.failure !== null)?.failure ?? null;
    if (failed !== null) {
      this.ctx.stats.backendErrors++;
      // EXEC never reached A: the node dropped the MULTI with the connection, nothing ran.
      if (exec.failure !== null && !exec.failure.written) {
        this.finish(encode.error(failed.message));
        return;
      }
      // It may have run on A: bring B up to date all the same, then pass the failure on.
      await snapshotThenApply(this.ctx, this.owner.id, this.targets).catch(() => undefined);
      this.finish(encode.error(failed.message));
      return;
    }
    const elements = arrayElements(exec.frame as Buffer);
    if (elements === null || elements.length !== 1 + this.targets.length) {
      // EXECABORT (nothing ran): a cluster A's redirection is followed, else the write's own queueing error says why.
      const queued = write.frame as Buffer;
      // Any command of the burst may carry it (the write, or a snapshot), or EXEC itself.
      const redirect = parts.slice(1).map((p) => redirectOf(p.frame, this.address)).find((r) => r !== null) ?? null;
      if (await this.followed(redirect)) return this.start();
      this.finish(queued[0] === 45 ? queued : (exec.frame as Buffer));
      return;
    }
    const reply = elements[0];
    let snapshots: Snapshot[];
    try {
      snapshots = elements.slice(1).map(parseSnapshot);
    } catch (err) {
      this.finish(encode.error(errors.migrationCopyFailed(this.address, String(err))));
      return;
    }
    let outcomes: ApplyOutcome[];
    try {
      if (this.undeclared) await this.undeclaredCopied();
      outcomes = await applySnapshots(this.ctx, this.owner.id, this.targets, snapshots);
    } catch (err) {
      this.ctx.stats.backendErrors++;
      this.finish(encode.error(errors.migrationCopyFailed(this.address, err instanceof Error ? err.message : String(err))));
      return;
    }
    // Fenced: ring B is the only ring now. Did an earlier snapshot carry this write there?
    const missed = missedByFence(outcomes, snapshots);
    if (missed === 'none') {
      this.finish(reply);
      return;
    }
    if (missed === 'some') {
      this.finish(encode.error(errors.migrationSwitchedMidWrite(this.targets[0].to)));
      return;
    }
    // Run it once on B, where nothing of it arrived; its reply is the client's.
    try {
      this.finish(await requestRaw(this.ctx.pool.connection(this.targets[0].to, this.owner.id, this.owner.protocol), this.payload));
    } catch (err) {
      this.finish(encode.error(err instanceof Error ? err.message : String(err)));
    }
  }

  /**
   * A script's undeclared keys reach B before its declared ones are applied: should B be fenced
   * for `done` meanwhile, the declared APPLYs then all come after the fence, so the script counts
   * as missed and runs once on B, whole (its undeclared writes carried either way).
   */
  private async undeclaredCopied(): Promise<void> {
    const problem = await (this.ctx.changes?.after(this.address) ?? null);
    if (problem !== null) throw new Error(problem);
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
