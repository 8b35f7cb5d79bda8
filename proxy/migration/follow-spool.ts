/**
 * The part of a followed node's replication stream that side B is too far behind to take yet,
 * kept in a local file in the stream's order with its offsets, so the link is read at full speed
 * whatever B's pace (follow.ts):
 *
 *   link bytes --(B behind by more than the in-memory window)--> appended at the file's end
 *   the follower <--(B back within the window)-- taken from the file's start, in order
 *
 * The file is unlinked as soon as it is opened: it is this process's scratch, gone when the
 * follower stops or the process dies (even by kill -9). A restart or takeover resumes from the
 * offset B recorded, never from a spool. Bounded by `maxBytes`: once full, the follower stops
 * reading the link and the node holds the rest, as for a slow replica.
 */
import fs from 'node:fs';

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
