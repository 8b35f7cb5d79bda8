// The floor of the replication carry (proxy/migration/follow.ts): a bare follower of one node of
// side A, on the product's connection model and readers, doing the least the design must do.
//   - the link: replication/link.ts (handshake, PSYNC, ACK of what is answered within 20 ms of
//     progress, as the product's follower does);
//   - the snapshot: replication/rdb-reader.ts fed straight from the link (no spool file), each
//     entry whose owner in B is not the node itself sent at once as RESTORE ... REPLACE [ABSTTL]
//     (pipelined, no window);
//   - the stream: replication/stream-reader.ts, each command re-encoded and sent to the owner in B
//     of its first argument after the name (PING, REPLCONF, SELECT, MULTI, EXEC dropped; a key that
//     stays on the node skipped). No command table, no split, no Lua, no offset records, no lag
//     bound, no resume: one BackendConnection per node of B, written once per event-loop turn as
//     the proxy's pool connections are.
// It is exact only for one-key commands and a static B; it is a measure, not a carry.
import { ReplicationLink } from '../proxy/replication/link';
import { RdbReader } from '../proxy/replication/rdb-reader';
import { StreamReader } from '../proxy/replication/stream-reader';
import { BackendConnection } from '../proxy/backend/connection';
import { request } from '../proxy/backend/request';
import { decodeReply } from '../proxy/resp/decode-reply';
import { KeySpace, ownerOfKey } from '../sharding/key-space';
import * as encode from '../proxy/resp/encode';

const RESTORE = Buffer.from('RESTORE');
const REPLACE = Buffer.from('REPLACE');
const ABSTTL = Buffer.from('ABSTTL');
const ZERO = Buffer.from('0');
const DROPPED = new Set(['ping', 'replconf', 'select', 'multi', 'exec']);

export class FloorFollower {
  /** Milliseconds from the PSYNC reply to every snapshot entry answered by B (0 until then). */
  snapshotMs = 0;
  restored = 0;
  forwarded = 0;
  private link: ReplicationLink;
  private readonly stream = new StreamReader();
  private reader: RdbReader | null = null;
  private readonly conns = new Map<string, BackendConnection>();
  private open = 0;
  private syncAt = 0;
  private live = false;
  private received = -1;
  /** Offset of the last command sent; answered once `open` is 0. */
  private sentThrough = -1;
  private answered = -1;
  private failure: string | null = null;
  private readonly ackTimer: NodeJS.Timeout;
  private waiters: (() => void)[] = [];
  private readonly ackValue = (): number => this.answered;

  constructor(
    readonly source: string,
    private readonly to: KeySpace,
  ) {
    this.link = new ReplicationLink(source, { tls: null, handshake: [], connectTimeoutMs: 5000, announcePort: 0, resume: null }, {
      fullSync: (_replid, offset) => {
        this.syncAt = performance.now();
        this.received = offset;
        this.sentThrough = offset;
        this.reader = new RdbReader({
          wantEntry: (_db, key) => this.ownerOf(key) !== null,
          onEntry: (e) => {
            const owner = this.ownerOf(e.key);
            if (owner === null) return;
            const ttl = e.expireAtMs === null ? ZERO : Buffer.from(String(e.expireAtMs));
            this.send(owner, encode.command(e.expireAtMs === null ? [RESTORE, e.key, ttl, e.dump, REPLACE] : [RESTORE, e.key, ttl, e.dump, REPLACE, ABSTTL]), true);
          },
          onFunction: () => undefined,
          onEnd: () => undefined,
        });
      },
      snapshotBytes: (chunk) => this.reader?.push(chunk),
      snapshotEnd: () => {
        this.reader?.end();
        this.reader = null;
        this.live = true;
        this.settle();
        // After a diskless sync Redis sends the stream only on an ACK once the replica is online (link.ts).
        this.link.ackUntilStream(this.ackValue);
      },
      continued: () => this.fail('+CONTINUE to a full-sync request'),
      streamBytes: (chunk, first) => this.heard(chunk, first),
      lost: (reason) => this.fail(reason),
    });
    this.ackTimer = setInterval(() => this.link.ack(this.answered), 1000).unref();
  }

  /**
   * Resolves once the snapshot is on B and every stream command through the node's offset now
   * (`ROLE`, read first: what the load wrote, received or not yet) is answered.
   */
  async caughtUp(): Promise<void> {
    const offset = await this.offsetNow();
    while (!this.live || this.open > 0 || this.answered < Math.max(this.received, offset)) {
      if (this.failure !== null) throw new Error(this.failure);
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private async offsetNow(): Promise<number> {
    const conn = new BackendConnection(this.source, { connectTimeoutMs: 5000, commandTimeoutMs: 0, delayMs: 0, handshake: [], tls: null });
    try {
      const role = decodeReply(await request(conn, ['ROLE'], 5000));
      return Array.isArray(role) && role[0] === 'master' ? Number(role[1]) : -1;
    } finally {
      conn.close();
    }
  }

  get lagBytes(): number {
    return Math.max(0, this.received - this.answered);
  }

  close(): void {
    clearInterval(this.ackTimer);
    this.link.close('the floor follower ended');
    for (const c of this.conns.values()) c.close();
    this.wake();
  }

  private heard(chunk: Buffer, first: number): void {
    this.received = first + chunk.length - 1;
    for (const cmd of this.stream.push(chunk, first)) {
      const args = cmd.args;
      this.sentThrough = cmd.end;
      if (args.length < 2 || DROPPED.has(args[0].toString('latin1').toLowerCase())) continue;
      const owner = this.ownerOf(args[1]);
      if (owner === null) continue;
      this.forwarded++;
      this.send(owner, encode.command(args), false);
    }
    this.settle();
  }

  /** The key's node in B, null when it stays on the followed node. */
  private ownerOf(key: Buffer): string | null {
    const owner = ownerOfKey(this.to, key);
    return owner === this.source ? null : owner;
  }

  private send(to: string, payload: Buffer, restore: boolean): void {
    let c = this.conns.get(to);
    if (c === undefined) this.conns.set(to, (c = new BackendConnection(to, { connectTimeoutMs: 5000, commandTimeoutMs: 0, delayMs: 0, handshake: [], tls: null })));
    this.open++;
    c.send({
      payload,
      internal: true,
      onReply: (frame) => {
        if (frame[0] === 45) this.fail(`${to}: ${frame.toString('latin1', 1, frame.length - 2)}`);
        if (restore) this.restored++;
        this.open--;
        this.settle();
      },
      onFailure: (message) => this.fail(`${to}: ${message}`),
    });
  }

  /** What is answered moves up to what was sent once nothing is open (replies come per node, not in one order). */
  private settle(): void {
    if (this.open > 0) return;
    this.answered = this.sentThrough;
    if (this.live) this.link.ackSoon(this.ackValue);
    if (this.live && this.snapshotMs === 0) this.snapshotMs = Math.round(performance.now() - this.syncAt);
    this.wake();
  }

  private fail(reason: string): void {
    this.failure ??= reason;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
