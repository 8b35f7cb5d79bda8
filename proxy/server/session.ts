/**
 * One client connection.
 *
 *   socket bytes -> RequestDecoder -> Dispatcher -> reply slot appended to `slots` (request order)
 *   slot filled (by a node, a merge, or the proxy) -> flush from the head -> socket
 *
 * Invariants:
 * - `slots` holds one slot per request, in request order; replies are written strictly from the
 *   head, so they come back in request order whatever order the nodes answer in.
 * - While a request waits for a node to name its keys (COMMAND GETKEYS), later requests are held,
 *   so a client's commands reach the nodes in the order it sent them.
 * - Back-pressure: when the client does not read its replies (socket buffer above the high-water
 *   mark) or has too many replies outstanding, the session stops reading from the client. It never
 *   stalls a shared back-end connection.
 * - After QUIT or a protocol error, nothing more is read; the connection closes once every earlier
 *   reply has been written, and closes fully, as Redis's close() does: a client still writing gets a
 *   reset, not a half-open socket that swallows its bytes until its send buffer blocks.
 */
import net from 'node:net';
import { RequestDecoder, DecoderLimits } from '../resp/request-decoder';
import { Dispatcher, DispatchSession } from '../dispatch/dispatcher';
import { Transaction } from '../dispatch/transaction-state';
import { Subscription } from '../pubsub/subscription';
import { ClientTracking } from '../tracking/tracking-state';
import { ClientCaching } from '../tracking/client-caching';
import { ReplyMode, Releasable, Unblockable } from '../client/client-session';
import { ClientType, ListedClient, clientInfoLine } from '../client/client-list';
import { DEFAULT_USER } from '../security/auth';
import { UserPermissions } from '../security/permissions';
import { ReplySlot } from '../client/reply-slot';
import { Queue } from '../client/queue';
import { Flushable, inBatch, markReady } from '../client/reply-flusher';
import { ProxyStats } from '../telemetry/stats';
import { readAccepted } from '../net/socket-reader';
import * as encode from '../resp/encode';

export interface SessionLimits extends DecoderLimits {
  /** Stop reading from a client whose unread replies exceed this many bytes. */
  clientOutputHighWaterBytes: number;
  /** Close a client idle this long (0: never). */
  idleClientTimeoutMs: number;
}

/** Stop reading from a client with this many replies outstanding; resume below half of it. */
const MAX_OUTSTANDING_REPLIES = 16384;

let nextSessionId = 1;

export class Session implements DispatchSession, ListedClient, Flushable {
  readonly id = nextSessionId++;
  name: Buffer | null = null;
  /** What the signed-in user may run: null for everything (the dispatcher's one check; security/permissions.ts). */
  permissions: UserPermissions | null;
  blocked: Unblockable | null = null;
  /** The last command's full name, CLIENT LIST's `cmd` (set by the dispatcher). */
  command = 'NULL';
  readonly addr: string;
  readonly laddr: string;
  protocol: 2 | 3 = 2;
  closeAfterReply = false;
  /** The one auth check on the hot path (security/auth.ts). */
  authenticated: boolean;
  /** MULTI/WATCH state (dispatch/transaction.ts); null outside a transaction. */
  transaction: Transaction | null = null;
  /** Subscribed mode (pubsub/subscription.ts); null when not subscribed. */
  subscription: Subscription | null = null;
  /** Back-end connections held for this client (WATCH, blocking commands, Pub/Sub): released when it goes. */
  readonly dedicated = new Set<Releasable>();
  /** CLIENT TRACKING state (tracking/); null when tracking is off. */
  tracking: ClientTracking | null = null;

  private readonly slots = new Queue<ReplySlot>();
  private readonly decoder: RequestDecoder;
  private held: { args: Buffer[]; raw: Buffer | null }[] | null = null;
  private flushScheduled = false;
  private closed = false;
  private readPaused = false;
  private readonly createdAt = Date.now();
  private lastActiveAt = this.createdAt;
  /** CLIENT REPLY OFF / SKIP: replies of requests dispatched while `silent` are never written. */
  private replyOff = false;
  private skipNext = false;
  private silent = false;
  private signedInAs = DEFAULT_USER;

  constructor(
    private readonly socket: net.Socket,
    private readonly dispatcher: Dispatcher,
    private readonly caching: ClientCaching,
    private readonly stats: ProxyStats,
    private readonly limits: SessionLimits,
    private readonly onClosed: (session: Session) => void,
  ) {
    this.authenticated = !dispatcher.requiresAuth;
    this.permissions = dispatcher.permissionsOf(DEFAULT_USER);
    this.decoder = new RequestDecoder(limits, this);
    this.addr = formatPeer(socket.remoteAddress, socket.remotePort);
    this.laddr = formatPeer(socket.localAddress, socket.localPort);
    socket.setNoDelay(true);
    if (limits.idleClientTimeoutMs > 0) {
      // As in Redis, a blocked or subscribed client is not idle (it holds a dedicated connection).
      socket.setTimeout(limits.idleClientTimeoutMs, () => {
        if (this.dedicated.size === 0) socket.destroy();
      });
    }
    // A plain socket comes paused (the listener's pauseOnConnect); this starts reading it.
    readAccepted(socket, (chunk) => {
      this.lastActiveAt = Date.now();
      inBatch(this.decode, chunk);
      this.applyBackPressure();
    });
    socket.on('drain', () => this.applyBackPressure());
    socket.on('error', () => undefined); // 'close' follows; a client's socket error is not ours to log
    socket.on('close', () => {
      this.closed = true;
      for (const held of [...this.dedicated]) held.release();
      this.caching.disable(this);
      this.onClosed(this);
    });
  }

  private readonly decode = (chunk: Buffer): void => this.decoder.push(chunk);

  /** The user signed in as (AUTH, HELLO AUTH, RESET set it); its permissions follow it. */
  get user(): string {
    return this.signedInAs;
  }

  set user(name: string) {
    this.signedInAs = name;
    this.refreshPermissions();
  }

  /** After a reload: the user's permissions as the new config has them. */
  refreshPermissions(): void {
    this.permissions = this.dispatcher.permissionsOf(this.signedInAs);
  }

  /** Shutdown: read nothing more; close once every reply already owed has been written. */
  drainThenClose(): void {
    this.closeAfterReply = true;
    this.applyBackPressure();
    if (this.slots.length === 0) this.close();
  }

  destroy(): void {
    this.socket.destroy();
  }

  // ListedClient (CLIENT LIST, INFO, KILL)

  kill(): void {
    this.socket.destroy();
  }

  get type(): ClientType {
    return this.subscription !== null ? 'pubsub' : 'normal';
  }

  describe(): string {
    const now = Date.now();
    const txn = this.transaction;
    const counts = this.subscription?.counts() ?? { sub: 0, psub: 0, ssub: 0 };
    let flags = '';
    if (this.subscription !== null) flags += 'P';
    if (txn !== null && txn.inMulti) flags += 'x';
    if (this.blocked !== null) flags += 'b';
    return clientInfoLine({
      id: this.id,
      addr: this.addr,
      laddr: this.laddr,
      fd: (this.socket as unknown as { _handle?: { fd?: number } })._handle?.fd ?? -1,
      name: this.name?.toString() ?? '',
      ageSeconds: Math.floor((now - this.createdAt) / 1000),
      idleSeconds: Math.floor((now - this.lastActiveAt) / 1000),
      flags: flags === '' ? 'N' : flags,
      ...counts,
      multi: txn !== null && txn.inMulti ? txn.queued.length : -1,
      omem: this.socket.writableLength,
      oll: this.slots.length,
      cmd: this.command,
      user: this.user,
      resp: this.protocol,
    });
  }

  setReplyMode(mode: ReplyMode): void {
    if (mode === 'on') {
      this.replyOff = false;
      this.skipNext = false;
      this.silent = false;
    } else {
      // OFF's and SKIP's own replies are never sent; SKIP then drops the next request's reply.
      if (mode === 'off') this.replyOff = true;
      else if (!this.replyOff) this.skipNext = true;
      this.silent = true;
    }
  }

  /** In subscribed mode (tracking/: where RESP2 invalidations redirected here may go). */
  get subscribed(): boolean {
    return this.subscription !== null;
  }

  /** Tracking clients read from masters only: a lagging replica could hand out a value already invalidated. */
  get readsMasterOnly(): boolean {
    return this.tracking !== null;
  }

  /** An invalidation: after every reply owed, sent whatever CLIENT REPLY says (as Redis sends pushes). */
  pushOutOfBand(frame: Buffer): void {
    const slot = new ReplySlot(this);
    this.slots.push(slot);
    slot.complete(frame);
  }

  /** Reply bytes written to the client's socket and not yet sent (a subscriber that does not read). */
  get pendingOutputBytes(): number {
    return this.socket.writableLength;
  }

  // RequestSink

  onRequest(args: Buffer[], raw: Buffer | null): void {
    if (this.closeAfterReply || this.closed) return;
    if (this.held !== null) {
      this.held.push({ args, raw });
      return;
    }
    this.run(args, raw);
  }

  onProtocolError(message: string): void {
    this.stats.protocolErrors++;
    if (this.closeAfterReply) return;
    this.replyNow(encode.errorBytes(`ERR ${message}`));
    this.closeAfterReply = true;
  }

  // DispatchSession

  track<S extends ReplySlot>(slot: S): S {
    if (this.silent) slot.silent = true;
    this.slots.push(slot);
    if (this.tracking !== null && this.tracking.armedWrite !== null) this.tracking.claimWrite(slot);
    return slot;
  }

  replyNow(reply: Buffer): void {
    this.track(new ReplySlot(this)).complete(reply);
  }

  onSlotFilled(slot: ReplySlot): void {
    if (this.tracking !== null && this.tracking.ownWrites.size > 0) this.caching.writeAnswered(this.tracking, slot);
    if (slot !== this.slots.peek() || this.flushScheduled) return;
    // After the current batch: every reply of one back-end read is written with one client write.
    this.flushScheduled = true;
    markReady(this);
  }

  private run(args: Buffer[], raw: Buffer | null): void {
    this.silent = this.replyOff || this.skipNext;
    this.skipNext = false;
    const pending = this.dispatcher.dispatch(this, args, raw);
    this.silent = false;
    if (pending === undefined) {
      if (this.tracking !== null) this.caching.afterCommand(this, this.tracking);
      return;
    }
    this.held = [];
    void pending.finally(() => {
      if (this.tracking !== null) this.caching.afterCommand(this, this.tracking);
      this.release();
    });
  }

  private release(): void {
    const held = this.held ?? [];
    this.held = null;
    for (let i = 0; i < held.length; i++) {
      if (this.held !== null) {
        // A held request needed GETKEYS too: keep the rest behind it.
        (this.held as { args: Buffer[]; raw: Buffer | null }[]).push(...held.slice(i));
        return;
      }
      this.run(held[i].args, held[i].raw);
    }
  }

  flushReplies(): void {
    this.flush();
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    // Without pipelining one reply is ready at a time: written as it is, no list.
    let first: Buffer | null = null;
    let more: Buffer[] | null = null;
    let head = this.slots.peek();
    while (head !== undefined && head.reply !== null) {
      if (!head.silent) {
        if (first === null) first = head.reply;
        else (more ??= [first]).push(head.reply);
      }
      this.slots.shift();
      head = this.slots.peek();
    }
    if (this.closed) return;
    if (more !== null) this.socket.write(Buffer.concat(more));
    else if (first !== null) this.socket.write(first);
    if (this.closeAfterReply && this.slots.length === 0) {
      this.close();
      return;
    }
    this.applyBackPressure();
  };

  /** FIN after the last reply, then the socket is released once the replies are handed to the kernel. */
  private close(): void {
    if (this.socket.writableEnded) return;
    this.socket.end(() => this.socket.destroy());
  }

  private applyBackPressure(): void {
    if (this.closed) return;
    const tooMuch = this.socket.writableLength > this.limits.clientOutputHighWaterBytes || this.slots.length > MAX_OUTSTANDING_REPLIES;
    if (tooMuch || this.closeAfterReply) {
      if (!this.readPaused) {
        this.readPaused = true;
        this.socket.pause();
      }
    } else if (this.readPaused && this.slots.length < MAX_OUTSTANDING_REPLIES / 2) {
      this.readPaused = false;
      this.socket.resume();
    }
  }
}

/** `ip:port`, with an IPv6 address in brackets, as Redis writes a peer. */
function formatPeer(ip: string | undefined, port: number | undefined): string {
  const host = ip ?? '?';
  return host.includes(':') ? `[${host}]:${port ?? 0}` : `${host}:${port ?? 0}`;
}
