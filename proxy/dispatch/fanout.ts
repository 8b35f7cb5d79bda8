/**
 * Keyless commands whose honest answer covers the whole data set: sent to every master, and the
 * replies merged into the one reply a single Redis would give (DBSIZE sums, KEYS concatenates, ...).
 * SCAN is the exception: masters one after the other, with a cursor that walks every master in turn.
 */
import { BackendRequest } from '../backend/connection';
import { ProxyContext } from '../context';
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import * as encode from '../resp/encode';
import * as errors from '../resp/errors';
import { decodeReply, errorText, asArray, isNullReply } from '../resp/decode-reply';

/**
 * Merges the replies of every master, in the order of the masters; `after`: their replies to the
 * request sent right behind it on the same connection, when there was one (INFO's SCRIPT EXISTS).
 */
export type Merge = (frames: Buffer[], after?: Buffer[]) => Buffer;

/** A request to every master whose replies are merged once all are in. */
export class FanoutCommand extends ReplySlot {
  private readonly frames: Buffer[];
  private readonly afterFrames: Buffer[];
  private missing: number;

  /** `protocol`: of the lanes asked (the client's, for a merge that keeps RESP3's types: FUNCTION STATS). */
  constructor(owner: ReplyOwner, private readonly masters: readonly string[], private readonly merge: Merge, private readonly protocol: 2 | 3 = 2) {
    super(owner);
    this.frames = new Array<Buffer>(masters.length);
    this.afterFrames = new Array<Buffer>(masters.length);
    this.missing = masters.length;
  }

  /**
   * `outOfLane`: each master gets the request on a connection of its own, closed after the reply,
   * instead of the client's lane (SCRIPT KILL must not wait behind the busy script it kills).
   * `after`: a request sent right behind `payload` on each lane, its replies given to the merge.
   */
  start(ctx: ProxyContext, payload: Buffer, outOfLane = false, after: Buffer | null = null): void {
    if (this.masters.length === 0) {
      this.complete(encode.error(errors.PROXY_NOT_READY));
      return;
    }
    const behind = outOfLane ? null : after; // an out-of-lane connection closes after its one reply
    if (behind !== null) this.missing *= 2;
    this.masters.forEach((address, i) => {
      const conn = outOfLane ? ctx.pool.outOfLane(address) : ctx.pool.connection(address, this.owner.id, this.protocol);
      const done = (frame: Buffer): void => {
        if (outOfLane) conn.close('request done');
        this.collect(this.frames, i, frame);
      };
      const part: BackendRequest = { payload, onReply: done, onFailure: (message) => done(encode.error(message)) };
      conn.send(part);
      if (behind === null) return;
      const collectAfter = (frame: Buffer): void => this.collect(this.afterFrames, i, frame);
      conn.send({ payload: behind, internal: true, onReply: collectAfter, onFailure: (message) => collectAfter(encode.error(message)) });
    });
  }

  private collect(into: Buffer[], i: number, frame: Buffer): void {
    into[i] = frame;
    if (--this.missing > 0) return;
    let merged: Buffer;
    try {
      merged = this.merge(this.frames, this.afterFrames[0] === undefined ? undefined : this.afterFrames);
    } catch (err) {
      merged = encode.error(`ERR slotproxy: cannot merge replies: ${(err as Error).message}`);
    }
    this.complete(merged);
  }
}

function firstError(frames: Buffer[]): Buffer | undefined {
  return frames.find((f) => f[0] === 45);
}

/** The first reply that is not nil, else the first (RANDOMKEY inside MULTI: any key of any master). */
export const firstNonNil: Merge = (frames) => frames.find((f) => !isNullReply(f)) ?? frames[0];

/** Integers added up (DBSIZE). */
export const sumIntegers: Merge = (frames) => {
  const err = firstError(frames);
  if (err !== undefined) return err;
  let total = 0;
  for (const f of frames) total += Number(f.toString('latin1', 1, f.length - 2));
  return encode.integer(total);
};

/** Arrays concatenated, elements forwarded untouched (KEYS). */
export const concatArrays: Merge = (frames) => {
  const err = firstError(frames);
  if (err !== undefined) return err;
  let count = 0;
  const bodies: Buffer[] = [];
  for (const f of frames) {
    const headerEnd = f.indexOf('\r\n');
    const n = Number(f.toString('latin1', 1, headerEnd));
    if (n > 0) {
      count += n;
      bodies.push(f.subarray(headerEnd + 2));
    }
  }
  return Buffer.concat([Buffer.from(`*${count}\r\n`), ...bodies]);
};

/** The first reply when every master agreed it worked, else the first error (FLUSHALL, SCRIPT LOAD). */
export const allOk: Merge = (frames) => firstError(frames) ?? frames[0];

/**
 * SCRIPT KILL, FUNCTION KILL: OK when any master killed one (only the busy node can); else a
 * refusal other than NOTBUSY (UNKILLABLE, BUSY: a function is running, not a script); NOTBUSY only
 * when no master was running one, as one Redis answers.
 */
export const killMerge: Merge = (frames) =>
  frames.find((f) => f[0] !== 45) ?? frames.find((f) => f.toString('latin1', 1, 8) !== 'NOTBUSY') ?? frames[0];

/**
 * Element-wise AND of integer arrays, where `held[i]` counts as 1 (SCRIPT EXISTS: 1 where every
 * master has the script, or where the proxy holds its body and puts it wherever it is missing).
 */
export function andArrays(held: readonly boolean[]): Merge {
  return (frames) => {
    const err = firstError(frames);
    if (err !== undefined) return err;
    const lists = frames.map((f) => asArray(decodeReply(f)) as number[]);
    return encode.arrayOfFrames(lists[0].map((_, i) => encode.integer(held[i] || lists.every((l) => l[i] === 1) ? 1 : 0)));
  };
}

/** Masters are addressed in the low bits of the proxy's SCAN cursor. */
const SCAN_MASTER_BITS = 1024n;

/** SCAN's COUNT when the request names none, as in Redis. */
const SCAN_DEFAULT_COUNT = 10;

/**
 * SCAN through the proxy: the cursor encodes (node cursor, master index) as
 * nodeCursor * 1024 + index, so it stays one unsigned 64-bit number as clients expect.
 * When a master's own cursor returns to 0 with fewer than COUNT keys gathered, the same call walks
 * on to the next master, so a keyspace smaller than COUNT comes back whole in one call, as on one
 * Redis. A master that stops mid-walk (its cursor not 0) ends the call: each master does at most
 * COUNT's work per call, as Redis bounds it.
 */
export class ScanCommand extends ReplySlot implements BackendRequest {
  payload: Buffer = Buffer.alloc(0);
  private masterIndex = 0;
  private ctx: ProxyContext | null = null;
  /** The request from its MATCH on: the same for every master. */
  private options: Buffer[] = [];
  private count = SCAN_DEFAULT_COUNT;
  private readonly keys: Buffer[] = [];

  constructor(owner: ReplyOwner, private readonly masters: readonly string[]) {
    super(owner);
  }

  start(ctx: ProxyContext, args: Buffer[]): void {
    let cursor: bigint;
    try {
      cursor = BigInt(args[1].toString('latin1'));
      if (cursor < 0n || cursor >= 1n << 64n || !/^\d+$/.test(args[1].toString('latin1'))) throw new Error('range');
    } catch {
      this.complete(encode.error(errors.INVALID_CURSOR));
      return;
    }
    this.masterIndex = Number(cursor % SCAN_MASTER_BITS);
    if (this.masters.length === 0 || this.masterIndex >= this.masters.length) {
      this.complete(this.masters.length === 0 ? encode.error(errors.PROXY_NOT_READY) : encode.error(errors.INVALID_CURSOR));
      return;
    }
    this.ctx = ctx;
    this.options = args.slice(2);
    this.count = countOption(this.options);
    this.send(args[0], cursor / SCAN_MASTER_BITS);
  }

  private send(name: Buffer | string, nodeCursor: bigint): void {
    const ctx = this.ctx as ProxyContext;
    this.payload = encode.command([name, String(nodeCursor), ...this.options]);
    ctx.pool.connection(this.masters[this.masterIndex], this.owner.id).send(this);
  }

  onReply(frame: Buffer): void {
    // A node's error (a bad MATCH, COUNT or TYPE) is its answer, as one Redis would give it.
    if (errorText(frame) !== null) return this.complete(frame);
    const [nodeCursorRaw, keys] = asArray(decodeReply(frame, true));
    for (const k of asArray(keys)) this.keys.push(k as Buffer);
    const nodeCursor = BigInt(String(nodeCursorRaw));
    const last = this.masterIndex + 1 >= this.masters.length;
    if (nodeCursor === 0n && !last && this.keys.length < this.count) {
      this.masterIndex++;
      this.send('SCAN', 0n);
      return;
    }
    let next: bigint;
    if (nodeCursor !== 0n) next = nodeCursor * SCAN_MASTER_BITS + BigInt(this.masterIndex);
    else if (!last) next = BigInt(this.masterIndex + 1);
    else next = 0n;
    this.complete(encode.arrayOfFrames([encode.bulk(String(next)), encode.arrayOfFrames(this.keys.map((k) => encode.bulk(k)))]));
  }

  onFailure(message: string): void {
    this.complete(encode.error(message));
  }
}

/** SCAN's COUNT (the last one given, as Redis reads it); the default when absent or not a number (the node then refuses it). */
function countOption(options: readonly Buffer[]): number {
  let count = SCAN_DEFAULT_COUNT;
  for (let i = 0; i + 1 < options.length; i += 2) {
    if (options[i].toString('latin1').toLowerCase() !== 'count') continue;
    const n = Number(options[i + 1].toString('latin1'));
    if (Number.isSafeInteger(n) && n > 0) count = n;
  }
  return count;
}
