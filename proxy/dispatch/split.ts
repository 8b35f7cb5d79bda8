/**
 * `crossSlot: split` (opt-in): MGET, MSET, DEL, UNLINK, EXISTS and TOUCH whose keys span slots (or
 * ring nodes) are cut into one request per shard, each routed like any request (redirections,
 * retries, double-write during a migration), and the replies merged in the client's key order:
 * MGET's values in order, the integer replies summed, MSET OK only when every part said OK. The
 * first error (in key order) wins. Nothing else is split: MSETNX and the rest stay CROSSSLOT.
 *
 * A split MSET is not atomic across shards: a reader may see some parts before others, and a failed
 * part leaves the others written. docs/commands.md says so.
 *
 * Each part runs through the dispatcher against a PartSession, a stand-in client whose only reply
 * slot feeds the SplitCommand; the SplitCommand holds the client's place in its reply order.
 */
import { ReplyOwner, ReplySlot } from '../client/reply-slot';
import { Releasable } from '../client/client-session';
import { arrayElements, parseSigned } from '../resp/reply-framer';
import * as encode from '../resp/encode';

/** How each splittable command's keys sit in its arguments, and how part replies merge. */
export interface SplitRule {
  /** Arguments per key, the key first (MSET: key and value). */
  stride: number;
  merge: 'values' | 'sum' | 'ok';
  /**
   * The command a part of one key is sent as (GET for MGET, SET for MSET): the same effect on the
   * node, and GET's reply is the value's frame itself, so the merge need not find it in an array.
   * In cluster mode every key of a split in its own slot is such a part.
   */
  single?: Buffer;
}

export const SPLIT_RULES: ReadonlyMap<string, SplitRule> = new Map([
  ['mget', { stride: 1, merge: 'values', single: Buffer.from('GET') }],
  ['mset', { stride: 2, merge: 'ok', single: Buffer.from('SET') }],
  ['del', { stride: 1, merge: 'sum' }],
  ['unlink', { stride: 1, merge: 'sum' }],
  ['exists', { stride: 1, merge: 'sum' }],
  ['touch', { stride: 1, merge: 'sum' }],
]);

/** One part's keys: the shard they go to and where they stand in the client's key order. */
export interface ShardGroup {
  shard: number;
  /** Positions of this part's keys among the request's keys (0-based, in key order). */
  keyIndexes: number[];
}

/** One part with the argument list to send (the long path dispatches it as a request of its own). */
export interface SplitPart extends ShardGroup {
  args: Buffer[];
}

/** groupByShard's working arrays, reused (it runs to its end before anything calls it again) up to this many keys. */
const SCRATCH_KEYS = 1024;
const PART_OF: number[] = [];
const SHARDS: number[] = [];
const SIZES: number[] = [];

/**
 * Groups the keys at `positions` by shard, keeping the first-seen order of shards and of keys.
 * A list, not a map: a request spans a handful of shards at most.
 */
export function groupByShard(
  args: Buffer[],
  positions: readonly number[],
  /** The shard of `key`, the request's key number `keyIndex`. */
  shardOf: (key: Buffer, keyIndex: number) => number,
): ShardGroup[] {
  // First pass: each key's part, and each part's size (in scratch arrays: nothing of it outlives
  // the call). Second: arrays of their final size, so that what stays alive while the parts are in
  // flight holds no spare capacity.
  const keyCount = positions.length;
  const scratch = keyCount <= SCRATCH_KEYS;
  const partOf = scratch ? PART_OF : new Array<number>(keyCount);
  const shards = scratch ? SHARDS : [];
  const sizes = scratch ? SIZES : [];
  let partCount = 0;
  for (let keyIndex = 0; keyIndex < keyCount; keyIndex++) {
    const shard = shardOf(args[positions[keyIndex]], keyIndex);
    let p = 0;
    while (p < partCount && shards[p] !== shard) p++;
    if (p === partCount) {
      shards[p] = shard;
      sizes[p] = 0;
      partCount++;
    }
    sizes[p]++;
    partOf[keyIndex] = p;
  }
  const groups = new Array<ShardGroup>(partCount);
  for (let p = 0; p < partCount; p++) {
    groups[p] = { shard: shards[p], keyIndexes: new Array<number>(sizes[p]) };
    sizes[p] = 0; // from here on: keys placed so far
  }
  for (let keyIndex = 0; keyIndex < keyCount; keyIndex++) {
    const p = partOf[keyIndex];
    groups[p].keyIndexes[sizes[p]++] = keyIndex;
  }
  return groups;
}

/** groupByShard, each part with its argument list: the client's command, then its keys (and values) sharing the request's buffers. */
export function splitByShard(args: Buffer[], positions: readonly number[], stride: number, shardOf: (key: Buffer, keyIndex: number) => number): SplitPart[] {
  return groupByShard(args, positions, shardOf).map(({ shard, keyIndexes }) => {
    const partArgs = new Array<Buffer>(1 + keyIndexes.length * stride);
    partArgs[0] = args[0];
    for (let slot = 0; slot < keyIndexes.length; slot++) {
      const pos = positions[keyIndexes[slot]];
      for (let j = 0; j < stride; j++) partArgs[1 + slot * stride + j] = args[pos + j];
    }
    return { shard, args: partArgs, keyIndexes };
  });
}

/**
 * The command a part is sent as: in cluster mode a part of one key goes as `rule.single` (GET,
 * SET); otherwise, and in ring mode always (as nutcracker's fragments), the client's command.
 */
export function partCommand(rule: SplitRule, command: Buffer, group: ShardGroup, singles: boolean): Buffer {
  return singles && rule.single !== undefined && group.keyIndexes.length === 1 ? rule.single : command;
}

/** Shared, never changed: where a part's keys stand in its arguments (1, 1+stride, ...), by stride and key count. */
const PART_POSITIONS: number[][][] = [[], [], []];
const CACHED_PART_KEYS = 64;

/** The key positions of a part with `keyCount` keys, `stride` arguments apart. Callers must not change it. */
export function partPositions(stride: number, keyCount: number): readonly number[] {
  const cache = stride < PART_POSITIONS.length && keyCount <= CACHED_PART_KEYS ? PART_POSITIONS[stride] : null;
  const cached = cache?.[keyCount];
  if (cached !== undefined) return cached;
  const positions = new Array<number>(keyCount);
  for (let j = 0; j < keyCount; j++) positions[j] = 1 + j * stride;
  if (cache !== null) cache[keyCount] = Object.freeze(positions) as number[]; // shared: a write would throw
  return positions;
}

/** The client's reply: filled once every part has answered. */
export class SplitCommand extends ReplySlot {
  private readonly replies: (Buffer | null)[];
  private missing: number;

  constructor(owner: ReplyOwner, private readonly rule: SplitRule, protected readonly parts: readonly ShardGroup[], private readonly keyCount: number) {
    super(owner);
    this.replies = new Array<Buffer | null>(parts.length).fill(null);
    this.missing = parts.length;
  }

  /** A stand-in session for part `i`, to dispatch the part against. */
  partSession(i: number): PartSession {
    return new PartSession(this.owner.id, this, i);
  }

  /** Part `i`'s reply (PartSession calls it). */
  collect(i: number, frame: Buffer): void {
    if (this.replies[i] !== null) return;
    // MGET answers nil for a key that holds no string; GET, its one-key part, answers WRONGTYPE.
    if (this.rule.merge === 'values' && frame[0] === 45 && isWrongType(frame)) frame = encode.NULL_BULK;
    this.replies[i] = frame;
    if (--this.missing === 0) this.complete(this.merge(this.replies as Buffer[]));
  }

  private merge(frames: Buffer[]): Buffer {
    const err = this.firstError(frames);
    if (err !== undefined) return err;
    switch (this.rule.merge) {
      case 'ok':
        return encode.OK;
      case 'sum': {
        let total = 0;
        for (const f of frames) total += Number(f.toString('latin1', 1, f.length - 2));
        return encode.integer(total);
      }
      case 'values':
        return this.mergeValues(frames);
    }
  }

  /**
   * MGET: each part's values copied in key order into one buffer, nothing decoded. A part's reply
   * holds its values in its keys' order, so one cursor per part walks it as the keys come: one
   * pass, no bounds kept, no native call per value (short values: a byte loop beats a native copy).
   */
  private mergeValues(frames: Buffer[]): Buffer {
    const n = this.keyCount;
    const parts = this.parts;
    const cursors = new Array<number>(frames.length);
    const partOf = new Array<number>(n);
    let size = encode.arrayHeaderLength(n);
    for (let i = 0; i < frames.length; i++) {
      const frame = frames[i];
      const keyIndexes = parts[i].keyIndexes;
      for (let j = 0; j < keyIndexes.length; j++) partOf[keyIndexes[j]] = i;
      if (frame[0] === 36 /* $ */ && keyIndexes.length === 1) {
        cursors[i] = 0; // a GET part: its reply is the value's frame
      } else {
        const body = frame[0] === 42 /* * */ && frame[1] !== 45 ? lineEnd(frame, 1) : -1;
        if (body < 0 || parseSigned(frame, 1, body - 2) !== keyIndexes.length) throw new Error('MGET part reply is not an array of its keys');
        cursors[i] = body;
      }
      size += frame.length - cursors[i];
    }
    const resp3 = this.owner.protocol === 3;
    const out = Buffer.allocUnsafe(size);
    let at = encode.writeArrayHeader(out, 0, n);
    for (let k = 0; k < n; k++) {
      const p = partOf[k];
      const frame = frames[p];
      const start = cursors[p];
      if (frame[start] !== 36 /* $ */) return this.mergeFramed(frames); // no MGET value: framed in full
      // The bulk's header, `$<len>\r\n` or `$-1\r\n`, read in one pass.
      let i = start + 1;
      const nil = frame[i] === 45;
      let len = 0;
      for (; i < frame.length && frame[i] !== 13; i++) len = len * 10 + frame[i] - 48;
      const end = nil ? i + 2 : i + 2 + len + 2;
      if (end > frame.length) throw new Error('MGET part reply is not an array of its keys');
      cursors[p] = end;
      if (nil && resp3) {
        // Parts speak RESP2 (PartSession); a RESP3 client gets RESP3's null (`_`), as from one Redis.
        at += encode.RESP3_NULL.copy(out, at);
        continue;
      }
      at = encode.copyBytes(frame, start, end, out, at);
    }
    return at === size ? out : out.subarray(0, at);
  }

  /** MGET's merge for part replies holding other than bulk strings: each element found by the reply framer. */
  private mergeFramed(frames: Buffer[]): Buffer {
    const values = new Array<Buffer>(this.keyCount);
    for (let i = 0; i < frames.length; i++) {
      const keyIndexes = this.parts[i].keyIndexes;
      const elements = frames[i][0] === 36 && keyIndexes.length === 1 ? [frames[i]] : arrayElements(frames[i]);
      if (elements === null || elements.length !== keyIndexes.length) throw new Error('MGET part reply is not an array of its keys');
      for (let j = 0; j < keyIndexes.length; j++) {
        const e = elements[j];
        values[keyIndexes[j]] = this.owner.protocol === 3 && e[0] === 36 && e[1] === 45 ? encode.RESP3_NULL : e;
      }
    }
    return encode.arrayOfFrames(values);
  }

  /** The error of the part holding the earliest key, if any part failed. */
  private firstError(frames: Buffer[]): Buffer | undefined {
    let best: Buffer | undefined;
    let bestKey = Infinity;
    for (let i = 0; i < frames.length; i++) {
      const f = frames[i];
      if (f[0] === 45 && this.parts[i].keyIndexes[0] < bestKey) {
        best = f;
        bestKey = this.parts[i].keyIndexes[0];
      }
    }
    return best;
  }
}

/** Where the line whose text starts at `from` ends (after its CRLF), or -1: a byte loop, part replies' lines are short. */
function lineEnd(frame: Buffer, from: number): number {
  for (let i = from; i < frame.length - 1; i++) if (frame[i] === 13) return i + 2;
  return -1;
}

const WRONGTYPE = Buffer.from('-WRONGTYPE ');

function isWrongType(frame: Buffer): boolean {
  return frame.length > WRONGTYPE.length && frame.compare(WRONGTYPE, 0, WRONGTYPE.length, 0, WRONGTYPE.length) === 0;
}

/** Parts never hold a dedicated connection (nothing blocking is split): one empty set for all of them. */
const NO_DEDICATED: Set<Releasable> = new Set();

/**
 * What the dispatcher sees of a part: a signed-in RESP2 client outside MULTI and Pub/Sub whose one
 * reply goes to the SplitCommand. RESP2, because the MGET merge cuts the parts' replies by their RESP2 headers.
 */
export class PartSession implements ReplyOwner {
  // Every part has the same values for these: they live on the prototype (below), so a part in
  // flight is three fields, not fourteen. A write would make an own property, as on any object.
  declare name: Buffer | null;
  declare closeAfterReply: boolean;
  declare authenticated: boolean;
  declare protocol: 2 | 3;
  declare user: string;
  /** The whole request's keys were checked against the client's permissions before the split. */
  declare readonly permissions: null;
  declare command: string;
  declare blocked: null;
  declare transaction: null;
  declare subscription: null;
  declare readonly dedicated: Set<Releasable>;
  /** The whole request went through the client's tracking before the split. */
  declare tracking: null;
  declare readonly subscribed: false;
  /** The whole request was shown to monitors before the split. */
  declare monitoring: null;
  declare readonly monitorOutputLimitBytes: number;
  declare readonly addr: string;
  /** read-new: the part's write on its way to B (the split hands it to the client's own session). */
  declare writesOnB: Promise<void> | null;

  constructor(readonly id: number, private readonly split: SplitCommand, private readonly index: number) {}

  /** A tracking client's parts read from masters as its whole requests do. */
  get readsMasterOnly(): boolean {
    return this.split.owner.readsMasterOnly === true;
  }

  pushOutOfBand(): void {
    // Invalidations go to the client, never to a part.
  }

  whenAnswered(): void {
    // The whole request is shown to monitors, never a part.
  }

  track<S extends ReplySlot>(slot: S): S {
    return slot;
  }

  replyNow(reply: Buffer): void {
    this.split.collect(this.index, reply);
  }

  setReplyMode(): void {
    // A part is never a CLIENT REPLY.
  }

  onSlotFilled(slot: ReplySlot): void {
    if (slot.reply !== null) this.split.collect(this.index, slot.reply);
  }
}

Object.assign(PartSession.prototype, {
  name: null,
  closeAfterReply: false,
  authenticated: true,
  protocol: 2,
  user: 'default',
  permissions: null,
  command: 'NULL',
  blocked: null,
  transaction: null,
  subscription: null,
  dedicated: NO_DEDICATED,
  tracking: null,
  subscribed: false,
  monitoring: null,
  monitorOutputLimitBytes: 0,
  addr: '',
  writesOnB: null,
});
