/**
 * The replication stream cut into commands, each with the offset of its last byte: a command is
 * applied through `end` once it has run on side B, which is what ACK and a resume count by.
 * The node writes only arrays of bulk strings into the stream (replicationFeedSlaves), so anything
 * else is an error that stops the follow, never a skip.
 */
export interface StreamCommand {
  args: Buffer[];
  /** Offset of the command's last byte. */
  end: number;
}

export class StreamReader {
  private pending: Buffer = Buffer.alloc(0);
  /** Offset of pending[0]. */
  private pendingOffset = 0;
  /** Where command() stopped: the byte after the command it returned. */
  private next = 0;

  /** `firstOffset`: the offset of chunk[0]. Returns the whole commands now complete. */
  push(chunk: Buffer, firstOffset: number): StreamCommand[] {
    let data: Buffer;
    if (this.pending.length === 0) {
      data = chunk;
      this.pendingOffset = firstOffset;
    } else {
      if (this.pendingOffset + this.pending.length !== firstOffset) throw new Error(`replication stream: bytes from ${firstOffset} do not follow ${this.pendingOffset + this.pending.length - 1}`);
      data = Buffer.concat([this.pending, chunk]);
    }
    const out: StreamCommand[] = [];
    let pos = 0;
    for (;;) {
      const args = this.command(data, pos);
      if (args === null) break;
      pos = this.next;
      out.push({ args, end: this.pendingOffset + pos - 1 });
    }
    this.pending = pos === data.length ? Buffer.alloc(0) : Buffer.from(data.subarray(pos));
    this.pendingOffset += pos;
    return out;
  }

  /** Bytes received that do not make a whole command yet. */
  get partialBytes(): number {
    return this.pending.length;
  }

  /**
   * One command at `pos` (the byte after it in `next`), or null when `data` ends inside it. The hot
   * path of the follow: lengths are read in place, nothing but the arguments is allocated.
   */
  private command(data: Buffer, pos: number): Buffer[] | null {
    const size = data.length;
    if (pos >= size) return null;
    if (data[pos] !== 42 /* '*' */) throw new Error(`replication stream: expected an array, got byte 0x${data[pos].toString(16)}`);
    let at = pos + 1;
    let count = 0;
    for (; at < size && data[at] !== 13; at++) count = count * 10 + digit(data[at]);
    if (at + 1 >= size) return null;
    at += 2;
    const args: Buffer[] = new Array<Buffer>(count);
    for (let i = 0; i < count; i++) {
      if (at >= size) return null;
      if (data[at] !== 36 /* '$' */) throw new Error(`replication stream: expected a bulk string, got byte 0x${data[at].toString(16)}`);
      let len = 0;
      for (at++; at < size && data[at] !== 13; at++) len = len * 10 + digit(data[at]);
      if (at + 1 >= size) return null;
      const start = at + 2;
      const end = start + len;
      if (end + 2 > size) return null;
      args[i] = data.subarray(start, end);
      at = end + 2;
    }
    this.next = at;
    return args;
  }
}

function digit(byte: number): number {
  const d = byte - 48;
  if (d < 0 || d > 9) throw new Error(`replication stream: bad length byte 0x${byte.toString(16)}`);
  return d;
}
