/**
 * Client requests: RESP arrays of bulk strings and inline commands, decoded into argument Buffers.
 *
 * Why not redis-parser here: it buffers a bulk of any announced length, turns negative lengths into
 * null, rejects inline commands and cannot tell us where a request's raw bytes start and end. This
 * decoder checks every length against the limits *before* buffering, and hands back the request's
 * own bytes (`raw`) when it arrived in one chunk, so the hot path forwards them untouched instead of
 * re-encoding. redis-parser still decodes the back-end replies the proxy acts on (decode-reply.ts).
 *
 * State survives chunk boundaries: the arguments decoded so far stay as sub-arrays of the chunks they
 * came in. What is still undecoded (a line without its end, a bulk still arriving) is parked as a
 * list of chunks and joined once, when it is whole; a line is scanned once, chunk by chunk, so a
 * client that writes a byte at a time costs no more than one that writes it all at once.
 *
 * Redis 7.0's networking.c (processInlineBuffer, processMultibulkBuffer), to the letter:
 * - A request starting with `*` is a multibulk, anything else an inline line.
 * - A line is found as Redis's strchr() finds it: an inline line ends at the first LF, a `*` or `$`
 *   line at the first CR (the byte after it is taken as its LF, unchecked, and must have arrived).
 *   A NUL before that end hides it for good, as it ends the C string: the line waits, like any
 *   line without an end, until more than maxInlineBytes (64 KiB) are held, then "too big ...".
 *   As in Redis, the 64 KiB are counted when bytes arrive (what one read brought), not per line: a
 *   line whose end has arrived is decoded, whatever its length.
 * - `*<n>` with n <= 0 (`*0`, `*-10`) is skipped; n over INT_MAX (or maxArgs) is an error.
 * - `$` is checked once its line has ended, so `expected '$', got 'x'` waits for the CR as Redis
 *   does; a CR or LF there is written as a space (Redis keeps a reply on one line).
 * - Before AUTH (sink.authenticated false), a count over 10 and a bulk over 16384 are refused.
 *
 * Error texts are Redis's own; a message is latin1 (one char a byte), as `got 'x'` can be any byte.
 */
// Imported, not the global: Node 20's global `Buffer` is a getter, called on every use (bench/NOTES.md, round 10).
import { Buffer } from 'node:buffer';

export interface DecoderLimits {
  /** Largest single request (sum of its bulk lengths), checked before any of it is buffered. */
  maxRequestBytes: number;
  /** Largest multibulk count (Redis 7.0: INT_MAX). */
  maxArgs: number;
  /** Bytes held for an inline line or a `*`/`$` line that has not ended (Redis: 64 KiB). */
  maxInlineBytes: number;
}

export interface RequestSink {
  /** One whole request. `raw` is its exact RESP bytes when it came in one chunk, else null. */
  onRequest(args: Buffer[], raw: Buffer | null): void;
  /** The stream is broken; the message is Redis's ("Protocol error: ..."), latin1. No more calls follow. */
  onProtocolError(message: string): void;
  /** False while the client must still AUTH (absent: true); read only for a count over 10 or a bulk over 16 KiB. */
  readonly authenticated?: boolean;
}

const CR = 13;
const LF = 10;
const NUL = 0;
const STAR = 42;
const DOLLAR = 36;
const MINUS = 45;
const ZERO = 48;

const NEED_MORE = -1;
const FAILED = -2;
const UNKNOWN = -3;

/** What a parked line is: it picks the line's end byte and its "too big" text. */
const NO_LINE = -1;
const INLINE_LINE = 0;
const COUNT_LINE = 1;
const LENGTH_LINE = 2;
const TOO_BIG = [
  'Protocol error: too big inline request',
  'Protocol error: too big mbulk count string',
  'Protocol error: too big bulk count string',
];
const INVALID_MBULK = 'Protocol error: invalid multibulk length';
const INVALID_BULK = 'Protocol error: invalid bulk length';

const INT_MAX = 2147483647;
/** Redis allocates argv for at most 1024 arguments before they arrive (networking.c); so do we. */
const ARGS_PREALLOCATED = 1024;
/** Redis's limits before AUTH (networking.c). */
const UNAUTH_MAX_COUNT = 10;
const UNAUTH_MAX_BULK = 16384;
/** parseLongLong's answers for a negative number, and for what Redis's string2ll refuses (small ints, so lengths stay small ints). */
const NEGATIVE = -1;
const INVALID = -2;

const EMPTY_MEMORY = new ArrayBuffer(0);

export class RequestDecoder {
  /**
   * Undecoded bytes, as the chunks they came in: a line without its end, or a bulk still arriving.
   * The line (or bulk) in progress starts at offset 0 of the first one.
   */
  private parked: Buffer[] = [];
  private parkedLength = 0;
  /** A bulk is parked: the bytes needed (body and CRLF) before it is joined. 0: none. */
  private needed = 0;
  /** A line is parked: which kind (NO_LINE: none). */
  private line = NO_LINE;
  /** The parked line's CR is its last byte so far (one more byte ends it). */
  private lineCr = false;
  /** The parked line holds a NUL before any end: it can only grow until it is too big. */
  private lineBlocked = false;

  /** Multibulk in progress: how many arguments are still expected (0: none in progress). */
  private remaining = 0;
  private args: Buffer[] = [];
  /** Arguments of the request in progress read so far (filled by index: no growth from a push). */
  private argCount = 0;
  /** Length of the bulk whose header was read but whose body has not arrived (-1: none). */
  private bulkLength = -1;
  /** Bytes announced so far by the request in progress, for maxRequestBytes. */
  private requestBytes = 0;
  /** True while the request in progress began in an earlier chunk (its raw bytes are scattered). */
  private spansChunks = false;
  private failed = false;
  /** Inline lines: the first NUL at or after the line in `decode`'s buffer (-1: none; UNKNOWN: not looked for). */
  private nulAt = UNKNOWN;

  /** The memory and offset of the chunk `decode` is reading (see view()). */
  private chunkMemory: ArrayBufferLike = EMPTY_MEMORY;
  private chunkOffset = 0;

  constructor(private limits: DecoderLimits, private sink: RequestSink) {}

  /**
   * Lends this decoder, idle, to another stream (server/session.ts: one decoder serves every client
   * that has no request half-read). Returns it for chaining.
   */
  use(limits: DecoderLimits, sink: RequestSink): this {
    this.limits = limits;
    this.sink = sink;
    return this;
  }

  /** No request in progress, nothing parked, not failed: it may serve another stream. */
  get idle(): boolean {
    return this.remaining === 0 && this.line === NO_LINE && this.needed === 0 && this.parkedLength === 0 && !this.failed;
  }

  /** Bytes held for requests not yet whole (for memory accounting). */
  get bufferedBytes(): number {
    return this.parkedLength;
  }

  push(chunk: Buffer): void {
    if (this.failed) return;
    if (this.needed > 0) {
      this.parked.push(chunk);
      this.parkedLength += chunk.length;
      if (this.parkedLength < this.needed) return;
      this.needed = 0;
    } else if (this.line !== NO_LINE) {
      this.parked.push(chunk);
      this.parkedLength += chunk.length;
      if (!this.lineEndsIn(chunk)) {
        // Redis's check after a read: more than 64 KiB held and still no end.
        if (!this.lineCr && this.parkedLength > this.limits.maxInlineBytes) this.fail(TOO_BIG[this.line]);
        return;
      }
      this.line = NO_LINE;
    } else {
      this.decode(chunk);
      return;
    }
    const buf = this.parked.length === 1 ? this.parked[0] : Buffer.concat(this.parked, this.parkedLength);
    this.parked = [];
    this.parkedLength = 0;
    this.decode(buf);
  }

  private decode(buf: Buffer): void {
    let pos = 0;
    const end = buf.length;
    this.nulAt = UNKNOWN;
    this.chunkMemory = buf.buffer;
    this.chunkOffset = buf.byteOffset;
    while (pos < end) {
      const start = pos;
      if (this.remaining === 0) {
        // A new request: `*<count>` or an inline line.
        this.spansChunks = false;
        pos = buf[pos] === STAR ? this.readCount(buf, pos) : this.readInline(buf, pos);
        if (pos < 0) return; // FAILED, or NEED_MORE with the line parked
        if (this.remaining === 0) continue; // `*0`, `*-1`, an empty inline line, or a whole inline request
      }
      pos = this.readArguments(buf, pos, start);
      if (pos < 0) return;
    }
  }

  /** Reads `*<n>\r\n`; sets `remaining` (left 0 for n <= 0, which Redis skips). Returns the position after it. */
  private readCount(buf: Buffer, pos: number): number {
    const cr = findLineEnd(buf, pos + 1, CR); // buf[pos] is the '*'
    if (cr < 0) return this.holdLine(buf, pos, COUNT_LINE);
    const n = parseLongLong(buf, pos + 1, cr);
    if (n === INVALID || n > INT_MAX || n > this.limits.maxArgs) return this.fail(INVALID_MBULK);
    if (n > UNAUTH_MAX_COUNT && this.sink.authenticated === false) {
      return this.fail('Protocol error: unauthenticated multibulk length');
    }
    if (n > 0) {
      // Sized up front, capped as Redis caps its argv allocation, so a huge count reserves nothing.
      this.args = new Array<Buffer>(Math.min(n, ARGS_PREALLOCATED));
      this.argCount = 0;
      this.remaining = n;
      this.requestBytes = 0;
    }
    return cr + 2;
  }

  /**
   * Reads the bulk arguments of the multibulk in progress. `requestStart` is where the request began
   * in `buf` (its raw bytes), unless it began in an earlier chunk.
   */
  private readArguments(buf: Buffer, pos: number, requestStart: number): number {
    const end = buf.length;
    while (this.remaining > 0) {
      if (this.bulkLength < 0) {
        // Redis finds the line's end before it looks at the first byte (which may be the CR itself).
        const first = buf[pos];
        const cr = findLineEnd(buf, first === DOLLAR ? pos + 1 : pos, CR);
        if (cr < 0) return this.holdLine(buf, pos, LENGTH_LINE);
        if (first !== DOLLAR) {
          // Redis's addReplyErrorFormat turns CR and LF into spaces.
          const got = first === CR || first === LF ? ' ' : String.fromCharCode(first);
          return this.fail(`Protocol error: expected '$', got '${got}'`);
        }
        const len = parseLongLong(buf, pos + 1, cr);
        if (len < 0 || len > this.limits.maxRequestBytes) return this.fail(INVALID_BULK); // INVALID or NEGATIVE
        if (len > UNAUTH_MAX_BULK && this.sink.authenticated === false) {
          return this.fail('Protocol error: unauthenticated bulk length');
        }
        this.requestBytes += len;
        if (this.requestBytes > this.limits.maxRequestBytes) {
          return this.fail(`Protocol error: request larger than ${this.limits.maxRequestBytes} bytes`);
        }
        this.bulkLength = len;
        pos = cr + 2;
      }
      const bodyEnd = pos + this.bulkLength;
      if (bodyEnd + 2 > end) {
        // Wait for the whole body without re-scanning on every chunk.
        this.park(buf, pos);
        this.spansChunks = true;
        this.needed = this.bulkLength + 2;
        return NEED_MORE;
      }
      // Like Redis, the two bytes after a bulk are taken as its CRLF without being checked.
      this.args[this.argCount++] = this.view(pos, bodyEnd);
      pos = bodyEnd + 2;
      this.bulkLength = -1;
      this.remaining--;
    }
    const args = this.args;
    this.args = [];
    // Without pipelining a read holds one request: the chunk itself is its raw bytes, no new view.
    const raw = this.spansChunks ? null : requestStart === 0 && pos === end ? buf : this.view(requestStart, pos);
    this.spansChunks = false;
    this.sink.onRequest(args, raw);
    return pos;
  }

  /**
   * buf[start, end) of the chunk being decoded, as a Buffer over the same memory. Not
   * `buf.subarray()`: that reads `buf.buffer` for every argument, a call into V8's runtime each
   * time; the chunk's ArrayBuffer is read once per chunk instead.
   */
  private view(start: number, end: number): Buffer {
    return Buffer.from(this.chunkMemory, this.chunkOffset + start, end - start);
  }

  /** Inline command: one line, split like Redis's sdssplitargs. Returns the position after it. */
  private readInline(buf: Buffer, pos: number): number {
    // findLineEnd's rule, with native scans: the first LF, unless a NUL comes before it.
    const nl = buf.indexOf(LF, pos);
    if (nl >= 0 && (this.nulAt === UNKNOWN || (this.nulAt >= 0 && this.nulAt < pos))) this.nulAt = buf.indexOf(NUL, pos);
    if (nl < 0 || (this.nulAt >= 0 && this.nulAt < nl)) return this.holdLine(buf, pos, INLINE_LINE);
    const lineEnd = nl > pos && buf[nl - 1] === CR ? nl - 1 : nl;
    const args = splitInlineArgs(buf.subarray(pos, lineEnd));
    if (args === null) return this.fail('Protocol error: unbalanced quotes in request');
    if (args.length > 0) this.sink.onRequest(args, null);
    return nl + 1;
  }

  /**
   * The line at `from` has not ended in `buf`: parks it (NEED_MORE), or FAILED when more than
   * maxInlineBytes are held without an end (Redis's check after a read).
   */
  private holdLine(buf: Buffer, from: number, kind: number): number {
    const end = buf.length;
    // Why findLineEnd found no end: a NUL, a CR that is the last byte, or nothing yet.
    const term = kind === INLINE_LINE ? LF : CR;
    let i = from;
    while (i < end && buf[i] !== NUL && buf[i] !== term) i++;
    const cr = i < end && buf[i] === CR;
    if (!cr && end - from > this.limits.maxInlineBytes) return this.fail(TOO_BIG[kind]);
    this.park(buf, from);
    this.line = kind;
    this.lineCr = cr;
    this.lineBlocked = i < end && buf[i] === NUL;
    // A `$` line cut off: the request's bytes are no longer in one chunk. (A `*` line or an inline
    // line starts its request, so a request whose header was cut can still come whole.)
    if (kind === LENGTH_LINE) this.spansChunks = true;
    return NEED_MORE;
  }

  /** Scans a chunk added to the parked line: has the line ended? Each byte is scanned once. */
  private lineEndsIn(chunk: Buffer): boolean {
    if (this.lineCr) return true; // the byte after the CR has come
    if (this.lineBlocked) return false;
    const term = this.line === INLINE_LINE ? LF : CR;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (c > CR) continue;
      if (c === term) {
        if (term === LF || i + 1 < chunk.length) return true;
        this.lineCr = true;
        return false;
      }
      if (c === NUL) {
        this.lineBlocked = true;
        return false;
      }
    }
    return false;
  }

  /** Parks buf[from..] for the next chunk: copied, so a small tail does not pin a large chunk. */
  private park(buf: Buffer, from: number): void {
    if (from < buf.length) {
      this.parked = [Buffer.from(buf.subarray(from))];
      this.parkedLength = buf.length - from;
    }
  }

  private fail(message: string): number {
    this.failed = true;
    this.parked = [];
    this.parkedLength = 0;
    this.args = [];
    this.sink.onProtocolError(message);
    return FAILED;
  }
}

/**
 * Where the line at `from` ends, as Redis's strchr() finds it: `term` LF (an inline line), or CR
 * (a `*`/`$` line) with one byte after it, taken as its LF. -1 when it has not arrived, or a NUL
 * comes first: a NUL ends Redis's C string, so the end behind it is never found.
 */
function findLineEnd(buf: Buffer, from: number, term: number): number {
  const end = buf.length;
  for (let i = from; i < end; i++) {
    const c = buf[i];
    if (c > CR) continue; // most bytes: one comparison
    if (c === term) return term === LF || i + 1 < end ? i : -1;
    if (c === NUL) return -1;
  }
  return -1;
}

/**
 * Redis's string2ll over buf[from, to): an optional '-', then 0 alone or digits not starting with 0,
 * within a long long, in fewer than 21 bytes. Returns the value, NEGATIVE for any negative one (no
 * caller needs more), INVALID for the rest. The hot path is a length of up to 15 digits (exact).
 */
function parseLongLong(buf: Buffer, from: number, to: number): number {
  const len = to - from;
  if (len <= 0 || len > 15 || buf[from] === MINUS || (buf[from] === ZERO && len > 1)) return parseRareLongLong(buf, from, to);
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = buf[i] - ZERO;
    if (d < 0 || d > 9) return INVALID;
    n = n * 10 + d;
  }
  return n;
}

/** parseLongLong off the hot path: a sign, a leading zero, 16 to 20 digits, or nothing at all. */
function parseRareLongLong(buf: Buffer, from: number, to: number): number {
  if (to <= from || to - from >= 21) return INVALID;
  let i = from;
  const negative = buf[i] === MINUS;
  if (negative && ++i === to) return INVALID;
  const digits = to - i;
  // Past 2^53 the value is approximate, which no caller minds: limits are far below.
  let n = 0;
  for (let j = i; j < to; j++) {
    const d = buf[j] - ZERO;
    if (d < 0 || d > 9 || (d === 0 && j === i)) return INVALID; // no leading zero ("0" alone is the hot path's)
    n = n * 10 + d;
  }
  if (digits > 19 || (digits === 19 && !withinLongLong(buf, i, negative))) return INVALID;
  return negative ? NEGATIVE : n;
}

/** 19 digits at buf[i..]: at most 9223372036854775807, or ...808 for a negative number. */
function withinLongLong(buf: Buffer, i: number, negative: boolean): boolean {
  const max = negative ? LLONG_MIN_DIGITS : LLONG_MAX_DIGITS;
  for (let j = 0; j < 19; j++) {
    const d = buf[i + j] - max[j];
    if (d !== 0) return d < 0;
  }
  return true;
}

const LLONG_MAX_DIGITS = Buffer.from('9223372036854775807');
const LLONG_MIN_DIGITS = Buffer.from('9223372036854775808');

const SPACE = 32;
const DQUOTE = 34;
const SQUOTE = 39;
const BACKSLASH = 92;

/** C's isspace(): what separates words. */
function isSpace(c: number): boolean {
  return c === SPACE || c === 9 || c === 10 || c === 13 || c === 11 || c === 12;
}

/** What ends an unquoted word in sdssplitargs: fewer bytes than isspace() (not \v or \f). */
function endsWord(c: number): boolean {
  return c === SPACE || c === 9 || c === 10 || c === 13 || c === 0;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/**
 * Redis's sdssplitargs: words separated by blanks, "double quotes" with \n \r \t \b \a \\ \" \xHH
 * escapes, 'single quotes' with only \' escaped. A closing quote must be followed by a blank.
 * Returns null for unbalanced quotes.
 */
export function splitInlineArgs(line: Buffer): Buffer[] | null {
  const out: Buffer[] = [];
  let i = 0;
  const n = line.length;
  while (true) {
    while (i < n && isSpace(line[i])) i++;
    if (i >= n) return out;
    const bytes: number[] = [];
    let inDouble = false;
    let inSingle = false;
    let done = false;
    while (!done) {
      if (inDouble) {
        if (i >= n) return null;
        const c = line[i];
        if (c === BACKSLASH && i + 3 < n && line[i + 1] === 120 && hexValue(line[i + 2]) >= 0 && hexValue(line[i + 3]) >= 0) {
          bytes.push(hexValue(line[i + 2]) * 16 + hexValue(line[i + 3]));
          i += 3;
        } else if (c === BACKSLASH && i + 1 < n) {
          i++;
          const e = line[i];
          bytes.push(e === 110 ? 10 : e === 114 ? 13 : e === 116 ? 9 : e === 98 ? 8 : e === 97 ? 7 : e);
        } else if (c === DQUOTE) {
          if (i + 1 < n && !isSpace(line[i + 1])) return null;
          done = true;
        } else {
          bytes.push(c);
        }
      } else if (inSingle) {
        if (i >= n) return null;
        const c = line[i];
        if (c === BACKSLASH && i + 1 < n && line[i + 1] === SQUOTE) {
          i++;
          bytes.push(SQUOTE);
        } else if (c === SQUOTE) {
          if (i + 1 < n && !isSpace(line[i + 1])) return null;
          done = true;
        } else {
          bytes.push(c);
        }
      } else {
        if (i >= n) {
          done = true;
          break;
        }
        const c = line[i];
        if (endsWord(c)) done = true;
        else if (c === DQUOTE) inDouble = true;
        else if (c === SQUOTE) inSingle = true;
        else bytes.push(c);
      }
      if (i < n) i++;
    }
    out.push(Buffer.from(bytes));
  }
}
