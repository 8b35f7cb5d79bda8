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
 * came in, and only the undecoded tail is kept (and joined to the next chunk). A bulk that is still
 * arriving is gathered as a list of chunks and joined once, when it is whole.
 *
 * Error texts are Redis's own (networking.c), because clients and tests match on them.
 */

export interface DecoderLimits {
  /** Largest single request (sum of its bulk lengths), checked before any of it is buffered. */
  maxRequestBytes: number;
  /** Largest multibulk count (Redis: 1024*1024). */
  maxArgs: number;
  /** Longest inline line, and longest `*`/`$` header line (Redis: 64 KiB). */
  maxInlineBytes: number;
}

export interface RequestSink {
  /** One whole request. `raw` is its exact RESP bytes when it came in one chunk, else null. */
  onRequest(args: Buffer[], raw: Buffer | null): void;
  /** The stream is broken; the message is Redis's ("Protocol error: ..."). No more calls follow. */
  onProtocolError(message: string): void;
}

const CR = 13;
const LF = 10;
const STAR = 42;
const DOLLAR = 36;
const MINUS = 45;

const NEED_MORE = -1;
const FAILED = -2;

export class RequestDecoder {
  /** Undecoded bytes; a request or header in progress starts at offset 0. */
  private tail: Buffer | null = null;
  /** Chunks of a bulk still arriving, and their total length, joined once `needed` is reached. */
  private parked: Buffer[] = [];
  private parkedLength = 0;
  private needed = 0;

  /** Multibulk in progress: how many arguments are still expected (0: none in progress). */
  private remaining = 0;
  private args: Buffer[] = [];
  /** Length of the bulk whose header was read but whose body has not arrived (-1: none). */
  private bulkLength = -1;
  /** Bytes announced so far by the request in progress, for maxRequestBytes. */
  private requestBytes = 0;
  /** True while the request in progress began in an earlier chunk (its raw bytes are scattered). */
  private spansChunks = false;
  private failed = false;

  constructor(private readonly limits: DecoderLimits, private readonly sink: RequestSink) {}

  /** Bytes held for requests not yet whole (for memory accounting). */
  get bufferedBytes(): number {
    return (this.tail === null ? 0 : this.tail.length) + this.parkedLength;
  }

  push(chunk: Buffer): void {
    if (this.failed) return;
    let buf: Buffer;
    if (this.needed > 0) {
      this.parked.push(chunk);
      this.parkedLength += chunk.length;
      if (this.parkedLength < this.needed) return;
      buf = Buffer.concat(this.parked, this.parkedLength);
      this.parked = [];
      this.parkedLength = 0;
      this.needed = 0;
    } else if (this.tail !== null) {
      buf = Buffer.concat([this.tail, chunk]);
    } else {
      buf = chunk;
    }
    this.tail = null;
    this.decode(buf);
  }

  private decode(buf: Buffer): void {
    let pos = 0;
    const end = buf.length;
    while (pos < end) {
      const start = pos;
      if (this.remaining === 0) {
        // A new request: `*<count>` or an inline line.
        this.spansChunks = false;
        if (buf[pos] !== STAR) {
          pos = this.decodeInline(buf, pos);
        } else {
          pos = this.readMultibulkHeader(buf, pos);
        }
        if (pos === FAILED) return;
        if (pos === NEED_MORE) {
          this.keep(buf, start);
          return;
        }
        if (this.remaining === 0) continue; // `*0`, an empty inline line, or a whole inline request
      }
      pos = this.readArguments(buf, pos, start);
      if (pos === FAILED) return;
      if (pos === NEED_MORE) return; // readArguments kept what it needs
    }
  }

  /** Reads `*<n>\r\n`; sets `remaining`. Returns the position after it. */
  private readMultibulkHeader(buf: Buffer, pos: number): number {
    const lineEnd = findLineEnd(buf, pos + 1, this.limits.maxInlineBytes);
    if (lineEnd === NEED_MORE) return NEED_MORE;
    if (lineEnd === FAILED) return this.fail('Protocol error: too big mbulk count string');
    const n = parseLength(buf, pos + 1, lineEnd);
    if (n === FAILED || n > this.limits.maxArgs || n > 0x7fffffff) {
      return this.fail('Protocol error: invalid multibulk length');
    }
    this.args = [];
    this.remaining = n;
    this.requestBytes = 0;
    return lineEnd + 2;
  }

  /**
   * Reads the bulk arguments of the multibulk in progress. `requestStart` is where the request began
   * in `buf` (its raw bytes), unless it began in an earlier chunk.
   */
  private readArguments(buf: Buffer, pos: number, requestStart: number): number {
    const end = buf.length;
    while (this.remaining > 0) {
      if (this.bulkLength < 0) {
        if (pos >= end) return this.keepFrom(buf, pos);
        if (buf[pos] !== DOLLAR) {
          return this.fail(`Protocol error: expected '$', got '${String.fromCharCode(buf[pos])}'`);
        }
        const lineEnd = findLineEnd(buf, pos + 1, this.limits.maxInlineBytes);
        if (lineEnd === NEED_MORE) return this.keepFrom(buf, pos);
        if (lineEnd === FAILED) return this.fail('Protocol error: too big bulk count string');
        const len = parseLength(buf, pos + 1, lineEnd);
        if (len === FAILED || len > this.limits.maxRequestBytes) return this.fail('Protocol error: invalid bulk length');
        this.requestBytes += len;
        if (this.requestBytes > this.limits.maxRequestBytes) {
          return this.fail(`Protocol error: request larger than ${this.limits.maxRequestBytes} bytes`);
        }
        this.bulkLength = len;
        pos = lineEnd + 2;
      }
      const bodyEnd = pos + this.bulkLength;
      if (bodyEnd + 2 > end) {
        // Wait for the whole body without re-scanning on every chunk.
        this.keepFrom(buf, pos);
        this.needed = this.bulkLength + 2;
        this.parked = [this.tail as Buffer];
        this.parkedLength = (this.tail as Buffer).length;
        this.tail = null;
        return NEED_MORE;
      }
      // Like Redis, the two bytes after a bulk are taken as its CRLF without being checked.
      this.args.push(buf.subarray(pos, bodyEnd));
      pos = bodyEnd + 2;
      this.bulkLength = -1;
      this.remaining--;
    }
    const args = this.args;
    this.args = [];
    const raw = this.spansChunks ? null : buf.subarray(requestStart, pos);
    this.spansChunks = false;
    this.sink.onRequest(args, raw);
    return pos;
  }

  /** Inline command: one line, split like Redis's sdssplitargs. Returns the position after it. */
  private decodeInline(buf: Buffer, pos: number): number {
    const nl = buf.indexOf(LF, pos);
    if (nl < 0) {
      if (buf.length - pos > this.limits.maxInlineBytes) return this.fail('Protocol error: too big inline request');
      return NEED_MORE;
    }
    if (nl - pos > this.limits.maxInlineBytes) return this.fail('Protocol error: too big inline request');
    const lineEnd = nl > pos && buf[nl - 1] === CR ? nl - 1 : nl;
    const args = splitInlineArgs(buf.subarray(pos, lineEnd));
    if (args === null) return this.fail('Protocol error: unbalanced quotes in request');
    if (args.length > 0) this.sink.onRequest(args, null);
    return nl + 1;
  }

  /** Keeps buf[from..] for the next chunk; the request in progress no longer has contiguous raw bytes. */
  private keepFrom(buf: Buffer, from: number): number {
    this.spansChunks = true;
    this.keep(buf, from);
    return NEED_MORE;
  }

  private keep(buf: Buffer, from: number): void {
    // Copy, so a small tail does not pin a large chunk in memory.
    this.tail = Buffer.from(buf.subarray(from));
  }

  private fail(message: string): number {
    this.failed = true;
    this.tail = null;
    this.parked = [];
    this.parkedLength = 0;
    this.args = [];
    this.sink.onProtocolError(message);
    return FAILED;
  }
}

/**
 * Index of the CR ending the header line that starts at `from` (the byte after it is taken as LF,
 * as Redis does), NEED_MORE while it has not arrived, FAILED when the line is longer than maxLine.
 */
function findLineEnd(buf: Buffer, from: number, maxLine: number): number {
  const limit = Math.min(buf.length, from + maxLine + 1);
  for (let i = from; i < limit; i++) {
    if (buf[i] === CR) return i + 1 < buf.length ? i : NEED_MORE;
  }
  return limit === buf.length ? NEED_MORE : FAILED;
}

/** A non-negative decimal length in buf[from, to); FAILED for anything else (sign, junk, overflow). */
function parseLength(buf: Buffer, from: number, to: number): number {
  if (to <= from || to - from > 15) return FAILED;
  // Like Redis's string2ll: no sign, and no leading zero unless the number is 0 itself.
  if (buf[from] === MINUS || (buf[from] === 48 && to - from > 1)) return FAILED;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = buf[i] - 48;
    if (d < 0 || d > 9) return FAILED;
    n = n * 10 + d;
  }
  return n;
}

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
