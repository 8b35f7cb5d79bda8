/**
 * Back-end replies cut into whole raw frames, without decoding them.
 *
 * A reply that is only forwarded is never turned into JS values: redis-parser would lose its type
 * (`+OK` and `$2\r\nOK` decode alike) and cost an allocation per element. The framer only finds where
 * each top-level reply ends; frames that lie inside one chunk are handed out as sub-arrays of it
 * (no copy). A reply split across chunks is resumed where the scan stopped: the open aggregates are
 * kept as a stack of remaining element counts, and a long bulk is waited for without re-scanning.
 *
 * Understands RESP2 and RESP3 types, so a back end speaking either can be framed.
 */
// Imported, not the global: Node 20's global `Buffer` is a getter, called on every use (bench/NOTES.md, round 10).
import { Buffer } from 'node:buffer';

const CR = 13;

const MIN_ACC = 16 * 1024;

// What each RESP type byte introduces (0: not a RESP type).
const LINE = 1;
const BULK = 2;
const AGGREGATE = 3;
const MAP = 4;
const KIND = new Uint8Array(256);
for (const c of '+-:_,#(') KIND[c.charCodeAt(0)] = LINE;
for (const c of '$!=') KIND[c.charCodeAt(0)] = BULK;
for (const c of '*~>') KIND[c.charCodeAt(0)] = AGGREGATE;
for (const c of '%|') KIND[c.charCodeAt(0)] = MAP;
const ATTRIBUTE = 124;

export class ReplyFramingError extends Error {}

export class ReplyFramer {
  /**
   * Bytes of the frame in progress (starting at offset 0; `accLength` of them are valid), or null
   * when none is in progress. It grows by doubling, so a reply arriving in many chunks is copied
   * O(n) times in all, not once per chunk.
   */
  private acc: Buffer | null = null;
  private accLength = 0;
  /** Where scanning of `acc` resumes. */
  private scanPos = 0;
  /** Elements still expected by each open aggregate, innermost last. */
  private readonly stack: number[] = [];
  /** `acc` must hold this many bytes before scanning is worth resuming. */
  private needed = 0;

  /** Calls onFrame for every whole reply, in order. Throws ReplyFramingError on bytes that are not RESP. */
  push(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let buf: Buffer;
    let end: number;
    let pos: number;
    if (this.acc === null) {
      buf = chunk;
      end = chunk.length;
      pos = 0;
    } else {
      this.append(chunk);
      if (this.accLength < this.needed) return;
      buf = this.acc as Buffer;
      end = this.accLength;
      pos = this.scanPos;
    }
    let frameStart = 0;
    const stack = this.stack;
    // Frames are views of `buf` made from its ArrayBuffer, read once here: buf.subarray() would
    // read buf.buffer (a call into V8's runtime) for every frame.
    const memory = buf.buffer;
    const offset = buf.byteOffset;
    this.needed = 0;
    while (pos < end) {
      // Scan one value at `pos`.
      const type = buf[pos];
      const kind = KIND[type];
      if (kind === 0) throw new ReplyFramingError(`not a RESP reply: type byte 0x${type.toString(16)}`);
      const cr = buf.indexOf(CR, pos + 1);
      if (cr < 0 || cr + 1 >= end) break;
      const lineEnd = cr + 2;
      let valueEnd = lineEnd;
      let children = 0;
      if (kind === BULK) {
        const len = parseSigned(buf, pos + 1, cr);
        if (len > 0) valueEnd = lineEnd + len + 2;
        else if (len === 0) valueEnd = lineEnd + 2;
        if (valueEnd > end) {
          this.needed = valueEnd - frameStart;
          break;
        }
      } else if (kind === AGGREGATE || kind === MAP) {
        const n = parseSigned(buf, pos + 1, cr);
        children = n < 0 ? 0 : kind === MAP ? n * 2 : n;
      }
      pos = valueEnd;
      if (type === ATTRIBUTE) {
        // An attribute is followed by the value it annotates: count that one too.
        stack.push(children + 1);
        continue;
      }
      if (children > 0) {
        stack.push(children);
        continue;
      }
      // A leaf (or empty aggregate) completes: close every aggregate it completes.
      while (stack.length > 0) {
        const top = stack.length - 1;
        if (--stack[top] > 0) break;
        stack.pop();
      }
      if (stack.length === 0) {
        onFrame(Buffer.from(memory, offset + frameStart, pos - frameStart));
        frameStart = pos;
      }
    }
    if (frameStart === end && stack.length === 0) {
      this.acc = null;
      this.accLength = 0;
      return;
    }
    this.scanPos = pos - frameStart;
    if (buf !== this.acc || frameStart > 0) {
      // Frames handed out may point into `buf`: the unfinished rest goes to a buffer of its own.
      const rest = end - frameStart;
      const fresh = Buffer.allocUnsafe(Math.max(rest * 2, MIN_ACC, this.needed));
      buf.copy(fresh, 0, frameStart, end);
      this.acc = fresh;
      this.accLength = rest;
    }
    if (this.needed <= this.accLength) this.needed = this.accLength + 1;
  }

  /** Bytes held for a reply not yet whole. */
  get bufferedBytes(): number {
    return this.acc === null ? 0 : this.accLength;
  }

  private append(chunk: Buffer): void {
    let acc = this.acc as Buffer;
    const total = this.accLength + chunk.length;
    if (total > acc.length) {
      const grown = Buffer.allocUnsafe(Math.max(total, acc.length * 2, this.needed));
      acc.copy(grown, 0, 0, this.accLength);
      acc = grown;
      this.acc = grown;
    }
    chunk.copy(acc, this.accLength);
    this.accLength = total;
  }
}

/** The RESP length or integer at [from, to) of `buf`: digits, maybe a minus sign (else a ReplyFramingError). */
export function parseSigned(buf: Buffer, from: number, to: number): number {
  let i = from;
  let sign = 1;
  if (buf[i] === 45) {
    sign = -1;
    i++;
  }
  if (i >= to) throw new ReplyFramingError('not a RESP reply: empty length');
  let n = 0;
  for (; i < to; i++) {
    const d = buf[i] - 48;
    if (d < 0 || d > 9) throw new ReplyFramingError('not a RESP reply: bad length');
    n = n * 10 + d;
  }
  return sign * n;
}

/**
 * Where the elements of a whole array reply frame lie in it: their [start, end) offsets, flat
 * (start0, end0, start1, end1, ...), or null when `frame` is not an array (an error, a null array).
 * No view per element. Bulk strings and nulls, all an MGET holds, are cut by their length headers;
 * from the first element of another type on, a ReplyFramer cuts the rest.
 */
export function arrayElementBounds(frame: Buffer): number[] | null {
  if (frame[0] !== 42 || frame[1] === 45) return null; // '*', and not '*-1'
  const cr = frame.indexOf(CR, 1);
  const count = parseSigned(frame, 1, cr);
  const bounds = new Array<number>(2 * count);
  let at = cr + 2;
  for (let i = 0; i < count; i++) {
    if (frame[at] !== 36) return framedBounds(frame, at, i, bounds); // not '$'
    const end = frame.indexOf(CR, at + 1);
    const len = parseSigned(frame, at + 1, end);
    const next = len < 0 ? end + 2 : end + 2 + len + 2;
    bounds[2 * i] = at;
    bounds[2 * i + 1] = next;
    at = next;
  }
  return bounds;
}

/** The elements of a whole array reply frame (an EXEC reply, say), each a view; null when it is no array. */
export function arrayElements(frame: Buffer): Buffer[] | null {
  const bounds = arrayElementBounds(frame);
  if (bounds === null) return null;
  const elements = new Array<Buffer>(bounds.length / 2);
  for (let i = 0; i < elements.length; i++) elements[i] = frame.subarray(bounds[2 * i], bounds[2 * i + 1]);
  return elements;
}

/** Fills `bounds` from element `first` on, which starts at `at`, with a ReplyFramer. */
function framedBounds(frame: Buffer, at: number, first: number, bounds: number[]): number[] {
  let i = first;
  let pos = at;
  new ReplyFramer().push(frame.subarray(at), (element) => {
    bounds[2 * i] = pos;
    pos += element.length;
    bounds[2 * i + 1] = pos;
    i++;
  });
  if (2 * i !== bounds.length) throw new ReplyFramingError('not a RESP reply: an array is cut short');
  return bounds;
}
