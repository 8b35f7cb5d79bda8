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
      const parsed = parseCommand(data, pos);
      if (parsed === null) break;
      out.push({ args: parsed.args, end: this.pendingOffset + parsed.next - 1 });
      pos = parsed.next;
    }
    this.pending = pos === data.length ? Buffer.alloc(0) : Buffer.from(data.subarray(pos));
    this.pendingOffset += pos;
    return out;
  }

  /** Bytes received that do not make a whole command yet. */
  get partialBytes(): number {
    return this.pending.length;
  }
}

/** One command at `pos`, or null when `data` ends inside it. */
function parseCommand(data: Buffer, pos: number): { args: Buffer[]; next: number } | null {
  if (pos >= data.length) return null;
  if (data[pos] !== 42 /* '*' */) throw new Error(`replication stream: expected an array, got byte 0x${data[pos].toString(16)}`);
  const head = readLine(data, pos + 1);
  if (head === null) return null;
  const count = head.value;
  let at = head.next;
  const args: Buffer[] = new Array<Buffer>(count);
  for (let i = 0; i < count; i++) {
    if (at >= data.length) return null;
    if (data[at] !== 36 /* '$' */) throw new Error(`replication stream: expected a bulk string, got byte 0x${data[at].toString(16)}`);
    const len = readLine(data, at + 1);
    if (len === null) return null;
    const end = len.next + len.value;
    if (end + 2 > data.length) return null;
    args[i] = data.subarray(len.next, end);
    at = end + 2;
  }
  return { args, next: at };
}

function readLine(data: Buffer, pos: number): { value: number; next: number } | null {
  let value = 0;
  let i = pos;
  for (; i < data.length && data[i] !== 13; i++) {
    const d = data[i] - 48;
    if (d < 0 || d > 9) throw new Error(`replication stream: bad length byte 0x${data[i].toString(16)}`);
    value = value * 10 + d;
  }
  if (i + 1 >= data.length) return null;
  return { value, next: i + 2 };
}
