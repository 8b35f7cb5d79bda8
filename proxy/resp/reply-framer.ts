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

const CR = 13;

// RESP type bytes.
const LINE_TYPES = new Set([43 /* + */, 45 /* - */, 58 /* : */, 95 /* _ */, 44 /* , */, 35 /* # */, 40 /* ( */]);
const BULK_TYPES = new Set([36 /* $ */, 33 /* ! */, 61 /* = */]);
const ARRAY_TYPES = new Set([42 /* * */, 126 /* ~ */, 62 /* > */]);
const MAP_TYPES = new Set([37 /* % */, 124 /* | */]);
const ATTRIBUTE = 124;

export class ReplyFramingError extends Error {}

export class ReplyFramer {
  /** Bytes of the frame in progress (it starts at offset 0), or null when none is in progress. */
  private buf: Buffer | null = null;
  /** Where scanning of `buf` resumes. */
  private scanPos = 0;
  /** Elements still expected by each open aggregate, innermost last. */
  private stack: number[] = [];
  /** `buf` must hold this many bytes before scanning is worth resuming. */
  private needed = 0;
  private parked: Buffer[] = [];
  private parkedLength = 0;

  /** Calls onFrame for every whole reply, in order. Throws ReplyFramingError on bytes that are not RESP. */
  push(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let buf: Buffer;
    if (this.buf === null) {
      buf = chunk;
    } else {
      this.parked.push(chunk);
      this.parkedLength += chunk.length;
      if (this.parkedLength < this.needed) return;
      buf = Buffer.concat(this.parked, this.parkedLength);
      this.parked = [];
    }
    let frameStart = 0;
    let pos = this.buf === null ? 0 : this.scanPos;
    this.buf = null;
    const end = buf.length;
    const stack = this.stack;
    while (pos < end) {
      // Scan one value at `pos`.
      const type = buf[pos];
      const cr = buf.indexOf(CR, pos + 1);
      if (cr < 0 || cr + 1 >= end) break;
      const lineEnd = cr + 2;
      let valueEnd: number;
      let children = 0;
      if (LINE_TYPES.has(type)) {
        valueEnd = lineEnd;
      } else if (BULK_TYPES.has(type)) {
        const len = parseSigned(buf, pos + 1, cr);
        valueEnd = len < 0 ? lineEnd : lineEnd + len + 2;
        if (valueEnd > end) {
          this.needed = valueEnd - frameStart;
          break;
        }
      } else if (ARRAY_TYPES.has(type) || MAP_TYPES.has(type)) {
        const n = parseSigned(buf, pos + 1, cr);
        children = n < 0 ? 0 : MAP_TYPES.has(type) ? n * 2 : n;
        valueEnd = lineEnd;
      } else {
        throw new ReplyFramingError(`not a RESP reply: type byte 0x${type.toString(16)}`);
      }
      pos = valueEnd;
      if (children > 0) {
        // An attribute map is followed by the value it annotates: count that one too.
        stack.push(type === ATTRIBUTE ? children + 1 : children);
        continue;
      }
      if (type === ATTRIBUTE) {
        stack.push(1);
        continue;
      }
      // A leaf (or empty aggregate) completes: close every aggregate it completes.
      while (stack.length > 0) {
        const top = stack.length - 1;
        stack[top]--;
        if (stack[top] > 0) break;
        stack.pop();
      }
      if (stack.length === 0) {
        onFrame(buf.subarray(frameStart, pos));
        frameStart = pos;
        this.needed = 0;
      }
    }
    if (frameStart < end || stack.length > 0) {
      // Copy, so a small unfinished frame does not pin the whole chunk.
      const rest = frameStart === 0 ? buf : Buffer.from(buf.subarray(frameStart));
      this.buf = rest;
      this.scanPos = pos - frameStart;
      this.parked = [rest];
      this.parkedLength = rest.length;
      if (this.needed <= rest.length) this.needed = rest.length + 1;
    } else {
      this.needed = 0;
      this.parked = [];
      this.parkedLength = 0;
    }
  }

  /** Bytes held for a reply not yet whole. */
  get bufferedBytes(): number {
    return this.buf === null ? 0 : this.parkedLength;
  }
}

function parseSigned(buf: Buffer, from: number, to: number): number {
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
