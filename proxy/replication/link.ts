/**
 * One replication link to one node of side A, as a Redis replica holds it (redis/redis
 * replication.c, syncWithMaster): the handshake, `PSYNC`, the full-sync payload, then the stream.
 *
 *   connect -> [AUTH...] -> PING -> REPLCONF listening-port -> REPLCONF capa eof capa psync2
 *     -> PSYNC <replid> <offset+1> | PSYNC ? -1
 *     -> +CONTINUE [replid]          : the stream resumes at the byte after `offset`
 *     -> +FULLRESYNC <replid> <off>  : ["\n" keep-alives] $<len>\r\n<rdb> | $EOF:<mark>\r\n<rdb><mark>
 *        then ["\n" keep-alives, out of band] the stream, whose first byte is offset off + 1
 *
 * Offsets count stream bytes exactly as the node's `master_repl_offset` does: a byte's offset is
 * the node's offset once it has appended that byte. `REPLCONF ACK` is sent with what the caller
 * says is applied (never what was merely received), so `WAIT` and `min-replicas-to-write` on the
 * node stay truthful. The link reads its socket at full speed whatever the caller does with the
 * bytes: holding them is the caller's job (migration/follow-spool.ts keeps them in a file), so the
 * node never holds more for this link than for a real replica; `pause()` stops reading, as a slow
 * replica does, and the node holds what follows in its output buffer for this replica.
 */
import { BackendTls, backendSocket } from '../security/tls';
import { splitAddress } from '../backend/connection';
import * as encode from '../resp/encode';

export interface LinkHandlers {
  /** `+FULLRESYNC`: the snapshot follows; the stream after it starts at `offset + 1`. */
  fullSync(replid: string, offset: number): void;
  /** Bytes of the snapshot, in order. */
  snapshotBytes(chunk: Buffer): void;
  /** The whole snapshot has arrived. */
  snapshotEnd(): void;
  /** `+CONTINUE`: the stream resumes at the byte after the offset asked for; `replid` the node's id now. */
  continued(replid: string): void;
  /** Stream bytes; the first of `chunk` is at offset `firstOffset`. */
  streamBytes(chunk: Buffer, firstOffset: number): void;
  /** The link is gone (never called twice); `reason` says why. */
  lost(reason: string): void;
}

export interface LinkOptions {
  tls: BackendTls | null;
  /** AUTH and the like, sent first (an error reply ends the link, naming the node's words). */
  handshake: readonly Buffer[];
  connectTimeoutMs: number;
  /** The port announced in REPLCONF listening-port (shown in the node's INFO replication). */
  announcePort: number;
  /** Where to resume from: the node's replid and the last offset applied; null for a full sync. */
  resume: { replid: string; offset: number } | null;
}

type Phase = 'handshake' | 'preamble' | 'snapshot' | 'snapshot-eof' | 'stream' | 'closed';

const CRLF = Buffer.from('\r\n');
const EOF_MARK_LENGTH = 40;
const ACK_SOON_MS = 20;
const START_ACK_MS = 50;

export class ReplicationLink {
  private readonly socket: ReturnType<typeof backendSocket>['socket'];
  private phase: Phase = 'handshake';
  /** Replies still expected to the handshake's requests, in order (the last is PSYNC's). */
  private pending: ((line: string) => void)[] = [];
  private buffered: Buffer = Buffer.alloc(0);
  private snapshotLeft = 0;
  private eofMark: Buffer | null = null;
  /** Offset of the next stream byte. */
  private nextOffset = 0;
  private connectTimer: NodeJS.Timeout | null = null;
  private ackSoonTimer: NodeJS.Timeout | null = null;
  private startTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** No byte of the stream has come yet: a newline now is the node's keep-alive, not the stream's. */
  private streamUnstarted = true;

  constructor(
    readonly address: string,
    private readonly options: LinkOptions,
    private readonly on: LinkHandlers,
  ) {
    const [host, port] = splitAddress(address);
    const opened = backendSocket(host, options.tls, (chunk) => this.onData(chunk));
    this.socket = opened.socket;
    this.socket.on('error', (err: Error) => this.close(`${address}: ${err.message}`));
    this.socket.on('close', () => this.close(`${address} closed the replication link`));
    this.connectTimer = setTimeout(() => this.close(`${address}: no connection within ${options.connectTimeoutMs} ms`), options.connectTimeoutMs);
    opened.connect(port, host, () => {
      if (this.connectTimer !== null) clearTimeout(this.connectTimer);
      this.connectTimer = null;
      this.socket.setNoDelay(true);
      this.handshake();
    });
  }

  /** The offset of the last stream byte received. */
  get receivedOffset(): number {
    return this.nextOffset - 1;
  }

  /** `REPLCONF ACK <applied>`: what the node may count as this replica's. */
  ack(applied: number): void {
    if (this.phase !== 'stream' || this.closed) return;
    this.socket.write(encode.command(['REPLCONF', 'ACK', String(applied)]));
  }

  /**
   * One `REPLCONF ACK` within ACK_SOON_MS of progress: a replica ACKs once a second, but A's INFO
   * (its lag, and WAIT's count from it) should see what B holds as soon as B holds it.
   */
  ackSoon(applied: () => number): void {
    if (this.ackSoonTimer !== null || this.phase !== 'stream' || this.closed) return;
    this.ackSoonTimer = setTimeout(() => {
      this.ackSoonTimer = null;
      this.ack(applied());
    }, ACK_SOON_MS).unref();
  }

  /**
   * After a diskless full sync the node sends the stream only on an ACK that comes once it has put
   * this replica online (when its RDB child is reaped); an ACK sent at the snapshot's end may come
   * before that and start nothing, leaving the stream held until the next ACK a second later. So
   * `value()` is acknowledged every START_ACK_MS until the stream's first byte.
   */
  ackUntilStream(value: () => number): void {
    if (this.startTimer !== null || this.phase !== 'stream' || this.closed || !this.streamUnstarted) return;
    this.ack(value());
    this.startTimer = setInterval(() => this.ack(value()), START_ACK_MS).unref();
  }

  /** Stops reading the socket (ACKs still go out): the node buffers the stream, as for a slow replica. */
  pause(): void {
    if (!this.closed) this.socket.pause();
  }

  resume(): void {
    if (!this.closed) this.socket.resume();
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.phase = 'closed';
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    if (this.ackSoonTimer !== null) clearTimeout(this.ackSoonTimer);
    this.stopStartAcks();
    this.socket.destroy();
    this.on.lost(reason);
  }

  private handshake(): void {
    const steps: { args: Buffer; check: (line: string) => void }[] = [];
    const expectOk = (what: string) => (line: string) => {
      if (line.startsWith('-')) this.close(`${this.address} refused ${what}: ${line.slice(1)}`);
    };
    for (const payload of this.options.handshake) steps.push({ args: payload, check: expectOk('the handshake') });
    steps.push({ args: encode.command(['PING']), check: expectOk('PING') });
    steps.push({ args: encode.command(['REPLCONF', 'listening-port', String(this.options.announcePort)]), check: expectOk('REPLCONF listening-port') });
    steps.push({ args: encode.command(['REPLCONF', 'capa', 'eof', 'capa', 'psync2']), check: expectOk('REPLCONF capa') });
    const resume = this.options.resume;
    const psync = resume === null ? ['PSYNC', '?', '-1'] : ['PSYNC', resume.replid, String(resume.offset + 1)];
    // A node refuses PSYNC while replies to the requests before it are still unsent: it goes last, alone.
    const last = steps[steps.length - 1];
    steps[steps.length - 1] = {
      args: last.args,
      check: (line) => {
        last.check(line);
        if (!this.closed) this.socket.write(encode.command(psync));
      },
    };
    this.pending = [...steps.map((s) => s.check), (line: string) => this.psyncReply(line)];
    this.socket.write(Buffer.concat(steps.map((s) => s.args)));
  }

  private psyncReply(line: string): void {
    if (line.startsWith('+FULLRESYNC ')) {
      const [, replid, offset] = line.split(' ');
      const off = Number(offset);
      if (replid === undefined || !Number.isSafeInteger(off)) return this.close(`${this.address}: unreadable PSYNC reply "${line}"`);
      this.nextOffset = off + 1;
      this.phase = 'preamble';
      this.on.fullSync(replid, off);
      return;
    }
    if (line === '+CONTINUE' || line.startsWith('+CONTINUE ')) {
      const resume = this.options.resume;
      if (resume === null) return this.close(`${this.address}: +CONTINUE to a full-sync request`);
      this.nextOffset = resume.offset + 1;
      this.phase = 'stream';
      this.on.continued(line.length > 10 ? line.slice(10) : resume.replid);
      return;
    }
    this.close(`${this.address} refused PSYNC: ${line.startsWith('-') ? line.slice(1) : line}`);
  }

  private onData(chunk: Buffer): void {
    if (this.closed) return;
    let data = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    this.buffered = Buffer.alloc(0);
    while (data.length > 0 && !this.closed) {
      const rest = this.step(data);
      if (rest === null) return; // waits for more
      data = rest;
    }
  }

  /** Consumes what it can of `data`; the unconsumed rest, or null when it needs more bytes (kept). */
  private step(data: Buffer): Buffer | null {
    switch (this.phase) {
      case 'handshake': {
        // A node preparing a snapshot sends newlines to keep the link alive, even before PSYNC's reply.
        if (data[0] === 10) {
          let i = 1;
          while (i < data.length && data[i] === 10) i++;
          return data.subarray(i);
        }
        const end = data.indexOf(CRLF);
        if (end < 0) return this.keep(data);
        const line = data.toString('latin1', 0, end);
        const check = this.pending.shift();
        if (check === undefined) {
          this.close(`${this.address}: unexpected "${line}" during the replication handshake`);
          return null;
        }
        check(line);
        return data.subarray(end + 2);
      }
      case 'preamble': {
        // Newlines keep the link alive while the node prepares its snapshot.
        let i = 0;
        while (i < data.length && data[i] === 10) i++;
        if (i === data.length) return data.subarray(i);
        const end = data.indexOf(CRLF, i);
        if (end < 0) return this.keep(data.subarray(i));
        const line = data.toString('latin1', i, end);
        if (line.startsWith('$EOF:')) {
          this.eofMark = Buffer.from(line.slice(5), 'latin1');
          if (this.eofMark.length !== EOF_MARK_LENGTH) this.close(`${this.address}: bad EOF mark in the snapshot header`);
          this.phase = 'snapshot-eof';
        } else if (line.startsWith('$')) {
          this.snapshotLeft = Number(line.slice(1));
          if (!Number.isSafeInteger(this.snapshotLeft) || this.snapshotLeft < 0) this.close(`${this.address}: bad snapshot length "${line}"`);
          this.phase = 'snapshot';
        } else if (line.startsWith('-')) {
          this.close(`${this.address} could not send its snapshot: ${line.slice(1)}`);
        } else {
          this.close(`${this.address}: unexpected "${line}" before the snapshot`);
        }
        return data.subarray(end + 2);
      }
      case 'snapshot': {
        const take = Math.min(this.snapshotLeft, data.length);
        if (take > 0) this.on.snapshotBytes(data.subarray(0, take));
        this.snapshotLeft -= take;
        if (this.snapshotLeft === 0) this.snapshotDone();
        return data.subarray(take);
      }
      case 'snapshot-eof': {
        // The last 40 bytes may be the mark: hand on all but those until the mark is seen.
        const mark = this.eofMark as Buffer;
        const at = data.indexOf(mark);
        if (at >= 0) {
          if (at > 0) this.on.snapshotBytes(data.subarray(0, at));
          this.snapshotDone();
          return data.subarray(at + mark.length);
        }
        const safe = data.length - (mark.length - 1);
        if (safe > 0) this.on.snapshotBytes(data.subarray(0, safe));
        return this.keep(data.subarray(Math.max(0, safe)));
      }
      case 'stream': {
        // A node may still write its pre-sync keep-alive "\n" after the snapshot's EOF mark: a
        // FLUSHALL that kills the RDB child before the node reaped it fails the sync (always on
        // Redis 7.4, redis#13434, even when the child had already sent it all; rarely on 7.0), and
        // the replicationCron of that same tick still counts the replica pre-sync and writes it
        // the newline just before the link is closed. As for a Redis replica, it is out of band (no
        // offset); read as the stream, it failed the follow for good instead of a resume. The
        // stream starts only once the node holds the link online, so none comes after its first byte.
        if (this.streamUnstarted) {
          let i = 0;
          while (i < data.length && data[i] === 10) i++;
          if (i === data.length) return data.subarray(i);
          this.streamUnstarted = false;
          this.stopStartAcks();
          data = data.subarray(i);
        }
        const first = this.nextOffset;
        this.nextOffset += data.length;
        this.on.streamBytes(data, first);
        return Buffer.alloc(0);
      }
      case 'closed':
        return null;
    }
  }

  private stopStartAcks(): void {
    if (this.startTimer !== null) clearInterval(this.startTimer);
    this.startTimer = null;
  }

  private snapshotDone(): void {
    this.phase = 'stream';
    this.eofMark = null;
    this.on.snapshotEnd();
  }

  private keep(rest: Buffer): null {
    this.buffered = Buffer.from(rest);
    return null;
  }
}
