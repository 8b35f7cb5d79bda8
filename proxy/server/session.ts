/**
 * One client connection.
 *
 *   socket bytes -> RequestDecoder -> Dispatcher -> reply slot appended to `slots` (request order)
 *   slot filled (by a node, a merge, or the proxy) -> flush from the head -> socket
 *
 * Invariants:
 * - `slots` holds one slot per request, in request order; replies are written strictly from the
 *   head, so they come back in request order whatever order the nodes answer in.
 * - While a request waits for a node to name its keys (COMMAND GETKEYS), or one for another back-end
 *   connection waits for every earlier reply (dispatch/order-barrier.ts), later requests are held,
 *   so a client's commands reach the nodes in the order it sent them.
 * - Back-pressure: when the client does not read its replies (socket buffer above the high-water
 *   mark) or has too many replies outstanding, the session stops reading from the client. It never
 *   stalls a shared back-end connection.
 * - After QUIT or a protocol error, nothing more is read; the connection closes once every earlier
 *   reply has been written, and closes fully, as Redis's close() does: a client still writing gets a
 *   reset, not a half-open socket that swallows its bytes until its send buffer blocks.
 */
// Imported, not the global: Node 20's global `Buffer` is a getter, called on every use (bench/NOTES.md, round 10).
import { formatPeer } from '../client/peer-address';
import { Buffer } from 'node:buffer';
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
import { ReplySlot, isUnanswered } from '../client/reply-slot';
import { Queue } from '../client/queue';
import { Flushable, batchBegin, batchEnd, markReady } from '../client/reply-flusher';
import { ProxyStats } from '../telemetry/stats';
import { readAccepted } from '../net/socket-reader';
import * as encode from '../resp/encode';

export interface SessionLimits extends DecoderLimits {
  /** Stop reading from a client whose unread replies exceed this many bytes. */
  clientOutputHighWaterBytes: number;
  /** Close a client idle this long (0: never). */
  idleClientTimeoutMs: number;
  /** Disconnect a MONITOR client with more unsent bytes than this (0: never). */
  monitorOutputBytes: number;
}

/** Stop reading from a client with this many replies outstanding; resume below half of it. */
const MAX_OUTSTANDING_REPLIES = 16384;
/** What a monitor line waits for when its request has no reply slot of its own. */
const NO_REPLY = Buffer.alloc(0);

/** What every client of one listener shares: one reference per session instead of five. */
export interface SessionHost {
  readonly dispatcher: Dispatcher;
  readonly caching: ClientCaching;
  readonly stats: ProxyStats;
  readonly limits: SessionLimits;
  sessionClosed(session: Session): void;
}

let nextSessionId = 1;

/**
 * Times in whole seconds since this module loaded: small integers, which V8 stores in the object
 * itself (a millisecond Date.now() would box a heap number per field per client). Redis too keeps a
 * client's creation and last interaction in whole seconds (CLIENT LIST's age and idle).
 */
const EPOCH_MS = Date.now();
const nowSeconds = (): number => Math.floor((Date.now() - EPOCH_MS) / 1000);

/**
 * The one decoder of every client that has no request half-read: a client takes it as its own only
 * when a read ends mid-request (or fails), so an idle client holds no decoder (issue 32: what a
 * client does not use costs nothing). Reads run one at a time, so one is enough.
 */
let idleDecoder: RequestDecoder | null = null;

/** The session of a client socket, set once when it is accepted. */
const SESSION = Symbol('session');
type ClientSocket = net.Socket & { [SESSION]: Session };

// The socket listeners, shared by every client (Node calls them with `this` bound to the socket),
// so a client costs no closure.
function onClientBytes(this: net.Socket, chunk: Buffer): void {
  (this as ClientSocket)[SESSION].received(chunk);
}
function onClientDrain(this: net.Socket): void {
  (this as ClientSocket)[SESSION].applyBackPressure();
}
/** nutcracker's client_err; 'close' follows, and a client's socket error is not ours to log. */
function onClientError(this: net.Socket): void {
  (this as ClientSocket)[SESSION].host.stats.clientErr++;
}
function onClientClose(this: net.Socket): void {
  (this as ClientSocket)[SESSION].socketClosed();
}
function onClientIdle(this: net.Socket): void {
  // As in Redis, a blocked or subscribed client is not idle (it holds a dedicated connection).
  if (((this as ClientSocket)[SESSION].holding?.size ?? 0) === 0) this.destroy();
}

export class Session implements DispatchSession, ListedClient, Flushable {
  readonly id = nextSessionId++;
  name: Buffer | null = null;
  /** What the signed-in user may run: null for everything (the dispatcher's one check; security/permissions.ts). */
  permissions: UserPermissions | null;
  writesOnB: Promise<void> | null = null; // read-new: its writes whose replies wait for B (dispatcher.ts waitOnB)
  blocked: Unblockable | null = null;
  /** The last command's full name, CLIENT LIST's `cmd` (set by the dispatcher). */
  command = 'NULL';
  protocol: 2 | 3 = 2;
  closeAfterReply = false;
  /** The one auth check on the hot path (security/auth.ts). */
  authenticated: boolean;
  /** MULTI/WATCH state (dispatch/transaction.ts); null outside a transaction. */
  transaction: Transaction | null = null;
  /** Subscribed mode (pubsub/subscription.ts); null when not subscribed. */
  subscription: Subscription | null = null;
  /** Back-end connections held for this client (see `dedicated`); null until the first. */
  holding: Set<Releasable> | null = null;
  /** CLIENT TRACKING state (tracking/); null when tracking is off. */
  tracking: ClientTracking | null = null;
  /** MONITOR mode (dispatch/monitor.ts); null when not monitoring. */
  monitoring: Releasable | null = null;
  /** Set by whenAnswered while a monitored request is dispatched, until its reply slot is tracked. */
  private monitorShow: ((reply: Buffer) => void) | null = null;

  private readonly slots = new Queue<ReplySlot>();
  /** Who waits for every slot to be filled (runAfterEarlierReplies). */
  private onAllAnswered: (() => void) | null = null;
  /** This client's own decoder while a request is half-read; null when it has none in progress. */
  private decoder: RequestDecoder | null = null;
  private held: { args: Buffer[]; raw: Buffer | null }[] | null = null;
  private flushScheduled = false;
  private closed = false;
  private readPaused = false;
  private drainListened = false;
  private readonly createdAt = nowSeconds();
  private lastActiveAt = this.createdAt;
  /** CLIENT REPLY OFF / SKIP: replies of requests dispatched while `silent` are never written. */
  private replyOff = false;
  private skipNext = false;
  private silent = false;
  private signedInAs = DEFAULT_USER;
  /** Valkey 8's CLIENT LIST counters: bytes read, bytes written, commands run. */
  private netIn = 0;
  private netOut = 0;
  private commandsRun = 0;
  lib?: { name: string; ver: string };

  constructor(
    private readonly socket: net.Socket,
    readonly host: SessionHost,
  ) {
    const dispatcher = host.dispatcher;
    this.authenticated = !dispatcher.requiresAuth;
    this.permissions = dispatcher.permissionsOf(DEFAULT_USER);
    (socket as ClientSocket)[SESSION] = this;
    socket.setNoDelay(true);
    if (host.limits.idleClientTimeoutMs > 0) socket.setTimeout(host.limits.idleClientTimeoutMs, onClientIdle);
    socket.on('error', onClientError);
    socket.on('close', onClientClose);
    // A plain socket comes paused (the listener's pauseOnConnect); this starts reading it.
    readAccepted(socket, onClientBytes);
  }

  /** Back-end connections held for this client (WATCH, blocking commands, Pub/Sub): released when it goes. */
  get dedicated(): Set<Releasable> {
    return (this.holding ??= new Set<Releasable>());
  }

  /** `ip:port` of the client, as CLIENT LIST shows it (read when asked: Node keeps it once read). */
  get addr(): string {
    return formatPeer(this.socket.remoteAddress, this.socket.remotePort);
  }

  get laddr(): string {
    return formatPeer(this.socket.localAddress, this.socket.localPort);
  }

  /** One read of the client's socket. */
  received(chunk: Buffer): void {
    this.lastActiveAt = nowSeconds();
    this.netIn += chunk.length;
    batchBegin();
    try {
      let decoder = this.decoder;
      if (decoder === null) {
        decoder = idleDecoder?.use(this.host.limits, this) ?? new RequestDecoder(this.host.limits, this);
        idleDecoder = null; // taken: a request run now that reads another client gets another
      }
      decoder.push(chunk);
      if (decoder.idle) {
        this.decoder = null;
        idleDecoder = decoder;
      } else {
        this.decoder = decoder;
      }
    } finally {
      batchEnd();
    }
    this.applyBackPressure();
  }

  /** The socket's 'close' (onClientClose). */
  socketClosed(): void {
    this.closed = true;
    // nutcracker's client_eof: the client ended the connection (its FIN was read).
    if (this.socket.readableEnded) this.host.stats.clientEof++;
    if (this.holding !== null) for (const held of [...this.holding]) held.release();
    this.host.caching.disable(this);
    this.host.sessionClosed(this);
  }

  /** The user signed in as (AUTH, HELLO AUTH, RESET set it); its permissions follow it. */
  get user(): string {
    return this.signedInAs;
  }

  set user(name: string) {
    this.signedInAs = name;
    this.refreshPermissions();
  }

  subscribedNames(): { channels: Buffer[]; patterns: Buffer[] } | null {
    return this.subscription?.names() ?? null;
  }

  /** After a reload: the user's permissions as the new config has them. */
  refreshPermissions(): void {
    this.permissions = this.host.dispatcher.permissionsOf(this.signedInAs);
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
    const now = nowSeconds();
    const txn = this.transaction;
    const counts = this.subscription?.counts() ?? { sub: 0, psub: 0, ssub: 0 };
    let flags = '';
    if (this.monitoring !== null) flags += 'O';
    if (this.subscription !== null) flags += 'P';
    if (txn !== null && txn.inMulti) flags += 'x';
    if (this.blocked !== null) flags += 'b';
    return clientInfoLine({
      id: this.id,
      addr: this.addr,
      laddr: this.laddr,
      fd: (this.socket as unknown as { _handle?: { fd?: number } })._handle?.fd ?? -1,
      name: this.name?.toString() ?? '',
      ageSeconds: now - this.createdAt,
      idleSeconds: now - this.lastActiveAt,
      flags: flags === '' ? 'N' : flags,
      ...counts,
      multi: txn !== null && txn.inMulti ? txn.queued.length : -1,
      watch: txn?.watchedKeys.size ?? 0,
      omem: this.socket.writableLength,
      oll: this.slots.length,
      cmd: this.command,
      user: this.user,
      resp: this.protocol,
      libName: this.lib?.name ?? '',
      libVer: this.lib?.ver ?? '',
      netIn: this.netIn,
      netOut: this.netOut,
      commands: this.commandsRun,
    }, this.host.dispatcher.clientInfoFormat);
  }

  get ageSeconds(): number {
    return nowSeconds() - this.createdAt;
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
    this.host.stats.protocolErrors++;
    if (this.closeAfterReply) return;
    this.replyNow(encode.errorBytes(`ERR ${message}`));
    this.closeAfterReply = true;
  }

  // DispatchSession

  get monitorOutputLimitBytes(): number {
    return this.host.limits.monitorOutputBytes;
  }

  /** The request being dispatched is shown to monitors once answered: by the next slot tracked. */
  whenAnswered(show: (reply: Buffer) => void): void {
    this.monitorShow = show;
  }

  track<S extends ReplySlot>(slot: S): S {
    if (this.monitorShow !== null) {
      slot.onFilled = this.monitorShow;
      this.monitorShow = null;
    }
    if (this.silent) slot.silent = true;
    this.slots.push(slot);
    if (this.tracking !== null && this.tracking.armedWrite !== null) this.tracking.claimWrite(slot);
    return slot;
  }

  replyNow(reply: Buffer): void {
    this.track(new ReplySlot(this)).complete(reply);
  }

  onSlotFilled(slot: ReplySlot): void {
    if (this.onAllAnswered !== null && !this.slots.some(isUnanswered)) {
      const go = this.onAllAnswered;
      this.onAllAnswered = null;
      void Promise.resolve().then(go);
    }
    if (this.tracking !== null && this.tracking.ownWrites.size > 0) this.host.caching.writeAnswered(this.tracking, slot);
    if (slot !== this.slots.peek() || this.flushScheduled) return;
    // After the current batch: every reply of one back-end read is written with one client write.
    this.flushScheduled = true;
    markReady(this);
  }

  private run(args: Buffer[], raw: Buffer | null): void {
    if (this.slots.length > 0 && this.host.dispatcher.switchesConnection(this, args) && this.slots.some(isUnanswered)) return this.runAfterEarlierReplies(args, raw);
    this.silent = this.replyOff || this.skipNext;
    this.skipNext = false;
    const pending = this.host.dispatcher.dispatch(this, args, raw);
    this.commandsRun++;
    this.silent = false;
    if (pending === undefined) {
      this.showUnanswered();
      if (this.tracking !== null) this.host.caching.afterCommand(this, this.tracking);
      return;
    }
    this.held = [];
    void pending.finally(() => {
      this.showUnanswered();
      if (this.tracking !== null) this.host.caching.afterCommand(this, this.tracking);
      this.release();
    });
  }

  /** A request for another back-end connection (dispatch/order-barrier.ts): run once every earlier one is answered, later ones held behind it. */
  private runAfterEarlierReplies(args: Buffer[], raw: Buffer | null): void {
    this.held = [];
    this.onAllAnswered = () => {
      const later = this.held ?? [];
      this.held = null;
      if (this.closed) return;
      this.run(args, raw);
      if (this.held !== null) (this.held as { args: Buffer[]; raw: Buffer | null }[]).push(...later);
      else {
        this.held = later;
        this.release();
      }
    };
  }

  /** A monitored request that ran without a reply slot of its own (SUBSCRIBE's pushes): shown now. */
  private showUnanswered(): void {
    const show = this.monitorShow;
    this.monitorShow = null;
    show?.(NO_REPLY);
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

  /** Writes every reply ready at the head of the queue (client/reply-flusher.ts calls it once a turn). */
  flushReplies(): void {
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
    if (more !== null) {
      const all = Buffer.concat(more);
      this.netOut += all.length;
      this.socket.write(all);
    } else if (first !== null) {
      this.netOut += first.length;
      this.socket.write(first);
    }
    if (this.closeAfterReply && this.slots.length === 0) {
      this.close();
      return;
    }
    this.applyBackPressure();
  }

  /** FIN after the last reply, then the socket is released once the replies are handed to the kernel. */
  private close(): void {
    if (this.socket.writableEnded) return;
    this.socket.end(() => this.socket.destroy());
  }

  /** After a read, a flush, and the socket's 'drain' once reading has been paused. */
  applyBackPressure(): void {
    if (this.closed) return;
    const tooMuch = this.socket.writableLength > this.host.limits.clientOutputHighWaterBytes || this.slots.length > MAX_OUTSTANDING_REPLIES;
    if (tooMuch || this.closeAfterReply) {
      if (!this.readPaused) {
        this.readPaused = true;
        this.socket.pause();
        // Only a client that was paused needs to hear its socket drain.
        if (!this.drainListened) {
          this.drainListened = true;
          this.socket.on('drain', onClientDrain);
        }
      }
    } else if (this.readPaused && this.slots.length < MAX_OUTSTANDING_REPLIES / 2) {
      this.readPaused = false;
      this.socket.resume();
    }
  }
}
