/**
 * The snapshot's entries restored on side B as fast as B takes them: each RESTORE is one request on
 * the pool's connection to its node (many share a write, as clients' requests do), with at most
 * WINDOW unanswered at a time for the whole snapshot. A cluster's redirect (B resharded meanwhile)
 * is followed for that key alone (side-request.ts); any other refusal fails the snapshot. A RESTORE
 * that gets no reply (B paused or slow past the command timeout, a lost connection) is sent again
 * after a backoff, while the follow lasts: a slow B is waited for, never a failure.
 */
import { ProxyContext } from '../context';
import { KeySpace, SlotOwners } from '../../sharding/key-space';
import { sideRequest } from './side-request';
import { redirectOf } from './redirect';
import * as encode from '../resp/encode';
import { FollowRouter } from './follow-router';
import { SnapshotSink, readSnapshot } from './follow-snapshot';
import { ownersOf } from './copy-keys';
import { recordKeyOf } from './follow-node-keys';
import { onB } from './follow-states';
import { tooSoon } from './follow-expiry';

const WINDOW = 20_000;
const RESTORE = Buffer.from('RESTORE');
const REPLACE = Buffer.from('REPLACE');
const ABSTTL = Buffer.from('ABSTTL');

/** A snapshot entry's RESTORE on B; an expiry already (nearly) past is A's to carry out, with a DEL in its stream (follow-expiry.ts). */
export function restoreArgs(key: Buffer, expireAtMs: number | null, dump: Buffer): Buffer[] {
  const ttl = expireAtMs === null || tooSoon(expireAtMs) ? null : expireAtMs;
  return [RESTORE, key, Buffer.from(ttl === null ? '0' : String(ttl)), dump, REPLACE, ...(ttl === null ? [] : [ABSTTL])];
}
const LANE = 0;
const RETRY_MS = 100;
const RETRY_CAP_MS = 2000;
/** A node that takes the RESTORE again shortly: loading, a busy script. */
const TRANSIENT = /^-(LOADING|BUSY)\b/;
const NO_CLIENT = Object.freeze({ id: -1 });

/** What restoring a snapshot needs of its follower (follow.ts). */
export interface SnapshotHost {
  router: FollowRouter;
  removeMovingKeys(): Promise<void>;
  everyMaster(args: Buffer[]): Promise<void>;
  live(): boolean;
  /** The history copy's view of the reading (follow-progress.ts: progress saved on A, the restore rate). */
  around(sink: SnapshotSink): SnapshotSink;
  /** Entries read and restored so far. */
  progress(entries: number, restored: number): void;
  /** `<replid> <offset>`: what every node of B records once the snapshot is restored. */
  record: string;
}

/**
 * A full sync's snapshot (the file) onto B: every node's record of `source` removed first (a
 * follower that dies half-way must not resume over it), B's copies of the moving keys removed (the
 * snapshot is the truth), each moving key restored ABSTTL REPLACE on its owner, function libraries
 * loaded on every master, and only then the record of the snapshot's offset written.
 */
export async function restoreSnapshot(ctx: ProxyContext, to: KeySpace, source: string, file: string, host: SnapshotHost): Promise<void> {
  const owners = ownersOf(to);
  for (const b of to.masters()) await recordOnB(ctx, owners, b, ['HDEL', recordKeyOf(b, owners), source], host.live);
  await host.removeMovingKeys();
  const router = host.router;
  const restore = new BulkRestore(ctx, owners, host.live);
  let entries = 0;
  await readSnapshot(
    file,
    host.around({
      wants: (key) => router.ownerInB(key) !== null,
      entry: async (key, expireAtMs, dump) => {
        entries++;
        const to = router.ownerInB(key);
        if (to === null) return;
        await restore.push(to, restoreArgs(key, expireAtMs, dump));
        host.progress(entries, restore.restored);
      },
      func: async (code) => host.everyMaster([Buffer.from('FUNCTION'), Buffer.from('LOAD'), REPLACE, code]),
    }),
  );
  await restore.finish();
  host.progress(entries, restore.restored);
  for (const b of to.masters()) await recordOnB(ctx, owners, b, ['HSET', recordKeyOf(b, owners), source, host.record], host.live);
}

/** A record write on node `b` of B, waited for while B does not answer; an error reply fails the snapshot. */
async function recordOnB(ctx: ProxyContext, owners: SlotOwners | null, b: string, args: string[], live: () => boolean): Promise<void> {
  const frame = await onB(ctx, b, args, live, owners);
  if (frame[0] === 45) throw new Error(`${b} refused ${args[0]}: ${frame.toString('utf8', 1, frame.length - 2)}`);
}

export class BulkRestore {
  private open = 0;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  restored = 0;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly owners: SlotOwners | null,
    /** False once the follow ended: nothing is sent again. */
    private readonly live: () => boolean = () => true,
  ) {}

  /** Sends one RESTORE; resolves at once unless WINDOW are unanswered (then once fewer are). */
  async push(to: string, args: Buffer[]): Promise<void> {
    if (this.failure !== null) throw this.failure;
    this.open++;
    this.send(to, args, encode.command(args), 0);
    if (this.open >= WINDOW) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  private send(to: string, args: Buffer[], payload: Buffer, attempt: number): void {
    const again = (why: string): void => {
      if (!this.live()) return this.done(`RESTORE on ${to}: ${why}`);
      setTimeout(() => this.send(to, args, payload, attempt + 1), Math.min(RETRY_CAP_MS, RETRY_MS * 2 ** attempt)).unref();
    };
    this.ctx.pool.connection(to, LANE).send({
      payload,
      internal: true,
      owner: NO_CLIENT,
      onReply: (frame) => {
        if (frame[0] !== 45) return this.done(null);
        if (TRANSIENT.test(frame.toString('latin1', 0, 16))) return again(frame.toString('utf8', 1, frame.length - 2));
        if (this.owners !== null && redirectOf(frame, to) !== null) {
          void sideRequest(this.ctx.pool, this.owners, to, args, { lane: LANE, maxRedirects: this.ctx.forward.maxRedirects, retryWindowMs: this.ctx.forward.retryWindowMs }).then(
            (f) => this.done(f[0] === 45 ? `RESTORE on ${to}: ${f.toString('utf8', 1, f.length - 2)}` : null),
            (err: unknown) => this.done(String(err)),
          );
          return;
        }
        this.done(`RESTORE on ${to}: ${frame.toString('utf8', 1, frame.length - 2)}`);
      },
      onFailure: (message) => again(message),
    });
  }

  /** Resolves once every RESTORE sent is answered; rejects with the first refusal. */
  async finish(): Promise<void> {
    while (this.open > 0) await new Promise<void>((resolve) => (this.wake = resolve));
    if (this.failure !== null) throw this.failure;
  }

  private done(error: string | null): void {
    this.open--;
    if (error === null) this.restored++;
    else this.failure ??= new Error(error);
    const wake = this.wake;
    if (wake !== null && (this.open < WINDOW / 2 || this.open === 0)) {
      this.wake = null;
      wake();
    }
  }
}
