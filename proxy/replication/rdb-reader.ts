// The snapshot reader: an RDB (the file SAVE writes, the payload of a replica's full sync) pushed in
// chunks of any size, cut into entries whose values stay exactly as the RDB holds them, each with
// the DUMP payload `DUMP key` on that server answers (type byte, value bytes, 2-byte RDB version,
// CRC64), ready for `RESTORE key <ttl> <dump> ABSTTL REPLACE` elsewhere.
//
//   push(chunk) -> [header] -> records: AUX, SELECTDB, RESIZEDB, EXPIRETIME, FUNCTION2, ...
//                                       type byte + key + value -> onEntry({ key, dump, ... })
//               -> EOF -> CRC64 of the file -> onEnd
//
// It keeps only the bytes of the record it is reading: a chunk is read in place, and only a record
// that a chunk cuts in two is copied into the reader's own buffer. A value is skipped with its
// type's program (rdb-values.ts), which can stop between any two steps when the bytes run out and
// go on from there at the next push, so even a huge value is read once. Anything the reader does
// not know (a newer RDB version, a type, an opcode, a module value) throws an RdbFormatError that
// names it: a snapshot is never carried in part.

import { Crc64 } from './crc64';
import {
  BAD,
  copyInto,
  Scan,
  decodeString,
  moduleTypeName,
  newScan,
  readCount,
  readModuleId,
  reach,
  skipLength,
  skipString,
  skipTextDouble,
} from './rdb-lengths';
import {
  BYTES,
  END,
  LEN,
  LOOP,
  MODULE_AUX_PROGRAM,
  MODULE_FIELDS,
  RDB_TYPE_MODULE_2,
  RDB_TYPE_MODULE_PRE_GA,
  STR,
  TEXT_DOUBLE,
  TYPE_NAMES,
  VALUE_PROGRAMS,
} from './rdb-values';

/** The newest RDB version the reader knows (Redis 7.4). */
export const MAX_RDB_VERSION = 12;

/** One key of the snapshot. */
export interface RdbEntry {
  /** The database (SELECTDB) the key is in. */
  db: number;
  /** The key, decoded (RDB keys may be integer-encoded or LZF-compressed). */
  key: Buffer;
  /** Absolute expiry in unix milliseconds (EXPIRETIME_MS, or EXPIRETIME in seconds), or null. */
  expireAtMs: number | null;
  /** The RDB type byte (rdb-values.ts TYPE_NAMES). */
  type: number;
  /** Exactly what `DUMP key` answers on the server that wrote the snapshot. */
  dump: Buffer;
}

/** What the reader reports, in the snapshot's order. Buffers handed out are the handler's to keep. */
export interface RdbHandlers {
  /** The RDB version of the header (10 for Redis 7.0, 11 for 7.2 and Valkey 8, 12 for 7.4). */
  onHeader?(version: number): void;
  /** An AUX field (redis-ver, repl-id, repl-offset, ...). */
  onAux?(name: Buffer, value: Buffer): void;
  onSelectDb?(db: number): void;
  /** The sizes hint of the selected database. */
  onResizeDb?(dbSize: number, expiresSize: number): void;
  onEntry(entry: RdbEntry): void;
  /** A function library, as FUNCTION LOAD takes it. */
  onFunction(code: Buffer): void;
  /** The end of the snapshot, with the file's CRC64 (0n when it was saved without one). */
  onEnd(checksum: bigint): void;
}

export interface RdbReaderOptions {
  /** Check the file's CRC64 at its end (a mismatch throws). @default true */
  verifyChecksum?: boolean;
}

/** The bytes pushed are not an RDB this reader can carry; `offset` is where, from the file's start. */
export class RdbFormatError extends Error {
  override name = 'RdbFormatError';
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(message);
  }
}

const OPCODE_SLOT_INFO = 244;
const OPCODE_FUNCTION2 = 245;
const OPCODE_FUNCTION_PRE_GA = 246;
const OPCODE_MODULE_AUX = 247;
const OPCODE_IDLE = 248;
const OPCODE_FREQ = 249;
const OPCODE_AUX = 250;
const OPCODE_RESIZEDB = 251;
const OPCODE_EXPIRETIME_MS = 252;
const OPCODE_EXPIRETIME = 253;
const OPCODE_SELECTDB = 254;
const OPCODE_EOF = 255;

const HEADER_LENGTH = 9; // "REDIS" and the version in 4 digits
const FIRST_CHECKSUMMED_VERSION = 5;
const MIN_BUFFER = 64 * 1024;
const MAX_LOOP_DEPTH = 4;
const TWO_POW_32 = 4294967296;

const enum State {
  Header,
  Record,
  Value,
  ModuleAux,
  Checksum,
  Done,
  Failed,
}

export class RdbReader {
  private state = State.Header;
  private failure: Error | null = null;
  private version = 0;

  /** The bytes being read: a pushed chunk (read in place) or the reader's own copy. */
  private buf: Buffer = Buffer.alloc(0);
  private owned = false;
  /** A buffer of the reader's own kept for the next record a chunk cuts in two. */
  private spare: Buffer | null = null;
  /** Offset of buf[0] from the start of the file. */
  private base = 0;
  /** Where the current record starts in buf: everything before it is read. */
  private pos = 0;
  /** Where the bytes in buf end. */
  private filled = 0;
  /** Nothing can be read before the file reaches this offset (set when a read ran out of bytes). */
  private needAbs = 0;

  private readonly scan: Scan = newScan();
  private readonly verify: boolean;
  private readonly fileCrc = new Crc64();
  /** Offset from the file's start up to which fileCrc has been fed. */
  private crcDoneAbs = 0;
  private readonly dumpCrc = new Crc64();

  private db = 0;
  private expireAtMs: number | null = null;

  // The value being read: its type, key and program, and how far it got (offsets from pos).
  private entryType = 0;
  private key: Buffer = Buffer.alloc(0);
  private valueOffset = 0;
  private progress = 0;
  private program: readonly number[] = [];
  private pc = 0;
  private depth = 0;
  private moduleFieldsEnded = false;
  private readonly loopBody: number[] = new Array<number>(MAX_LOOP_DEPTH).fill(0);
  private readonly loopLeft: number[] = new Array<number>(MAX_LOOP_DEPTH).fill(0);

  /** Offset just past the RDB's last byte, once it is read. */
  private rdbEndAbs = -1;

  constructor(
    private readonly handlers: RdbHandlers,
    options: RdbReaderOptions = {},
  ) {
    this.verify = options.verifyChecksum ?? true;
  }

  /** Bytes of the RDB read so far (whole records). */
  get position(): number {
    return this.base + this.pos;
  }

  /** True once the EOF opcode and the checksum are read. */
  get done(): boolean {
    return this.state === State.Done;
  }

  /**
   * Reads a chunk. Answers how many of its bytes belong to the RDB: all of them until the RDB ends,
   * then those up to its last byte (what follows is not the RDB's: a diskless sync's end mark, the
   * replication stream), and 0 for chunks pushed after the end. The reader keeps no reference to
   * the chunk once push returns, so its memory may be reused. Throws RdbFormatError, or what a
   * handler threw; after a throw the reader is finished and throws the same error again.
   */
  push(chunk: Buffer): number {
    if (this.state === State.Failed) throw this.failure ?? new Error('RDB reader failed');
    if (this.state === State.Done) return 0;
    const chunkStartAbs = this.base + this.filled;
    if (this.pos === this.filled) this.readInPlace(chunk);
    else this.append(chunk);
    try {
      this.parse();
    } catch (err) {
      this.state = State.Failed;
      this.failure = err instanceof Error ? err : new Error(String(err));
      throw err;
    }
    if (this.done) return Math.max(0, this.rdbEndAbs - chunkStartAbs);
    // Done with the chunk before answering: the caller may reuse its memory.
    this.checksumThrough(this.pos);
    if (this.pos < this.filled && !this.owned) this.keepRest();
    return chunk.length;
  }

  /** The input ended: throws when the RDB is not complete. */
  end(): void {
    if (this.state === State.Failed) throw this.failure ?? new Error('RDB reader failed');
    if (this.state === State.Done) return;
    const error = new RdbFormatError(`RDB truncated at byte ${this.base + this.filled}: ${this.reading()}`, this.base + this.filled);
    this.state = State.Failed;
    this.failure = error;
    throw error;
  }

  // --- buffers ---

  private readInPlace(chunk: Buffer): void {
    this.checksumThrough(this.pos);
    if (this.owned) this.spare = this.buf;
    this.base += this.filled;
    this.buf = chunk;
    this.owned = false;
    this.pos = 0;
    this.filled = chunk.length;
  }

  /** Copies the unread rest of a chunk read in place into a buffer of the reader's own. */
  private keepRest(): void {
    const rest = this.filled - this.pos;
    const wanted = Math.max(this.needAbs - (this.base + this.pos), rest);
    let target = this.spare;
    if (target === null || target.length < wanted) target = Buffer.allocUnsafe(Math.max(MIN_BUFFER, 2 * wanted));
    this.spare = null;
    this.moveRestTo(target);
  }

  private append(chunk: Buffer): void {
    if (this.filled + chunk.length > this.buf.length) {
      const needed = this.filled - this.pos + chunk.length;
      this.moveRestTo(needed <= this.buf.length ? this.buf : Buffer.allocUnsafe(Math.max(MIN_BUFFER, 2 * needed)));
    }
    chunk.copy(this.buf, this.filled);
    this.filled += chunk.length;
  }

  /** Moves buf[pos, end) to the start of target, which becomes buf. */
  private moveRestTo(target: Buffer): void {
    this.checksumThrough(this.pos);
    if (target === this.buf) this.buf.copyWithin(0, this.pos, this.filled);
    else this.buf.copy(target, 0, this.pos, this.filled);
    this.base += this.pos;
    this.filled -= this.pos;
    this.pos = 0;
    this.buf = target;
    this.owned = true;
  }

  /** Feeds the file's CRC with everything before `upTo` (an index in buf) it has not seen. */
  private checksumThrough(upTo: number): void {
    const from = this.crcDoneAbs - this.base;
    if (upTo <= from) return;
    if (this.verify) this.fileCrc.update(this.buf, from, upTo);
    this.crcDoneAbs = this.base + upTo;
  }

  // --- records ---

  private parse(): void {
    while (this.base + this.filled >= this.needAbs) {
      switch (this.state) {
        case State.Header:
          if (!this.readHeader()) return;
          break;
        case State.Record:
          if (!this.readRecord()) return;
          break;
        case State.Value:
          if (!this.runProgram()) return;
          this.finishEntry();
          break;
        case State.ModuleAux:
          if (!this.runProgram()) return;
          this.pos += this.progress;
          this.state = State.Record;
          break;
        case State.Checksum:
          if (!this.readChecksum()) return;
          return;
        default:
          return;
      }
    }
  }

  private readHeader(): boolean {
    if (this.filled - this.pos < HEADER_LENGTH) return this.waitFor(this.pos + HEADER_LENGTH);
    const header = this.buf.toString('latin1', this.pos, this.pos + HEADER_LENGTH);
    if (!/^REDIS\d{4}$/.test(header)) throw this.fail(`not an RDB file: it starts with ${JSON.stringify(header)}`, this.pos);
    const version = Number(header.slice(5));
    if (version < 1 || version > MAX_RDB_VERSION) {
      throw this.fail(`RDB version ${version} is not supported (this reader knows versions 1 to ${MAX_RDB_VERSION})`, this.pos + 5);
    }
    this.version = version;
    this.pos += HEADER_LENGTH;
    this.state = State.Record;
    this.handlers.onHeader?.(version);
    return true;
  }

  /** Reads the record at pos when all of it is there (a value: its key, then State.Value). */
  private readRecord(): boolean {
    const buf = this.buf;
    const end = this.filled;
    const scan = this.scan;
    const at = this.pos;
    if (at >= end) return this.waitFor(at + 1);
    const opcode = buf[at];
    const body = at + 1;
    const program = VALUE_PROGRAMS[opcode];
    if (program !== undefined) {
      const keyEnd = skipString(buf, body, end, scan);
      if (keyEnd < 0) return this.stopped(keyEnd, body);
      this.key = this.decode(body, keyEnd);
      this.entryType = opcode;
      this.valueOffset = keyEnd - at;
      this.progress = this.valueOffset;
      this.startProgram(program, State.Value);
      return true;
    }
    let next: number;
    switch (opcode) {
      case OPCODE_EXPIRETIME_MS:
        next = reach(body + 8, end, scan);
        if (next < 0) return this.stopped(next, body);
        this.expireAtMs = buf.readInt32LE(body + 4) * TWO_POW_32 + buf.readUInt32LE(body);
        break;
      case OPCODE_EXPIRETIME:
        next = reach(body + 4, end, scan);
        if (next < 0) return this.stopped(next, body);
        this.expireAtMs = buf.readInt32LE(body) * 1000;
        break;
      case OPCODE_SELECTDB:
        next = readCount(buf, body, end, scan);
        if (next < 0) return this.stopped(next, body);
        this.db = scan.value;
        this.handlers.onSelectDb?.(this.db);
        break;
      case OPCODE_RESIZEDB: {
        const second = readCount(buf, body, end, scan);
        if (second < 0) return this.stopped(second, body);
        const dbSize = scan.value;
        next = readCount(buf, second, end, scan);
        if (next < 0) return this.stopped(next, second);
        this.handlers.onResizeDb?.(dbSize, scan.value);
        break;
      }
      case OPCODE_SLOT_INFO: // slot id, keys, keys with an expiry: a cluster's sizing hint
        next = this.skipLengths(body, 3);
        if (next < 0) return false;
        break;
      case OPCODE_IDLE: // LRU idle time and LFU frequency of the next key: not carried by RESTORE here
        next = readCount(buf, body, end, scan);
        if (next < 0) return this.stopped(next, body);
        break;
      case OPCODE_FREQ:
        next = reach(body + 1, end, scan);
        if (next < 0) return this.stopped(next, body);
        break;
      case OPCODE_AUX: {
        const nameEnd = skipString(buf, body, end, scan);
        if (nameEnd < 0) return this.stopped(nameEnd, body);
        next = skipString(buf, nameEnd, end, scan);
        if (next < 0) return this.stopped(next, nameEnd);
        this.handlers.onAux?.(this.decode(body, nameEnd), this.decode(nameEnd, next));
        break;
      }
      case OPCODE_FUNCTION2:
        next = skipString(buf, body, end, scan);
        if (next < 0) return this.stopped(next, body);
        this.handlers.onFunction(this.decode(body, next));
        break;
      case OPCODE_MODULE_AUX:
        this.progress = 1;
        this.startProgram(MODULE_AUX_PROGRAM, State.ModuleAux);
        return true;
      case OPCODE_EOF:
        this.checksumThrough(body);
        this.pos = body;
        this.state = this.version >= FIRST_CHECKSUMMED_VERSION ? State.Checksum : State.Done;
        if (this.state === State.Done) this.finish(0n);
        return true;
      case RDB_TYPE_MODULE_PRE_GA:
        throw this.fail(`RDB type 6 (module, pre-GA) cannot be carried`, at);
      case RDB_TYPE_MODULE_2: {
        const keyEnd = skipString(buf, body, end, scan);
        if (keyEnd < 0) return this.stopped(keyEnd, body);
        const module = readModuleId(buf, keyEnd, end, scan);
        if (module.next < 0) return this.stopped(module.next, keyEnd);
        const { name, encver } = moduleTypeName(module.id);
        const key = printable(this.decode(body, keyEnd));
        throw this.fail(`RDB type 7 (module '${name}' encver ${encver}, id ${module.id}) of key ${key} cannot be carried`, at);
      }
      case OPCODE_FUNCTION_PRE_GA:
        throw this.fail('RDB opcode 246 (function library in the format of Redis 7.0 release candidates) is not supported', at);
      default:
        throw this.fail(`unknown RDB opcode 0x${opcode.toString(16).padStart(2, '0')} (${opcode}) at byte ${this.base + at}`, at);
    }
    this.pos = next;
    return true;
  }

  /** Skips `count` lengths; -1 when the bytes run out first. */
  private skipLengths(from: number, count: number): number {
    let next = from;
    for (let i = 0; i < count; i++) {
      const at = next;
      next = skipLength(this.buf, at, this.filled, this.scan);
      if (next < 0) {
        this.stopped(next, at);
        return next;
      }
    }
    return next;
  }

  private startProgram(program: readonly number[], state: State): void {
    this.program = program;
    this.pc = 0;
    this.depth = 0;
    this.state = state;
  }

  /** Runs the current program from where it stopped; true when it reached its end. */
  private runProgram(): boolean {
    const buf = this.buf;
    const end = this.filled;
    const scan = this.scan;
    const program = this.program;
    let p = this.pos + this.progress;
    let pc = this.pc;
    let next = 0;
    while (pc < program.length) {
      switch (program[pc]) {
        case STR:
          next = skipString(buf, p, end, scan);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          pc++;
          break;
        case LEN:
          next = skipLength(buf, p, end, scan);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          pc++;
          break;
        case TEXT_DOUBLE:
          next = skipTextDouble(buf, p, end, scan);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          pc++;
          break;
        case BYTES:
          next = reach(p + program[pc + 1], end, scan);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          pc += 2;
          break;
        case LOOP:
          next = readCount(buf, p, end, scan);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          if (scan.value === 0) {
            pc = program[pc + 1];
          } else {
            this.loopBody[this.depth] = pc + 2;
            this.loopLeft[this.depth] = scan.value;
            this.depth++;
            pc += 2;
          }
          break;
        case END:
          if (--this.loopLeft[this.depth - 1] > 0) {
            pc = this.loopBody[this.depth - 1];
          } else {
            this.depth--;
            pc++;
          }
          break;
        case MODULE_FIELDS:
          next = this.skipModuleField(p);
          if (next < 0) return this.pause(next, p, pc);
          p = next;
          if (this.moduleFieldsEnded) pc++;
          break;
        default:
          throw this.fail(`RDB reader: bad program step ${program[pc]}`, p);
      }
    }
    this.progress = p - this.pos;
    this.pc = pc;
    return true;
  }

  /** One annotated module field (its opcode, then its value), or the EOF opcode that ends them. */
  private skipModuleField(p: number): number {
    const scan = this.scan;
    const afterOpcode = readCount(this.buf, p, this.filled, scan);
    if (afterOpcode < 0) return afterOpcode;
    this.moduleFieldsEnded = scan.value === 0;
    switch (scan.value) {
      case 0:
        return afterOpcode;
      case 1: // signed integer
      case 2: // unsigned integer
        return skipLength(this.buf, afterOpcode, this.filled, scan);
      case 3: // float
        return reach(afterOpcode + 4, this.filled, scan);
      case 4: // double
        return reach(afterOpcode + 8, this.filled, scan);
      case 5: // string
        return skipString(this.buf, afterOpcode, this.filled, scan);
      default:
        scan.error = `unknown module value opcode ${scan.value}`;
        return BAD;
    }
  }

  /** Saves where the program stopped; false for NEED, throws for BAD. */
  private pause(code: number, p: number, pc: number): boolean {
    if (code === BAD) throw this.fail(`${this.scan.error} at byte ${this.base + p} ${this.reading()}`, p);
    this.progress = p - this.pos;
    this.pc = pc;
    this.needAbs = this.base + this.scan.need;
    return false;
  }

  private finishEntry(): void {
    const buf = this.buf;
    const valueStart = this.pos + this.valueOffset;
    const valueEnd = this.pos + this.progress;
    const valueLength = valueEnd - valueStart;
    const dump = Buffer.allocUnsafe(valueLength + 11);
    dump[0] = this.entryType;
    copyInto(buf, valueStart, valueEnd, dump, 1);
    const footer = valueLength + 1;
    dump[footer] = this.version & 0xff;
    dump[footer + 1] = this.version >>> 8;
    const crc = this.dumpCrc;
    crc.hi = 0;
    crc.lo = 0;
    crc.update(dump, 0, footer + 2);
    crc.writeLE(dump, footer + 2);
    const entry: RdbEntry = { db: this.db, key: this.key, expireAtMs: this.expireAtMs, type: this.entryType, dump };
    this.pos = valueEnd;
    this.expireAtMs = null;
    this.state = State.Record;
    this.handlers.onEntry(entry);
  }

  private readChecksum(): boolean {
    const at = this.pos;
    if (this.filled - at < 8) return this.waitFor(at + 8);
    const stored = this.buf.readBigUInt64LE(at);
    if (this.verify && stored !== 0n && stored !== this.fileCrc.value()) {
      throw this.fail(
        `RDB checksum mismatch: the file says ${hex(stored)}, its bytes give ${hex(this.fileCrc.value())}`,
        at,
      );
    }
    this.pos = at + 8;
    this.finish(stored);
    return true;
  }

  private finish(checksum: bigint): void {
    this.state = State.Done;
    this.rdbEndAbs = this.base + this.pos;
    this.handlers.onEnd(checksum);
  }

  // --- helpers ---

  private decode(start: number, stop: number): Buffer {
    const decoded = decodeString(this.buf, start, stop, this.scan);
    if (decoded === null) throw this.fail(`invalid LZF string at byte ${this.base + start}`, start);
    return decoded;
  }

  private waitFor(position: number): boolean {
    this.needAbs = this.base + position;
    return false;
  }

  /** A record read stopped at `at`: false for NEED (wait), throws for BAD. */
  private stopped(code: number, at: number): boolean {
    if (code === BAD) throw this.fail(`${this.scan.error} at byte ${this.base + at}`, at);
    this.needAbs = this.base + this.scan.need;
    return false;
  }

  /** What the reader is in the middle of, for messages. */
  private reading(): string {
    switch (this.state) {
      case State.Header:
        return 'in the header';
      case State.Value:
        return `in the value of key ${printable(this.key)} (type ${this.entryType}, ${TYPE_NAMES.get(this.entryType) ?? '?'}) that starts at byte ${this.base + this.pos}`;
      case State.ModuleAux:
        return `in the module AUX record that starts at byte ${this.base + this.pos}`;
      case State.Checksum:
        return 'in the checksum after the EOF opcode';
      default: {
        const opcode = this.pos < this.filled ? this.buf[this.pos] : -1;
        return opcode < 0 ? 'before the EOF opcode' : `in the record 0x${opcode.toString(16)} that starts at byte ${this.base + this.pos}`;
      }
    }
  }

  private fail(message: string, at: number): RdbFormatError {
    return new RdbFormatError(message, this.base + at);
  }
}

function hex(n: bigint): string {
  return `0x${n.toString(16).padStart(16, '0')}`;
}

/** A key for a message: quoted, non-printable bytes escaped, cut at 80 characters. */
function printable(key: Buffer): string {
  let out = '';
  for (const byte of key.subarray(0, 80)) {
    out += byte >= 0x20 && byte < 0x7f && byte !== 0x27 && byte !== 0x5c ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `'${out}${key.length > 80 ? '...' : ''}'`;
}
