/**
 * The part of a followed node's replication stream that side B is too far behind to take yet,
 * kept in a local file in the stream's order with its offsets, so the link is read at full speed
 * whatever B's pace (follow.ts):
 *
 *   link bytes --(B behind by more than MEMORY_BYTES)--> appended at the file's end
 *   the follower <--(B back within MEMORY_BYTES)-- taken from the file's start, in order
 *
 * StreamSpool is the file; StreamIntake decides where each chunk goes and pauses the link.
 *
 * The file is unlinked as soon as it is opened: it is this process's scratch, gone when the
 * follower stops or the process dies (even by kill -9). A restart or takeover resumes from the
 * offset B recorded, never from a spool. Bounded by `maxBytes`: once full, the follower stops
 * reading the link and the node holds the rest, as for a slow replica, until B has taken half of
 * the spool (one warning, one count and the `full` flag per such episode).
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { ReplicationLink } from '../replication/link';
import { log } from '../telemetry/log';

export interface Spooled {
  chunk: Buffer;
  /** Offset of chunk[0] in the stream. */
  first: number;
}

export class StreamSpool {
  private fd: number | null = null;
  /** File position of the next byte to take. */
  private readAt = 0;
  /** File position after the last byte appended. */
  private writeAt = 0;
  /** Stream offset of the byte at `readAt`. */
  private nextOffset = 0;

  constructor(
    /** Where the file is made (removed from the folder at once). */
    private readonly file: string,
    readonly maxBytes: number,
  ) {}

  /** Stream bytes in the file, not taken yet. */
  get bytes(): number {
    return this.writeAt - this.readAt;
  }

  get full(): boolean {
    return this.bytes >= this.maxBytes;
  }

  /** Stream bytes after the last ones appended (`first`: the offset of chunk[0]); throws on a gap or a write error. */
  append(chunk: Buffer, first: number): void {
    if (this.fd === null) {
      this.fd = fs.openSync(this.file, 'w+', 0o600);
      fs.rmSync(this.file, { force: true });
    }
    if (this.bytes === 0) this.nextOffset = first;
    else if (this.nextOffset + this.bytes !== first) throw new Error(`stream spool: bytes from ${first} do not follow ${this.nextOffset + this.bytes - 1}`);
    for (let done = 0; done < chunk.length; ) done += fs.writeSync(this.fd, chunk, done, chunk.length - done, this.writeAt + done);
    this.writeAt += chunk.length;
  }

  /** Up to `max` bytes from the start of what is spooled, in order; null when nothing is. */
  take(max: number): Spooled | null {
    const n = Math.min(max, this.bytes);
    if (n === 0 || this.fd === null) return null;
    const chunk = Buffer.allocUnsafe(n);
    for (let done = 0; done < n; ) {
      const read = fs.readSync(this.fd, chunk, done, n - done, this.readAt + done);
      if (read === 0) throw new Error(`stream spool: the file ends at ${this.readAt + done}, before ${this.writeAt}`);
      done += read;
    }
    const first = this.nextOffset;
    this.readAt += n;
    this.nextOffset += n;
    if (this.bytes === 0) this.clear();
    return { chunk, first };
  }

  /** Forgets what is spooled (a new link starts a new stream); the file's space is given back. */
  clear(): void {
    this.readAt = 0;
    this.writeAt = 0;
    if (this.fd !== null) fs.ftruncateSync(this.fd, 0);
  }

  close(): void {
    this.readAt = 0;
    this.writeAt = 0;
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

/** Stream bytes parsed and not yet on B, held in memory; beyond them the link's bytes go to the spool. */
export const MEMORY_BYTES = 4 * 1024 * 1024;
/** Bytes taken from the spool at a time. */
const TAKE_BYTES = 256 * 1024;

/** What the intake asks of its follower (follow.ts). */
export interface IntakeHost {
  /** Stream bytes parsed and not yet applied on B. */
  inMemory(): number;
  /** Bytes handed on to the stream reader, in the stream's order. */
  parse(chunk: Buffer, first: number): void;
  /** False once the follow stopped or failed: nothing more is taken in. */
  taking(): boolean;
  fail(reason: string): void;
}

/**
 * Where the link's stream bytes go: straight to the follower while B is within MEMORY_BYTES, else
 * to the spool, and back from it as B catches up. Once bytes are spooled, all later ones are too
 * until the spool is taken in, so the order holds. A full spool stops reading the link.
 */
export class StreamIntake {
  private readonly spool: StreamSpool;
  /** The link not read while the spool is full. */
  private paused: ReplicationLink | null = null;
  private pausedAt = 0;
  /** Times the spool filled and the link stopped being read. */
  fulls = 0;

  constructor(
    file: string,
    maxBytes: number,
    private readonly source: string,
    private readonly host: IntakeHost,
  ) {
    this.spool = new StreamSpool(file, maxBytes);
  }

  /** Stream bytes waiting in the spool file. */
  get spooled(): number {
    return this.spool.bytes;
  }

  /** True while the spool is full and the link is not read (until B has taken half of it). */
  get full(): boolean {
    return this.paused !== null;
  }

  /** Bytes from the link; true when they went straight to the follower. */
  heard(link: ReplicationLink, chunk: Buffer, first: number): boolean {
    if (this.spool.bytes === 0 && this.host.inMemory() < MEMORY_BYTES) {
      this.host.parse(chunk, first);
      return true;
    }
    try {
      this.spool.append(chunk, first);
    } catch (err) {
      // What is not applied comes again from A: the resume starts at B's recorded offsets.
      this.spool.clear();
      link.close(`cannot spool the stream: ${err instanceof Error ? err.message : String(err)}`);
      return false;
    }
    if (this.spool.full && this.paused === null) {
      this.paused = link;
      this.pausedAt = performance.now();
      this.fulls++;
      link.pause();
      log.warn({ node: this.source, spooledBytes: this.spool.bytes }, 'migration: the follow\'s stream spool is full (side B is slow); the link is not read until side B catches up, and side A holds the stream as for a slow replica');
    }
    return false;
  }

  /** Spooled bytes handed on while B is within MEMORY_BYTES, the link read again once there is room; true when some were. */
  take(): boolean {
    if (this.spool.bytes === 0 && this.paused === null) return false;
    let took = false;
    while (this.spool.bytes > 0 && this.host.inMemory() < MEMORY_BYTES && this.host.taking()) {
      let taken: Spooled | null;
      try {
        taken = this.spool.take(TAKE_BYTES);
      } catch (err) {
        this.spool.clear();
        this.host.fail(`the stream spool cannot be read: ${err instanceof Error ? err.message : String(err)}`);
        return took;
      }
      if (taken === null) break;
      this.host.parse(taken.chunk, taken.first);
      took = true;
    }
    // Read again once half is taken, so a B that stays slow makes few long episodes, not one per chunk.
    if (this.paused !== null && this.spool.bytes <= this.spool.maxBytes / 2) {
      this.paused.resume();
      this.paused = null;
      log.info({ node: this.source, pausedMs: Math.round(performance.now() - this.pausedAt), spooledBytes: this.spool.bytes }, 'migration: the follow\'s stream spool has room again; the link is read again');
    }
    return took;
  }

  /** A new link: a new stream. */
  reset(): void {
    this.spool.clear();
    this.paused = null;
  }

  close(): void {
    this.spool.close();
    this.paused = null;
  }
}
