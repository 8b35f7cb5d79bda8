/**
 * EXEC: the queued commands sent as one burst on one connection (the client's lane, or its WATCH
 * connection), the node's EXEC reply forwarded; during a migration the written moving keys are
 * copied to side B first (proxy/migration/converging-exec.ts), and the commands that reach several
 * nodes run on the others after it, merged into their places (transaction-state.ts, Spread).
 */
import { convergeExec, execTargets } from '../migration/converging-exec';
import { arrayElements } from '../resp/reply-framer';
import { requestRaw } from '../backend/request';
import { everyNode as everyNodeOf } from './every-node';
import { ProxyContext } from '../context';
import { ReplySlot } from '../client/reply-slot';
import { BackendConnection } from '../backend/connection';
import { scriptLoadRequest } from './script-call';
import { PROMOTION_CHECK_MS, noteMoved, refreshSlotMaps } from './forward';
import { Transaction, TransactionClient, UNBOUND, writeNodeOf } from './transaction-state';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { afterCopy, execWaitsForB } from '../migration/after-copy';
import { FailoverWait } from './failover-wait';
import { ExecSubscriptions } from './exec-subscriptions';
import { pubsubHome } from '../pubsub/pubsub-placement';

const MULTI = encode.command(['MULTI']);
const EXEC = encode.command(['EXEC']);
const RETRY_DELAY_MS = 25;
const RETRY_CAP_MS = 500;

function isExecAbort(frame: Buffer): boolean {
  return frame[0] === 45 && frame.toString('latin1', 1, 10) === 'EXECABORT';
}

/** EXEC answered CLUSTERDOWN or TRYAGAIN: the node ran nothing of the transaction. */
export function isClusterDown(frame: Buffer): boolean {
  return frame[0] === 45 && (frame.toString('latin1', 1, 12) === 'CLUSTERDOWN' || frame.toString('latin1', 1, 9) === 'TRYAGAIN');
}

/** The transaction's shard under the current placement (a phase switch renumbers ring shards). */
function currentShard(ctx: ProxyContext, txn: Transaction): number | null {
  if (ctx.ring === null || txn.keys.length === 0) return txn.shard;
  const shard = ctx.router.shardOf(txn.keys[0]);
  for (let i = 1; i < txn.keys.length; i++) if (ctx.router.shardOf(txn.keys[i]) !== shard) return null;
  return shard;
}

/** EXEC: the queued commands sent as one burst, the node's EXEC reply forwarded. */
export class ExecCommand extends ReplySlot {
  private attempts = 0;
  private readonly firstSentAt = Date.now();
  /** Made when the transaction's node is first found down (a Sentinel master's: it waits for the successor). */
  private failover: FailoverWait | null = null;
  private settle: () => void = () => undefined;
  /** Settles once the client's reply is known. */
  private readonly settled = new Promise<void>((resolve) => (this.settle = resolve));

  constructor(private readonly ctx: ProxyContext, private readonly session: TransactionClient, private readonly txn: Transaction) {
    super(session);
  }

  /** (P|S)(UN)SUBSCRIBE queued: run now, their confirmations placed inside the reply. */
  private subscriptions: ExecSubscriptions | null = null;

  /** Returns a promise when the session's next requests must wait for this EXEC (call right after tracking it). */
  start(): Promise<void> | undefined {
    const { ctx, txn } = this;
    if (txn.subscriptions.length > 0 && this.subscriptions === null) {
      this.subscriptions = new ExecSubscriptions(this.session, txn.subscriptions, txn.queued.length + txn.subscriptions.length);
    }
    // Side A is closing for done: the transaction runs once the hold ends, where writes go then.
    const held = txn.written.length > 0 || txn.writesUndeclared ? (ctx.ring?.writesHeld ?? null) : null;
    if (held !== null) return held.then(() => this.start());
    const link = txn.watch;
    if (txn.doomed) {
      this.finish(this.notRun());
      return undefined;
    }
    const shard = currentShard(ctx, txn);
    if (shard === null) {
      this.finish(encode.error(errors.execAbort(errors.CROSSSLOT)));
      return undefined;
    }
    let address: string | null;
    if (shard !== UNBOUND) address = writeNodeOf(ctx, shard);
    else if (link !== null) address = link.address;
    else {
      // PUBLISH counts the subscribers of its node: with no key binding it elsewhere, the home's (dispatch/pubsub.ts).
      const masters = ctx.router.masters();
      address = txn.asksHome ? pubsubHome(ctx) : masters.length === 0 ? null : masters[this.session.id % masters.length];
    }
    if (address === null) {
      this.finish(encode.error(errors.SLOT_NOT_SERVED));
      return undefined;
    }
    // Sentinel is promoting this master's replica (a planned failover): what the master
    // acknowledged now would be dropped when it is made a replica. The transaction waits for the
    // move, as a plain write does, and the client's next requests wait for it.
    const sentinel = ctx.sentinel;
    if (sentinel !== null && sentinel.holdsWrites(address)) {
      sentinel.retryAfter(address, PROMOTION_CHECK_MS, () => void this.start());
      return this.settled;
    }
    if (link !== null && ctx.ring !== null && link.address !== address) {
      // A phase switch moved where these keys are written since WATCH: what was watched no longer
      // guards them, so the transaction fails as when a watched key was touched.
      this.finish(this.session.protocol === 3 ? encode.RESP3_NULL : encode.NULL_ARRAY);
      return undefined;
    }
    const conn = link?.conn ?? ctx.pool.connection(address, this.session.id, this.session.protocol);
    const targets = execTargets(ctx, txn.written);
    if (targets.length > 0) {
      let redirected = false;
      const note = (c: BackendConnection) => (frame: Buffer): void => {
        if (this.noteRedirect(frame, c)) redirected = true;
      };
      const burst = { conn, address, sendQueued: (c: BackendConnection) => this.sendQueued(c, note(c)), queuedCount: txn.queued.length, watched: link !== null, onQueued: note(conn), undeclared: txn.writesUndeclared };
      convergeExec(ctx, this.session, burst, targets, (frame) => {
        // A cluster side A redirected a queued command: nothing ran, send it all again (bounded).
        if (((redirected && isExecAbort(frame)) || isClusterDown(frame)) && link === null && this.mayRetry(address)) return;
        // convergeExec already waited for the node's changes before its APPLYs.
        this.finishExec(link !== null && (isClusterDown(frame) || (redirected && isExecAbort(frame))) ? this.notRun() : frame, address, true);
      });
      return this.hold();
    }
    this.send(conn, address, link === null);
    return execWaitsForB(ctx, txn.written.length > 0, txn.writesUndeclared) ? this.hold() : undefined;
  }

  /** In a ring migration reading from ring B, the session's next requests wait for EXEC's copy there. */
  private hold(): Promise<void> | undefined {
    this.ctx.ring?.track(this.settled);
    return this.ctx.ring?.placement.phase === 'read-new' ? this.settled : undefined;
  }

  /** SCRIPT LOADs, MULTI and the queued commands on `conn`, EXEC not included; `onQueued` sees each queue-time reply. */
  private sendQueued(conn: BackendConnection, onQueued: (frame: Buffer) => void = () => undefined): void {
    for (const sha of this.txn.shas) {
      const body = this.ctx.scripts.get(sha);
      if (body !== undefined) conn.send(scriptLoadRequest(body));
    }
    conn.send({ payload: MULTI, onReply: onQueued, onFailure: () => undefined });
    for (const payload of this.txn.queued) conn.send({ payload, onReply: onQueued, onFailure: () => undefined });
  }

  /**
   * Nothing of the transaction ran (a redirection, or a cluster that is down or failing over):
   * sends it all again after a backoff, while the retry window lasts (at least the old bound of
   * maxRedirects + 3 tries), or for a Sentinel master's server while its failover wait lasts. False
   * once it is spent: the client gets the node's answer.
   */
  private mayRetry(address: string): boolean {
    const failover = this.failoverWait();
    if (failover.applies(address)) return failover.retry(address, () => void this.start());
    const { maxRedirects, retryWindowMs } = this.ctx.forward;
    if (this.attempts >= maxRedirects + 3 && Date.now() - this.firstSentAt >= retryWindowMs) return false;
    this.attempts++;
    setTimeout(() => this.start(), Math.min(RETRY_CAP_MS, RETRY_DELAY_MS * this.attempts));
    return true;
  }

  /**
   * True when a queue-time reply says the node cannot take the transaction now, so nothing of it
   * will run: a redirection (the slot map learns a MOVED, a refresh is asked for the rest), or a
   * node in a failover's middle (a demoted master's READONLY, MASTERDOWN, LOADING).
   */
  private noteRedirect(frame: Buffer, conn: BackendConnection): boolean {
    const ctx = this.ctx;
    if (frame[0] !== 45) return false;
    const text = frame.toString('latin1', 1, Math.min(frame.length, 40));
    if (text.startsWith('MOVED ')) {
      const [, slot, target] = frame.toString('latin1', 1, frame.length - 2).split(' ');
      noteMoved(ctx, Number(slot), target, conn.address);
      return true;
    }
    if (/^(TRYAGAIN|CLUSTERDOWN|ASK |READONLY|MASTERDOWN|LOADING)/.test(text)) {
      refreshSlotMaps(ctx);
      // A Sentinel master demoted behind the proxy's back: its master is asked for again.
      if (text.startsWith('READONLY')) ctx.sentinel?.demoted(conn.address);
      return true;
    }
    return false;
  }

  private send(conn: BackendConnection, address: string, retryable: boolean): void {
    let redirected = false;
    this.sendQueued(conn, (frame) => {
      if (this.noteRedirect(frame, conn)) redirected = true;
    });
    conn.send({
      payload: EXEC,
      onReply: (frame) => {
        if (((isExecAbort(frame) && redirected) || isClusterDown(frame)) && retryable && this.mayRetry(address)) return;
        this.finishExec(!retryable && (isClusterDown(frame) || (redirected && isExecAbort(frame))) ? this.notRun() : frame, address);
      },
      onFailure: (message, written) => this.failed(address, message, written, retryable),
    });
  }

  /**
   * The burst's connection failed. Written, EXEC may have run: the error says so. Not written (a
   * Sentinel master that died or moved), nothing ran: the transaction waits for the successor and
   * is sent there, as a plain command waits; a WATCHed one cannot be (its watches went with the
   * connection) and answers nil, as when a watched key was touched, so the client starts over.
   */
  private failed(address: string, message: string, written: boolean, retryable: boolean): void {
    const failover = this.failoverWait();
    if (!written && failover.applies(address)) {
      if (!retryable) return this.finish(this.notRun());
      if (failover.retry(address, () => void this.start())) return;
    }
    this.finish(encode.error(failover.gaveUp(address, message)));
  }

  private failoverWait(): FailoverWait {
    return (this.failover ??= new FailoverWait(this.ctx));
  }

  /**
   * A WATCHed EXEC the cluster refused (CLUSTERDOWN, TRYAGAIN, or a redirection met while queuing:
   * its keys' master failed over or the slot moved) ran nothing, and its watches cannot
   * be carried to a new connection: it answers nil, as when a watched key was touched, and the
   * client's retry starts over with a new WATCH.
   */
  private notRun(): Buffer {
    return this.session.protocol === 3 ? encode.RESP3_NULL : encode.NULL_ARRAY;
  }

  /** EXEC's reply from the transaction's node at `address`; commands that reach several nodes run on the others now. */
  private finishExec(frame: Buffer, address: string, copied = false): void {
    if (!copied && execWaitsForB(this.ctx, this.txn.written.length > 0, this.txn.writesUndeclared)) {
      // A script inside: EXEC's reply waits until the node's changes are on side B.
      void afterCopy(this.ctx, address, frame).then((held) => this.finishExecNow(held, address));
      return;
    }
    this.finishExecNow(frame, address);
  }

  private finishExecNow(frame: Buffer, address: string): void {
    const spread = this.txn.spread;
    const elements = spread.size === 0 ? null : arrayElements(frame);
    if (elements === null || elements.length !== this.txn.queued.length) return this.finish(frame);
    const others = (everyNode: boolean): string[] => (everyNode ? everyNodeOf(this.ctx) : [...this.ctx.router.masters()]).filter((a) => a !== address);
    const merged = [...spread].map(async ([index, { merge, everyNode }]) => {
      const frames = await Promise.all(
        others(everyNode).map((a) => requestRaw(this.ctx.pool.connection(a, this.session.id), this.txn.queued[index]).catch((err: Error) => encode.error(err.message))),
      );
      try {
        elements[index] = merge([elements[index], ...frames]);
      } catch (err) {
        elements[index] = encode.error(`ERR slotproxy: cannot merge replies: ${(err as Error).message}`);
      }
    });
    void Promise.all(merged).then(() => this.finish(encode.arrayOfFrames(elements)));
  }

  private finish(frame: Buffer): void {
    this.txn.release();
    this.complete(this.subscriptions === null ? frame : this.subscriptions.split(frame));
    this.settle();
  }
}
