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
import { arrayElementBounds } from '../resp/reply-framer';
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

/** One part: the shard it goes to, the argument list to send and where its keys stand in the client's key order. */
export interface SplitPart {
  shard: number;
  args: Buffer[];
  /** Positions of this part's keys among the request's keys (0-based, in key order). */
  keyIndexes: number[];
}

/**
 * Groups the keys at `positions` by shard, keeping the first-seen order of shards and of keys.
 * A list, not a map: a request spans a handful of shards at most.
 */
export function splitByShard(
  args: Buffer[],
  positions: readonly number[],
  stride: number,
  shardOf: (key: Buffer) => number,
): SplitPart[] {
  // First pass: each key's part, and each part's size. Second: arrays of their final size, so that
  // what stays alive while the parts are in flight holds no spare capacity.
  const keyCount = positions.length;
  const partOf = new Array<number>(keyCount);
  const shards: number[] = [];
  const sizes: number[] = [];
  for (let keyIndex = 0; keyIndex < keyCount; keyIndex++) {
    const shard = shardOf(args[positions[keyIndex]]);
    let p = 0;
    while (p < shards.length && shards[p] !== shard) p++;
    if (p === shards.length) {
      shards.push(shard);
      sizes.push(0);
    }
    sizes[p]++;
    partOf[keyIndex] = p;
  }
  const parts = new Array<SplitPart>(shards.length);
  for (let p = 0; p < shards.length; p++) {
    const partArgs = new Array<Buffer>(1 + sizes[p] * stride);
    partArgs[0] = args[0];
    parts[p] = { shard: shards[p], args: partArgs, keyIndexes: new Array<number>(sizes[p]) };
    sizes[p] = 0; // from here on: keys placed so far
  }
  for (let keyIndex = 0; keyIndex < keyCount; keyIndex++) {
    const p = partOf[keyIndex];
    const part = parts[p];
    const slot = sizes[p]++;
    const pos = positions[keyIndex];
    for (let j = 0; j < stride; j++) part.args[1 + slot * stride + j] = args[pos + j];
    part.keyIndexes[slot] = keyIndex;
  }
  return parts;
}

/** Sends each part of one key as `rule.single` (GET, SET) instead of the client's command. */
export function useSingleCommands(parts: SplitPart[], rule: SplitRule): void {
  const single = rule.single;
  if (single === undefined) return;
  for (let p = 0; p < parts.length; p++) if (parts[p].keyIndexes.length === 1) parts[p].args[0] = single;
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

  constructor(owner: ReplyOwner, private readonly rule: SplitRule, protected readonly parts: readonly SplitPart[], private readonly keyCount: number) {
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
   * MGET: each part's values, located by their bulk headers in its raw reply and copied in key
   * order into one buffer; nothing decoded, no buffer per value.
   */
  private mergeValues(frames: Buffer[]): Buffer {
    const n = this.keyCount;
    // For key k: the part reply holding its value, and the value frame's bounds in it.
    const source = new Array<Buffer>(n);
    const bounds = new Array<number>(2 * n);
    const resp3 = this.owner.protocol === 3;
    const header = `*${n}\r\n`;
    let size = header.length;
    for (let i = 0; i < frames.length; i++) {
      const keyIndexes = this.parts[i].keyIndexes;
      if (frames[i][0] === 36 /* $ */ && keyIndexes.length === 1) {
        // A GET part: its reply is the value's frame.
        const k = keyIndexes[0];
        source[k] = frames[i];
        bounds[2 * k] = 0;
        bounds[2 * k + 1] = frames[i].length;
        size += frames[i].length;
        continue;
      }
      const found = arrayElementBounds(frames[i]);
      if (found === null || found.length !== 2 * keyIndexes.length) throw new Error('MGET part reply is not an array of its keys');
      for (let j = 0; j < keyIndexes.length; j++) {
        const k = keyIndexes[j];
        source[k] = frames[i];
        bounds[2 * k] = found[2 * j];
        bounds[2 * k + 1] = found[2 * j + 1];
        size += found[2 * j + 1] - found[2 * j];
      }
    }
    const out = Buffer.allocUnsafe(size);
    let at = out.write(header, 0, 'latin1');
    for (let k = 0; k < n; k++) {
      const frame = source[k];
      const start = bounds[2 * k];
      const end = bounds[2 * k + 1];
      if (resp3 && frame[start + 1] === 45) {
        // Parts speak RESP2 (PartSession); a RESP3 client gets RESP3's null (`_`), as from one Redis.
        at += encode.RESP3_NULL.copy(out, at);
        continue;
      }
      at = encode.copyBytes(frame, start, end, out, at);
    }
    return at === size ? out : out.subarray(0, at);
  }

  /** The error of the part holding the earliest key, if any part failed. */
  private firstError(frames: Buffer[]): Buffer | undefined {
    let best: Buffer | undefined;
    let bestKey = Infinity;
    frames.forEach((f, i) => {
      if (f[0] === 45 && this.parts[i].keyIndexes[0] < bestKey) {
        best = f;
        bestKey = this.parts[i].keyIndexes[0];
      }
    });
    return best;
  }
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

  constructor(readonly id: number, private readonly split: SplitCommand, private readonly index: number) {}

  /** A tracking client's parts read from masters as its whole requests do. */
  get readsMasterOnly(): boolean {
    return this.split.owner.readsMasterOnly === true;
  }

  pushOutOfBand(): void {
    // Invalidations go to the client, never to a part.
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
});
