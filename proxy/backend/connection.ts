/**
 * One TCP connection to one Redis node, shared by many client sessions.
 *
 *   sessions --send()--> requests [written (in flight) | queued] --reply frames--> onReply
 *
 * Invariants:
 * - Redis answers requests on a connection in the order they were written, so the head of
 *   `requests` owns the next whole reply frame. Nothing is ever removed from the middle. The first
 *   `written` of them are in flight, the rest queued: one list, so a write moves no request.
 * - Everything accepted during one event-loop turn is written with one socket write, in a
 *   setImmediate callback: that runs after every socket read of the current poll phase, so requests
 *   from many clients share a write (and a syscall, and a Redis read) instead of one each.
 * - Requests are copied into one output buffer as they are sent (`OutputBuffer`), reused from one
 *   write to the next while the kernel takes each write whole: no list and no Buffer.concat per write.
 * - When the socket's buffer is full (write() returned false) no more is written until 'drain';
 *   requests wait queued. Back-pressure toward clients is the sessions' job.
 * - On any failure every request gets exactly one onFailure: `written` tells the owner whether it
 *   may have run (it was on the wire) or surely did not (still queued), which decides retry safety.
 */
import net from 'node:net';
import { Queue } from '../client/queue';
import { batchClock, inBatch } from '../client/reply-flusher';
import { ReplyFramer, ReplyFramingError } from '../resp/reply-framer';
import { OutputBuffer } from './output-buffer';
import { BackendTls, backendSocket } from '../security/tls';
import * as errors from '../resp/errors';
import { connectTimeoutText, socketErrorText } from './socket-error';
import { NodeCounters } from './node-counters';

export interface BackendRequest {
  /** The request's RESP bytes. */
  readonly payload: Buffer;
  onReply(frame: Buffer): void;
  /** No reply will come. `written`: the request was on the wire, so it may have run. */
  onFailure(message: string, written: boolean): void;
  /** The proxy's own request (topology, registration...): not in the node's nutcracker counts. */
  readonly internal?: boolean;
  /** The client it is sent for, when known: an open group (openGroup) lets other clients' requests go ahead. */
  readonly owner?: { readonly id: number };
}

/** Requests held aside and queued together (BackendConnection.openGroup). */
export interface OpenGroup {
  /** Whether the group holds a request of client `clientId`. */
  holds(clientId: number): boolean;
  /** Queues the group's requests (send): called once. */
  seal(): void;
}

export interface ConnectionOptions {
  connectTimeoutMs: number;
  /** A request unanswered this long fails the connection (0: never, for dedicated blocking use). */
  commandTimeoutMs: number;
  /**
   * Asked when a request has waited a whole command timeout: true when the node is demonstrably
   * running a script (it answers BUSY on another connection), and the connection then waits one
   * more timeout instead of failing. Absent: the timeout always applies (pool.ts sets it for the
   * default timeout only).
   */
  busyCheck?: (() => Promise<boolean>) | null;
  /** Wait this long before connecting (reconnect backoff). */
  delayMs: number;
  /** Requests sent first on every new connection (AUTH, READONLY); an error reply closes it. */
  handshake: Buffer[];
  /** TLS to the node (backend.tls); null: plain TCP. */
  tls: BackendTls | null;
  /** The node's counters (nutcracker's server stats); null: not counted. */
  counters?: NodeCounters | null;
  /**
   * Write nothing of the clients' until the node has answered once (its handshake, or a PING):
   * for a node whose last connection was just lost. A killed redis-server's listening socket can
   * still complete a connect for a moment and then reset it, and a request written on such a
   * connection would count as one that may have run; held back, it is retried like a refused one.
   */
  proveFirst?: boolean;
}

/** 'proving': connected, waiting for the node's first answer (proveFirst) before writing requests. */
type State = 'connecting' | 'proving' | 'ready' | 'closed';

/** The probe of a proveFirst connection with no handshake: any reply proves a live node. */
const PROBE = Buffer.from('*1\r\n$4\r\nPING\r\n');

export class BackendConnection {
  private state: State = 'connecting';
  private readonly socket: net.Socket;
  /** Requests in the order written: the first `written` are in flight, the rest queued. */
  private readonly requests = new Queue<BackendRequest>();
  private written = 0;
  private readonly framer = new ReplyFramer();
  private readonly output = new OutputBuffer();
  private flushScheduled = false;
  private blocked = false;
  /** Writes held by the pool (holdWrites): requests queue, nothing is written while above 0. */
  private writeHolds = 0;
  /** Requests held aside to be queued together (openGroup), else null. */
  private group: OpenGroup | null = null;
  private repliesSeen = 0;
  /**
   * When requests in flight last saw progress: sent onto an idle connection, or bytes came back
   * (batchClock(), ms: the pool asks stalledFor() for every request, and inside a socket read's
   * handling that clock is read once, not once per request as Date.now() was).
   */
  private lastProgressAt = 0;
  /** When the node last answered BUSY here (Date.now(); 0: never): it was running a script then. */
  busySeenAt = 0;
  private staleChecks = 0;
  private lastCheckedReplies = 0;
  /** A busyCheck is under way. */
  private checkingBusy = false;
  private watchdog: NodeJS.Timeout | null = null;
  private connectTimer: NodeJS.Timeout | null = null;
  private closeListeners: ((reason: string) => void)[] = [];
  private readyListeners: (() => void)[] = [];
  private readonly counters: NodeCounters | null;
  /** Handshake replies still to come: not counted as responses. */
  private handshakeLeft = 0;
  /** Bytes of the requests queued and in flight (nutcracker's in_queue_bytes / out_queue_bytes). */
  private queuedBytes = 0;
  private inflightBytes = 0;

  constructor(readonly address: string, private readonly options: ConnectionOptions) {
    this.counters = options.counters ?? null;
    const [host, port] = splitAddress(address);
    const opened = backendSocket(host, options.tls, (chunk) => this.onData(chunk));
    this.socket = opened.socket;
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, 10_000);
    this.socket.on('drain', () => {
      this.blocked = false;
      this.flush();
    });
    this.socket.on('error', (err: Error) => {
      if (this.counters !== null && this.state !== 'closed') this.counters.err++;
      this.fail(errors.nodeUnreachable(address, socketErrorText(err)));
    });
    this.socket.on('close', () => {
      if (this.counters !== null && this.state !== 'closed') this.counters.eof++;
      this.fail(errors.connectionLost(address));
    });
    const connect = (): void => {
      this.connectTimer = setTimeout(
        () => this.fail(errors.nodeUnreachable(address, connectTimeoutText(options.connectTimeoutMs))),
        options.connectTimeoutMs,
      );
      opened.connect(port, host, () => this.onConnect());
    };
    if (options.delayMs > 0) {
      this.connectTimer = setTimeout(connect, options.delayMs);
    } else {
      connect();
    }
  }

  get isClosed(): boolean {
    return this.state === 'closed';
  }

  get isReady(): boolean {
    return this.state === 'ready';
  }

  /** Requests accepted and not yet answered. */
  get pending(): number {
    return this.requests.length;
  }

  /** nutcracker's in_queue, in_queue_bytes, out_queue, out_queue_bytes: waiting to be written, and written awaiting a reply. */
  get queues(): { inQueue: number; inQueueBytes: number; outQueue: number; outQueueBytes: number } {
    return { inQueue: this.requests.length - this.written, inQueueBytes: this.queuedBytes, outQueue: this.written, outQueueBytes: this.inflightBytes };
  }

  /**
   * How long requests in flight have waited with no reply at all (0 when none is in flight): a
   * connection stuck behind a script that runs on (pool.ts sends new requests elsewhere then).
   */
  stalledFor(): number {
    return this.written === 0 ? 0 : batchClock() - this.lastProgressAt;
  }

  onClose(listener: (reason: string) => void): void {
    this.closeListeners.push(listener);
  }

  onReady(listener: () => void): void {
    this.readyListeners.push(listener);
  }

  send(request: BackendRequest): void {
    const group = this.group;
    if (group !== null && (request.owner === undefined || group.holds(request.owner.id))) this.sealGroup();
    if (this.state === 'closed') {
      queueMicrotask(() => request.onFailure(errors.connectionLost(this.address), false));
      return;
    }
    this.requests.push(request);
    this.output.append(request.payload);
    this.queuedBytes += request.payload.length;
    if (this.counters !== null && request.internal !== true) {
      this.counters.requests++;
      this.counters.requestBytes += request.payload.length;
    }
    if (!this.flushScheduled && this.state === 'ready') {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
  }

  /**
   * Opens `group` (migration/converging-batch.ts gathers one turn's converging writes in one
   * MULTI): it queues its requests when sealed, which happens before this connection queues a
   * request of a client the group holds (or of no client), before the queue is written, and when
   * the connection fails. Other clients' requests go ahead of it: there is no order between two
   * clients' requests. An open group is sealed first.
   */
  openGroup(group: OpenGroup): void {
    this.sealGroup();
    this.group = group;
    if (this.state === 'closed') this.sealGroup();
    else if (!this.flushScheduled && this.state === 'ready') {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
  }

  /** Whether a request of client `clientId`, or of no known client, is queued or in flight here. */
  mayHoldRequestOf(clientId: number): boolean {
    const of = (r: BackendRequest): boolean => r.owner === undefined || r.owner.id === clientId;
    return this.requests.some(of);
  }

  private sealGroup(): void {
    const group = this.group;
    this.group = null;
    if (group !== null) group.seal();
  }

  /**
   * Requests sent from now on queue but are not written until releaseWrites (holds nest): the pool
   * holds a node's shared connections while a blocking command is on its way to that node.
   */
  holdWrites(): void {
    this.writeHolds++;
  }

  releaseWrites(): void {
    if (this.writeHolds === 0 || --this.writeHolds > 0) return;
    if (!this.flushScheduled && this.state === 'ready') {
      this.flushScheduled = true;
      setImmediate(this.flushNow);
    }
  }

  /** Closes the connection; pending requests fail with `reason`. */
  close(reason = 'closed by slotproxy'): void {
    this.fail(`ERR slotproxy: ${reason}`);
  }

  private readonly flushNow = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  private flush(): void {
    this.sealGroup();
    if (this.state !== 'ready' || this.blocked || this.writeHolds > 0 || this.requests.length === this.written) return;
    if (this.written === 0) this.lastProgressAt = batchClock();
    this.written = this.requests.length;
    this.inflightBytes += this.queuedBytes;
    this.queuedBytes = 0;
    if (!this.output.writeTo(this.socket)) this.blocked = true;
  }

  private onConnect(): void {
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    this.connectTimer = null;
    if (this.state === 'closed') return;
    if (this.options.commandTimeoutMs > 0) {
      const every = Math.max(10, Math.floor(this.options.commandTimeoutMs / 4));
      this.watchdog = setInterval(() => this.checkProgress(), every);
      this.watchdog.unref();
    }
    // Handshake requests go first, ahead of what was sent while connecting; their replies are checked, not forwarded.
    const proving = this.options.proveFirst === true;
    const handshake = proving && this.options.handshake.length === 0 ? [PROBE] : this.options.handshake;
    const waiting = this.requests.drain();
    for (const payload of handshake) {
      this.requests.push({
        payload,
        onReply: (frame) => {
          if (frame[0] === 45 && payload !== PROBE) this.fail(`ERR slotproxy: node ${this.address} refused the handshake: ${frame.toString('utf8', 1, frame.length - 2)}`);
        },
        onFailure: () => undefined,
      });
    }
    for (const r of waiting) this.requests.push(r);
    this.written = handshake.length;
    this.handshakeLeft = handshake.length;
    if (handshake.length > 0) {
      this.lastProgressAt = batchClock();
      this.socket.write(Buffer.concat(handshake));
    }
    if (proving) this.state = 'proving';
    else this.becomeReady();
  }

  private becomeReady(): void {
    this.state = 'ready';
    for (const l of this.readyListeners) l();
    this.flush();
  }

  private onData(chunk: Buffer): void {
    // Once per read, not per reply: a node busy with a script sends nothing at all.
    this.lastProgressAt = batchClock();
    try {
      inBatch(this.frame, chunk);
    } catch (err) {
      const why = err instanceof ReplyFramingError ? err.message : String(err);
      this.fail(`ERR slotproxy: node ${this.address} sent ${why}`);
    }
  }

  private readonly frame = (chunk: Buffer): void => this.framer.push(chunk, this.deliver);

  private readonly deliver = (frame: Buffer): void => {
    this.repliesSeen++;
    if (frame[0] === 45 && frame[1] === 66 && isBusy(frame)) this.busySeenAt = Date.now(); // '-B'
    if (this.written === 0) throw new ReplyFramingError('a reply nobody asked for');
    const request = this.requests.shift() as BackendRequest;
    this.written--;
    if (this.handshakeLeft > 0) {
      this.handshakeLeft--;
      request.onReply(frame);
      if (this.handshakeLeft === 0 && this.state === 'proving') this.becomeReady();
      return;
    }
    this.inflightBytes -= request.payload.length;
    if (this.counters !== null && request.internal !== true) {
      this.counters.responses++;
      this.counters.responseBytes += frame.length;
    }
    request.onReply(frame);
  };

  /**
   * Fails the connection when the oldest request has waited a whole command timeout with no reply,
   * unless the node shows it is running a script (busyCheck): the script's caller gets the
   * script's reply, and the requests written behind it theirs, when it ends.
   */
  private checkProgress(): void {
    if (this.written === 0 || this.repliesSeen !== this.lastCheckedReplies) {
      this.lastCheckedReplies = this.repliesSeen;
      this.staleChecks = 0;
      return;
    }
    this.staleChecks++;
    if (this.staleChecks < 4 || this.checkingBusy) return;
    const busyCheck = this.options.busyCheck;
    if (busyCheck === undefined || busyCheck === null) return this.timeOut();
    this.checkingBusy = true;
    void busyCheck().then((busy) => {
      this.checkingBusy = false;
      // A reply meanwhile: the next check starts over.
      if (this.state === 'closed' || this.repliesSeen !== this.lastCheckedReplies) return;
      if (busy) this.staleChecks = 0;
      else this.timeOut();
    });
  }

  private timeOut(): void {
    if (this.counters !== null) this.counters.timedOut++;
    this.fail(errors.commandTimeout(this.address, this.options.commandTimeoutMs));
  }

  private fail(message: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    if (this.watchdog !== null) clearInterval(this.watchdog);
    this.socket.destroy();
    this.queuedBytes = 0;
    this.inflightBytes = 0;
    const requests = this.requests.drain();
    const written = this.written;
    this.written = 0;
    for (let i = 0; i < requests.length; i++) requests[i].onFailure(message, i < written);
    this.sealGroup(); // its requests fail too (the connection is closed)
    for (const l of this.closeListeners) l(message);
  }
}

/** A `-BUSY ...` reply: the node runs a script past its busy threshold. */
export function isBusy(frame: Buffer): boolean {
  return frame.length > 6 && frame.toString('latin1', 0, 6) === '-BUSY ';
}

export function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(':');
  const host = address.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return [host, Number(address.slice(i + 1))];
}
