/**
 * The replication carry's history copy is each node of side A's full sync (follow.ts). Its progress
 * is kept on that node of A, as the feeds' copy keeps its cursor there (tools/copy.ts), so that
 * `slotproxy migrate copy` and `migrate status` (their own processes), /metrics and the console
 * of any proxy read it alike:
 *
 *   FOLLOW_SYNC_KEY (a hash, written by the follower at most every WRITE_EVERY_MS and at the end):
 *     state     receiving (the snapshot arrives) | restoring | done | failed
 *     replid, offset   the full sync's place in the node's history
 *     bytes     snapshot bytes received;  total  keys the snapshot holds (its RESIZEDB), -1 until known
 *     read      keys of the snapshot read; restored  moving keys restored on side B
 *     started, finished   epoch ms (finished 0 until then);  request  the copy tool's mark it answers
 *
 *   FOLLOW_REQUEST_KEY (a hash, written by `migrate copy`): `token` (a new one asks for a new full
 *   sync: --restart) and `rate` (moving keys restored per second, 0: no cap). The follower hears it
 *   on its change feed of the node (change-copier.ts, the bookkeeping prefix) and reads it.
 *
 * On a cluster A each node's hashes are tagged for the lowest slot the node serves.
 */
import { ProxyContext } from '../context';
import { Placement } from '../../sharding/migration';
import { SlotOwners } from '../../sharding/key-space';
import { SLOT_COUNT } from '../../sharding/slot';
import { slotTag } from '../../sharding/slot-tags';
import { BOOKKEEPING_PREFIX } from './converge';
import { ownersOf } from './copy-keys';
import { sideRequest } from './side-request';
import { Reply, decodeReply } from '../resp/decode-reply';
import { log } from '../telemetry/log';
import type { LinkHandlers } from '../replication/link';
import type { SnapshotSink } from './follow-snapshot';

export const FOLLOW_SYNC_KEY = `${BOOKKEEPING_PREFIX}follow-sync`;
export const FOLLOW_REQUEST_KEY = `${BOOKKEEPING_PREFIX}follow-request`;
const WRITE_EVERY_MS = 200;
/** The error a full sync ends with when a new one was asked for in its place. */
export const RESTARTED = 'a new full sync was asked for';
const TIMEOUT_MS = 5000;

export type FullSyncState = 'receiving' | 'restoring' | 'done' | 'failed';

export interface FullSyncRecord {
  state: FullSyncState;
  replid: string;
  offset: number;
  bytes: number;
  total: number;
  read: number;
  restored: number;
  started: number;
  finished: number;
  request: string;
  error: string;
}

const FIELDS = ['state', 'replid', 'offset', 'bytes', 'total', 'read', 'restored', 'started', 'finished', 'request', 'error'] as const;

/** The hash `name` of node `address` of side A: a ring node's own key, a cluster's tagged for a slot the node serves. */
export function nodeKeyOf(name: string, address: string, owners: SlotOwners | null): string {
  if (owners === null) return name;
  for (let slot = 0; slot < SLOT_COUNT; slot++) if (owners.ownerOf(slot) === address) return `${name}:{${slotTag(slot)}}`;
  return name;
}

export const READ_SYNC_FIELDS: readonly string[] = FIELDS;

/** An HMGET of READ_SYNC_FIELDS as a record; null when the node holds none. */
export function parseSyncRecord(reply: Reply): FullSyncRecord | null {
  const v = Array.isArray(reply) ? reply.map((c) => (Buffer.isBuffer(c) || typeof c === 'string' ? c.toString() : null)) : [];
  if (v[0] === null || v[0] === undefined) return null;
  const n = (i: number): number => Number(v[i] ?? 0) || 0;
  return { state: v[0] as FullSyncState, replid: v[1] ?? '', offset: n(2), bytes: n(3), total: v[4] === null ? -1 : n(4), read: n(5), restored: n(6), started: n(7), finished: n(8), request: v[9] ?? '', error: v[10] ?? '' };
}

/** The copy tool's mark: the token of the last full sync asked for ('' for none) and the restore rate. */
export function parseRequest(reply: Reply): { token: string; rate: number } {
  const v = Array.isArray(reply) ? reply.map((c) => (Buffer.isBuffer(c) || typeof c === 'string' ? c.toString() : null)) : [];
  return { token: v[0] ?? '', rate: Number(v[1] ?? 0) || 0 };
}

/** How one node's full sync stands, for `migrate status` and the copy's lines. */
export function describeSync(r: FullSyncRecord | null): string {
  if (r === null) return 'full sync not started';
  const of = r.total >= 0 ? ` of ${r.total}` : '';
  const counts = `${r.read}${of} keys read, ${r.restored} restored on side B`;
  if (r.state === 'failed') return `full sync failed (${counts}): ${r.error}`;
  if (r.state === 'done') return `full sync done (${counts}, ${((r.finished - r.started) / 1000).toFixed(1)} s)`;
  if (r.state === 'receiving') return `full sync receiving the snapshot (${r.bytes} bytes so far)`;
  return `full sync restoring (${counts})`;
}

/** Requests to one node of side A (a cluster's redirects followed). */
function onA(ctx: ProxyContext, placement: Placement, address: string, args: (string | Buffer)[]): Promise<Buffer> {
  return sideRequest(ctx.pool, ownersOf(placement.from), address, args, { lane: 0, timeoutMs: TIMEOUT_MS, retryWindowMs: TIMEOUT_MS });
}

/** The copy tool's mark on `address` of side A, as the proxy reads it. */
export async function readRequest(ctx: ProxyContext, placement: Placement, address: string): Promise<{ token: string; rate: number }> {
  const key = nodeKeyOf(FOLLOW_REQUEST_KEY, address, ownersOf(placement.from));
  return parseRequest(decodeReply(await onA(ctx, placement, address, ['HMGET', key, 'token', 'rate']), true));
}

/** The full sync record of `address` of side A, as a proxy reads it (/metrics, the console). */
export async function readSyncRecord(ctx: ProxyContext, placement: Placement, address: string): Promise<FullSyncRecord | null> {
  const key = nodeKeyOf(FOLLOW_SYNC_KEY, address, ownersOf(placement.from));
  return parseSyncRecord(decodeReply(await onA(ctx, placement, address, ['HMGET', key, ...FIELDS]), true));
}

/**
 * The follower's writer of its node's record: fields merged as they change, written at most every
 * WRITE_EVERY_MS (one HSET in flight at a time), and at once for a full sync's start and end. A
 * write that fails is logged and the next one carries the fields again.
 */
export class FollowProgress {
  private fields: Partial<Record<(typeof FIELDS)[number], string | number>> = {};
  private dirty = false;
  private writing = false;
  private timer: NodeJS.Timeout | null = null;
  private lastWrite = 0;
  /** The copy tool's token this follower's full syncs answer. */
  request = '';

  constructor(
    private readonly ctx: ProxyContext,
    private readonly source: string,
    private readonly placement: () => Placement,
  ) {}

  /** A full sync begins (+FULLRESYNC): the record starts over. */
  begin(replid: string, offset: number): void {
    this.fields = { state: 'receiving', replid, offset, bytes: 0, total: -1, read: 0, restored: 0, started: Date.now(), finished: 0, request: this.request, error: '' };
    this.write(true);
  }

  bytes(n: number): void {
    this.fields.bytes = Number(this.fields.bytes ?? 0) + n;
    this.write(false);
  }

  update(fields: { state?: FullSyncState; total?: number; read?: number; restored?: number }): void {
    Object.assign(this.fields, fields);
    this.write(fields.state !== undefined);
  }

  end(state: 'done' | 'failed', error = ''): void {
    Object.assign(this.fields, { state, finished: Date.now(), error });
    this.write(true);
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private write(now: boolean): void {
    this.dirty = true;
    if (this.writing) return;
    const wait = now ? 0 : Math.max(0, this.lastWrite + WRITE_EVERY_MS - Date.now());
    if (wait === 0) return void this.flush();
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, wait).unref();
  }

  private async flush(): Promise<void> {
    if (this.writing || !this.dirty) return;
    this.writing = true;
    this.dirty = false;
    this.lastWrite = Date.now();
    const placement = this.placement();
    const key = nodeKeyOf(FOLLOW_SYNC_KEY, this.source, ownersOf(placement.from));
    try {
      await onA(this.ctx, placement, this.source, ['HSET', key, ...Object.entries(this.fields).flatMap(([k, v]) => [k, String(v)])]);
    } catch (err) {
      log.debug({ node: this.source, err: err instanceof Error ? err.message : String(err) }, 'migration: the full sync\'s progress could not be saved on side A; saved with the next update');
      this.dirty = true;
    } finally {
      this.writing = false;
    }
    if (this.dirty) this.write(false);
  }
}

/**
 * Moving keys restored per second, at most (`migrate copy --rate`, 0: no cap): each restore waits
 * its turn. A new rate counts from the moment it is set; idle time earns at most a second of credit.
 */
export class RestorePace {
  private rate = 0;
  private since = Date.now();
  private taken = 0;

  set(rate: number): void {
    if (rate === this.rate) return;
    this.rate = rate;
    this.since = Date.now();
    this.taken = 0;
  }

  async take(): Promise<void> {
    if (this.rate <= 0) return;
    const now = Date.now();
    // Time without restores (a snapshot still arriving) is no credit: at most a second's worth.
    if (this.since + (this.taken / this.rate) * 1000 < now - 1000) {
      this.since = now;
      this.taken = 0;
    }
    this.taken++;
    const wait = this.since + (this.taken / this.rate) * 1000 - now;
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}

/**
 * What a follower (follow.ts) adds to its full syncs for the history copy: the record saved
 * (FollowProgress), restores paced (RestorePace), and a new full sync when asked for.
 */
export class FullSyncWatch {
  readonly progress: FollowProgress;
  readonly pace = new RestorePace();
  /** A new full sync was asked for: the next connect asks for one (PSYNC ? -1), not to resume. */
  forced = false;
  /** ...and the snapshot being restored, if any, stops. */
  private cancel = false;
  private read = 0;

  constructor(ctx: ProxyContext, source: string, placement: () => Placement, private readonly restored: () => number) {
    this.progress = new FollowProgress(ctx, source, placement);
  }

  /** The link's handlers, with the full sync's start and snapshot bytes noted first. */
  watch(on: LinkHandlers): LinkHandlers {
    return {
      ...on,
      fullSync: (replid, offset) => {
        this.forced = false;
        this.cancel = false;
        this.read = 0;
        this.progress.begin(replid, offset);
        on.fullSync(replid, offset);
      },
      snapshotBytes: (chunk) => {
        this.progress.bytes(chunk.length);
        on.snapshotBytes(chunk);
      },
    };
  }

  restart(loading: boolean): void {
    this.forced = true;
    if (loading) this.cancel = true;
  }

  /** The snapshot's sink: keys read and restored saved, each restore paced, a restart stopping it. */
  around(sink: SnapshotSink): SnapshotSink {
    this.progress.update({ state: 'restoring' });
    return {
      ...sink,
      total: (keys) => this.progress.update({ total: keys }),
      read: (keys) => this.progress.update({ read: (this.read = keys), restored: this.restored() }),
      entry: async (key, expireAtMs, dump) => {
        if (this.cancel) throw new Error(RESTARTED);
        await this.pace.take();
        await sink.entry(key, expireAtMs, dump);
      },
    };
  }

  /** The snapshot is restored on B (and recorded there). */
  done(): void {
    this.progress.update({ read: this.read, restored: this.restored() });
    this.progress.end('done');
  }

  /** The snapshot could not be restored; true when that is a restart asked for, not a failure. */
  failed(reason: string): boolean {
    const asked = this.cancel;
    this.cancel = false;
    this.progress.end('failed', asked ? RESTARTED : reason);
    return asked;
  }
}
