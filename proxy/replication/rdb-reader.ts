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
// type's program (rdb-values.ts, run by value-skipper.ts), which can stop between any two steps
// when the bytes run out and go on from there at the next push, so even a huge value is read once.
// Anything the reader does not know (a newer RDB version, a type, an opcode, a module value)
// throws an RdbFormatError that names it: a snapshot is never carried in part.

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
} from './rdb-lengths';
import { MODULE_AUX_PROGRAM, RDB_TYPE_MODULE_2, RDB_TYPE_MODULE_PRE_GA, TYPE_NAMES, VALUE_PROGRAMS } from './rdb-values';
import { DONE, ValueSkipper } from './value-skipper';
import { OPCODE_AUX, OPCODE_EOF, OPCODE_EXPIRETIME, OPCODE_EXPIRETIME_MS, OPCODE_FREQ, OPCODE_FUNCTION2, OPCODE_FUNCTION_PRE_GA, OPCODE_IDLE, OPCODE_MODULE_AUX, OPCODE_RESIZEDB, OPCODE_SELECTDB, OPCODE_SLOT_INFO, MAX_RDB_VERSION, RdbEntry, RdbFormatError, RdbHandlers, RdbReaderOptions } from './rdb-format';
export { MAX_RDB_VERSION, RdbFormatError } from './rdb-format';
export type { RdbEntry, RdbHandlers, RdbReaderOptions } from './rdb-format';


const HEADER_LENGTH = 9; // "REDIS" and the version in 4 digits
const FIRST_CHECKSUMMED_VERSION = 5;
const MIN_BUFFER = 64 * 1024;
const MAX_SPARE = 1024 * 1024;
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

  // The entry being read: its type and key, where its value starts (from pos) and how far it got.
  private entryType = 0;
  private key: Buffer = Buffer.alloc(0);
  private valueOffset = 0;
  private wanted = true;
  private readonly skipper = new ValueSkipper();

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
    if (this.owned && this.buf.length <= MAX_SPARE) this.spare = this.buf; // a huge entry's buffer is let go
    this.base += this.filled;
    this.buf = chunk;
    this.owned = false;
    this.pos = 0;
    this.filled = chunk.length;
  }

  /** Copies the unread rest of a chunk read in place into a buffer of the reader's own. */
  private keepRest(): void {
    const rest = this.filled - this.pos;
    let target = this.spare;
    if (target === null || target.length < Math.max(rest, this.knownNeed())) target = this.newBuffer(rest);
    this.spare = null;
    this.moveRestTo(target);
  }

  private append(chunk: Buffer): void {
    if (this.filled + chunk.length > this.buf.length) {
      const held = this.filled - this.pos + chunk.length;
      this.moveRestTo(held <= this.buf.length ? this.buf : this.newBuffer(held));
    }
    chunk.copy(this.buf, this.filled);
    this.filled += chunk.length;
  }

  /** Bytes from the record's start that the record is known to need (a long string's whole length). */
  private knownNeed(): number {
    return this.needAbs - (this.base + this.pos);
  }

  /** A buffer for `held` bytes and more: twice that, or all a long string is known to need. */
  private newBuffer(held: number): Buffer {
    return Buffer.allocUnsafe(Math.max(MIN_BUFFER, 2 * held, this.knownNeed()));
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
          this.pos += this.skipper.progress;
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
      this.wanted = this.handlers.wantEntry?.(this.db, this.key, opcode) ?? true;
      this.entryType = opcode;
      this.valueOffset = keyEnd - at;
      this.skipper.start(program, this.valueOffset);
      this.state = State.Value;
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
        this.skipper.start(MODULE_AUX_PROGRAM, 1);
        this.state = State.ModuleAux;
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

  /** Runs the value's (or module AUX record's) program on; true when it reached its end. */
  private runProgram(): boolean {
    const result = this.skipper.run(this.buf, this.pos, this.filled, this.scan);
    if (result === DONE) return true;
    if (result === BAD) {
      const at = this.pos + this.skipper.progress;
      throw this.fail(`${this.scan.error} at byte ${this.base + at} ${this.reading()}`, at);
    }
    this.needAbs = this.base + this.scan.need;
    return false;
  }

  private finishEntry(): void {
    const buf = this.buf;
    const valueStart = this.pos + this.valueOffset;
    const valueEnd = this.pos + this.skipper.progress;
    if (!this.wanted) {
      this.pos = valueEnd;
      this.expireAtMs = null;
      this.state = State.Record;
      return;
    }
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
        if (opcode < 0) return 'before the EOF opcode';
        if (VALUE_PROGRAMS[opcode] !== undefined) {
          return `in the key of an entry (type ${opcode}, ${TYPE_NAMES.get(opcode) ?? '?'}) that starts at byte ${this.base + this.pos}`;
        }
        return `in the record of opcode ${opcode} that starts at byte ${this.base + this.pos}`;
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
