/**
 * The RDB format's vocabulary the snapshot reader (rdb-reader.ts) speaks to its callers: what an
 * entry is, the handlers it reports to, its error, and the opcodes of the file's records.
 */
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
  /**
   * Asked once an entry's key is read: false reads its value past without making its dump (a key
   * that does not move costs only its reading). Without it every entry is wanted.
   */
  wantEntry?(db: number, key: Buffer, type: number): boolean;
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

export const OPCODE_SLOT_INFO = 244;
export const OPCODE_FUNCTION2 = 245;
export const OPCODE_FUNCTION_PRE_GA = 246;
export const OPCODE_MODULE_AUX = 247;
export const OPCODE_IDLE = 248;
export const OPCODE_FREQ = 249;
export const OPCODE_AUX = 250;
export const OPCODE_RESIZEDB = 251;
export const OPCODE_EXPIRETIME_MS = 252;
export const OPCODE_EXPIRETIME = 253;
export const OPCODE_SELECTDB = 254;
export const OPCODE_EOF = 255;
