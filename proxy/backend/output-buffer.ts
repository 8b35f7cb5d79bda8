/**
 * A back-end connection's output (connection.ts): the requests accepted since its last write, in
 * the order they were sent.
 */
import net from 'node:net';
/** Bytes at which a request is written by reference instead of copied into the output buffer. */
const COPY_LIMIT = 64 * 1024;
/** An output buffer grown past this is dropped after its write, not kept for the next. */
const KEEP_LIMIT = 1024 * 1024;

/**
 * The bytes of the requests accepted since the last write. Small requests are copied into one
 * buffer, which is written with one write and reused when the kernel took all of it at once (the
 * socket then holds no reference to it). A large request is kept by reference, not copied: the
 * write is then a writev of the pieces.
 */
export class OutputBuffer {
  private buf: Buffer | null = null;
  private length = 0;
  /** Once a large request came: what to write, in order (sealed parts of `buf`, large requests); `buf` then holds the tail. */
  private pieces: Buffer[] | null = null;

  append(payload: Buffer): void {
    if (payload.length >= COPY_LIMIT) {
      this.seal();
      (this.pieces ??= []).push(payload);
      return;
    }
    const need = this.length + payload.length;
    if (this.buf === null || need > this.buf.length) this.grow(need);
    (this.buf as Buffer).set(payload, this.length);
    this.length = need;
  }

  /** Writes everything appended since the last call; returns what socket.write returned. */
  writeTo(socket: net.Socket): boolean {
    if (this.pieces !== null) {
      this.seal();
      const pieces = this.pieces;
      this.pieces = null;
      socket.cork();
      let ok = true;
      for (const p of pieces) ok = socket.write(p);
      socket.uncork();
      return ok;
    }
    const buf = this.buf as Buffer;
    const ok = socket.write(this.length === buf.length ? buf : buf.subarray(0, this.length));
    this.length = 0;
    // Still queued in the socket (the kernel did not take it all): it is the socket's now.
    if (socket.writableLength > 0 || buf.length > KEEP_LIMIT) this.buf = null;
    return ok;
  }

  /** Moves what `buf` holds into `pieces` as a view; a new `buf` is allocated for what comes next. */
  private seal(): void {
    if (this.length === 0) return;
    (this.pieces ??= []).push((this.buf as Buffer).subarray(0, this.length));
    this.buf = null;
    this.length = 0;
  }

  private grow(need: number): void {
    const next = Buffer.allocUnsafeSlow(Math.max(need, this.buf === null ? 16 * 1024 : 2 * this.buf.length));
    if (this.buf !== null && this.length > 0) this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}
