/**
 * Shared back-end connections: a small fixed number per node ("lanes"), whatever the number of
 * clients. A client session always uses the same lane on every node, so its commands to one node
 * run in the order it sent them.
 *
 * A closed connection is replaced on next use. Reconnects to a node that keeps failing wait an
 * exponential backoff with jitter, so a restarting node is not hammered by every client at once;
 * except a node that fails fast (setFailFast: a ring server with no Sentinel to wait for), which
 * is tried again at once by the next request, as nutcracker does: requests queued on the attempt
 * get its refusal within a round trip, and the first request after the node is back reaches it.
 * The connection that replaces a closed one writes no request until the node has answered once
 * (proveFirst): a killed node's listener can accept and then reset, and requests held back are
 * retried as refused ones rather than answered as ones that may have run.
 */
import { BackendConnection, ConnectionOptions, isBusy } from './connection';
import { request } from './request';
import { interned } from '../../sharding/interned-address';
import { BackendTls } from '../security/tls';
import { ConnectLimiter } from './connect-limiter';
import { NodeCounters } from './node-counters';
import * as encode from '../resp/encode';

export interface PoolOptions {
  connectionsPerNode: number;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  /**
   * `commandTimeoutMs` cuts off every request, as twemproxy's `timeout:` does (set on purpose).
   * Else (the default) it never cuts off a request waiting behind a script the node demonstrably
   * runs (it answers BUSY on a spare connection).
   */
  timeoutBehindScripts?: boolean;
  handshake: Buffer[];
  tls: BackendTls | null;
  /** Cap on new back-end connections per second (all nodes together); bursts up to the same number. Default 100. */
  maxConnectsPerSecond?: number;
}

/**
 * A node answers other connections `-BUSY` once a script or function has run this long (its
 * `busy-reply-threshold`, Redis's default; the proxy reads the node's own value, see setBusyAfter).
 */
export const DEFAULT_BUSY_AFTER_MS = 5000;
/** How long a node running a script may take to answer BUSY on a spare connection (once connected). */
const BUSY_PROBE_MS = 1000;
/** Spare connections per node and protocol for lanes stuck behind a busy script. */
const SPARES_PER_NODE = 4;

interface NodeState {
  lanes: (BackendConnection | null)[];
  /** Lanes for RESP3 clients (HELLO 3 in the handshake), opened only when such a client shows up. */
  resp3Lanes: (BackendConnection | null)[];
  /** Taken instead of a lane stuck behind a busy script, per protocol; opened when first needed. */
  spares: BackendConnection[];
  resp3Spares: BackendConnection[];
  failures: number;
  /** A connection to it closed and none has been answered since: the next proves it first (proveFirst). */
  suspect: boolean;
  counters: NodeCounters;
  /** holdWrites in force: every shared connection, also one opened meanwhile, holds its writes. */
  writeHolds: number;
}

/** One node's nutcracker server stats, read when the stats JSON is built. */
export interface NodeStats {
  counters: NodeCounters;
  /** Open shared connections to the node. */
  connections: number;
  inQueue: number;
  inQueueBytes: number;
  outQueue: number;
  outQueueBytes: number;
}

/** Sent last in the handshake of connections that serve RESP3 clients, so replies come in RESP3. */
const HELLO_3 = encode.command(['HELLO', '3']);
/** A node busy running a script refuses READONLY with -BUSY (AUTH it takes): left out of outOfLane(). */
const READONLY = encode.command(['READONLY']);

const BACKOFF_BASE_MS = 25;
const BACKOFF_CAP_MS = 1000;

export class BackendPool {
  private readonly nodes = new Map<string, NodeState>();
  /** Per node, kept when a node leaves the topology (its counts stay, as nutcracker's do). */
  private readonly counters = new Map<string, NodeCounters>();
  private lostListeners: ((address: string, reason: string) => void)[] = [];
  private retryFailedListeners: ((address: string) => void)[] = [];
  private readyListeners: ((address: string) => void)[] = [];
  private closed = false;
  /** Nodes that fail fast (setFailFast); none unless a ring without Sentinel says so. */
  private failsFastAt: (address: string) => boolean = () => false;

  private readonly limiter: ConnectLimiter;
  private busyAfterMs = DEFAULT_BUSY_AFTER_MS;
  /** Back-end connections opened (or scheduled) since start, for INFO and the storm tests. */
  connectsStarted = 0;

  constructor(private readonly options: PoolOptions) {
    const rate = options.maxConnectsPerSecond ?? 100;
    this.limiter = new ConnectLimiter(rate, rate);
  }

  /** New back-end credentials (a reload): connections opened from now on use them; open ones stay. */
  setHandshake(handshake: Buffer[]): void {
    this.options.handshake = handshake;
  }

  /** Called when a connection that was in use closes (a hint that the topology may have changed). */
  onConnectionLost(listener: (address: string, reason: string) => void): void {
    this.lostListeners.push(listener);
  }

  /**
   * Called instead of onConnectionLost's listeners when a fail-fast node (setFailFast) that already
   * failed fails another attempt: each request to it makes one, so under load there are many a
   * second, and none says more than the first did (ring mode's auto-eject counts them).
   */
  onRetryFailed(listener: (address: string) => void): void {
    this.retryFailedListeners.push(listener);
  }

  /** Called when a connection to `address` is established (ring mode's auto-eject resets its count). */
  onConnectionReady(listener: (address: string) => void): void {
    this.readyListeners.push(listener);
  }

  /**
   * `failsFast(address)`: the node's failed connection is tried again at once, with no backoff and
   * outside the connect-rate cap (one attempt per lane at a time is no storm), and its requests
   * are not retried (dispatch/forward.ts asks failsFast): nutcracker's behaviour for a server
   * that is down. Asked only when a connection opens or fails.
   */
  setFailFast(failsFast: (address: string) => boolean): void {
    this.failsFastAt = failsFast;
  }

  /** Whether `address` fails fast (setFailFast). */
  failsFast(address: string): boolean {
    return this.failsFastAt(address);
  }

  /** The node's `busy-reply-threshold` in ms (0 or less: keep the default). */
  setBusyAfter(ms: number): void {
    if (ms > 0) this.busyAfterMs = ms;
  }

  /**
   * The shared connection of `lane` to `address`, speaking `protocol` (a client's HELLO version).
   * A lane whose requests have waited past the node's busy threshold with no reply is stuck behind
   * a script the node runs on: it takes no new requests, which go to a spare connection instead,
   * where the node answers at once (`-BUSY`, as it answers every other client) and not after the
   * script. Requests already written behind the script wait for it on their lane.
   */
  connection(address: string, lane: number, protocol: 2 | 3 = 2): BackendConnection {
    const node = this.nodeState(address);
    const lanes = protocol === 3 ? node.resp3Lanes : node.lanes;
    const i = lane % lanes.length;
    const existing = lanes[i];
    if (existing !== null && !existing.isClosed) {
      if (existing.stalledFor() < this.busyAfterMs) return existing;
      return this.spare(address, node, protocol);
    }
    const conn = this.open(address, node, protocol);
    lanes[i] = conn;
    return conn;
  }

  private nodeState(address: string): NodeState {
    let node = this.nodes.get(address);
    if (node === undefined) {
      const n = this.options.connectionsPerNode;
      node = {
        lanes: new Array<BackendConnection | null>(n).fill(null),
        resp3Lanes: new Array<BackendConnection | null>(n).fill(null),
        spares: [],
        resp3Spares: [],
        failures: 0,
        suspect: false,
        counters: this.countersOf(address),
        writeHolds: 0,
      };
      this.nodes.set(interned(address), node);
    }
    return node;
  }

  /**
   * Holds what `address`'s shared connections write until the returned function is called (once;
   * later calls do nothing): the requests of every client to that node queue meanwhile, in order,
   * and nothing sent to other nodes waits. A blocking command holds its node until the node has
   * read it (dispatch/blocking.ts), so a command another client sends after it gets there after it.
   */
  holdWrites(address: string): () => void {
    const node = this.nodeState(address);
    node.writeHolds++;
    for (const c of sharedConnections(node)) c?.holdWrites();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      node.writeHolds--;
      for (const c of sharedConnections(node)) c?.releaseWrites();
    };
  }

  /**
   * Whether `address` may be running a busy script, without asking it: one of its shared
   * connections has waited past the busy threshold with no reply, or the node answered BUSY within
   * the last threshold. Only then is the node itself asked (busyReply): a request per check
   * would cost every transaction a round trip.
   */
  mayBeBusy(address: string): boolean {
    const node = this.nodes.get(address);
    if (node === undefined) return false;
    const now = Date.now();
    return sharedConnections(node).some((c) => c !== null && !c.isClosed && (c.stalledFor() >= this.busyAfterMs || now - c.busySeenAt < this.busyAfterMs));
  }

  /**
   * The node's own `-BUSY ...` reply when it runs a script past its busy threshold now, else null
   * (it answered otherwise, or not within `timeoutMs`). Asked with a PING on `lane`, or on a spare
   * when the lane is stuck behind the script: a busy node answers it at once.
   */
  async busyReply(address: string, lane: number, timeoutMs: number): Promise<Buffer | null> {
    try {
      const frame = await request(this.connection(address, lane), ['PING'], timeoutMs);
      return isBusy(frame) ? frame : null;
    } catch {
      return null;
    }
  }

  /**
   * True when `address` answers BUSY on a spare connection now: it is alive, running a script
   * past its busy threshold, and a connection waiting behind that script is not timed out.
   */
  private async runsScript(address: string): Promise<boolean> {
    const node = this.nodes.get(address);
    if (node === undefined || this.closed) return false;
    try {
      const frame = await request(this.spare(address, node, 2), ['PING'], this.options.connectTimeoutMs + BUSY_PROBE_MS);
      return isBusy(frame);
    } catch {
      return false;
    }
  }

  /** A spare connection to a node whose lane is stuck: one that is not stuck itself, opened when none is. */
  private spare(address: string, node: NodeState, protocol: 2 | 3): BackendConnection {
    const spares = protocol === 3 ? node.resp3Spares : node.spares;
    for (let k = spares.length - 1; k >= 0; k--) if (spares[k].isClosed) spares.splice(k, 1);
    const free = spares.find((c) => c.stalledFor() < this.busyAfterMs);
    if (free !== undefined) return free;
    if (spares.length < SPARES_PER_NODE) {
      const conn = this.open(address, node, protocol, true);
      spares.push(conn);
      return conn;
    }
    // Every spare is stuck too (scripts on each): the one waiting least.
    return spares.reduce((a, b) => (a.stalledFor() <= b.stalledFor() ? a : b));
  }

  /**
   * A connection of its own for one client (MULTI, blocking commands, Pub/Sub). Not in the lanes;
   * the caller closes it. `commandTimeoutMs` 0 suits blocking commands. Proven first, as a shared
   * one, while the node's last shared connection was lost and none answered since.
   */
  dedicated(address: string, commandTimeoutMs: number, protocol: 2 | 3 = 2): BackendConnection {
    const proveFirst = this.nodes.get(address)?.suspect === true;
    return new BackendConnection(address, { ...this.linkOptions(protocol), commandTimeoutMs, counters: this.countersOf(address), proveFirst });
  }

  /** The counters of `address` (created on first use; Map lookups only when a connection opens or stats are read). */
  countersOf(address: string): NodeCounters {
    let c = this.counters.get(address);
    if (c === undefined) {
      c = new NodeCounters();
      this.counters.set(address, c);
    }
    return c;
  }

  /** `address`'s nutcracker server stats now: its counters, and its shared connections' queues. */
  nodeStats(address: string): NodeStats {
    const out: NodeStats = { counters: this.countersOf(address), connections: 0, inQueue: 0, inQueueBytes: 0, outQueue: 0, outQueueBytes: 0 };
    const node = this.nodes.get(address);
    if (node === undefined) return out;
    for (const c of sharedConnections(node)) {
      if (c === null || c.isClosed) continue;
      out.connections++;
      const q = c.queues;
      out.inQueue += q.inQueue;
      out.inQueueBytes += q.inQueueBytes;
      out.outQueue += q.outQueue;
      out.outQueueBytes += q.outQueueBytes;
    }
    return out;
  }

  /**
   * A connection of its own for one request that must not wait behind the lanes: SCRIPT KILL and
   * FUNCTION KILL, whose node may be running a busy script sent on the very lane the client uses.
   * Its handshake is one a busy node accepts (no READONLY). The caller closes it.
   */
  outOfLane(address: string): BackendConnection {
    const options = this.linkOptions();
    return new BackendConnection(address, { ...options, handshake: options.handshake.filter((h) => !h.equals(READONLY)) });
  }

  /** How a connection the caller manages itself is opened (Pub/Sub links): timeouts, handshake, TLS. */
  linkOptions(protocol: 2 | 3 = 2): ConnectionOptions {
    return this.connectionOptions(this.connectDelay(0), protocol);
  }

  /** Number of open shared connections, for INFO and metrics. */
  get openConnections(): number {
    let n = 0;
    for (const node of this.nodes.values()) for (const c of sharedConnections(node)) if (c !== null && !c.isClosed) n++;
    return n;
  }

  /**
   * Closes `address`'s shared connections that are not ready yet (a reconnect backoff, a connect
   * under way, a node being proven): none of their requests was written, so they fail over to wherever they
   * belong now at once (a Sentinel master that moved) instead of after the backoff.
   */
  abandonConnecting(address: string): void {
    const node = this.nodes.get(address);
    if (node === undefined) return;
    for (const c of sharedConnections(node)) if (c !== null && !c.isClosed && !c.isReady) c.close(`${address} is no longer where its requests go`);
  }

  /** Forgets nodes that are no longer part of the topology, closing their connections. */
  retain(addresses: ReadonlySet<string>): void {
    for (const [address, node] of this.nodes) {
      if (addresses.has(address)) continue;
      for (const c of sharedConnections(node)) c?.close('node left the topology');
      this.nodes.delete(address);
    }
  }

  closeAll(): void {
    this.closed = true;
    for (const node of this.nodes.values()) for (const c of sharedConnections(node)) c?.close('shutting down');
    this.nodes.clear();
  }

  /** `toBusyNode`: a spare for a node running a busy script, whose handshake leaves out READONLY (refused with -BUSY). */
  private open(address: string, node: NodeState, protocol: 2 | 3, toBusyNode = false): BackendConnection {
    const retryAtOnce = node.failures > 0 && this.failsFastAt(address);
    const delay = node.failures === 0 || retryAtOnce ? 0 : Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (node.failures - 1)) * (0.5 + Math.random() / 2);
    const busyCheck = this.options.timeoutBehindScripts === true ? null : (): Promise<boolean> => this.runsScript(address);
    const options = { ...this.connectionOptions(retryAtOnce ? this.connectAtOnce() : this.connectDelay(delay), protocol), counters: node.counters, busyCheck, proveFirst: node.suspect };
    if (toBusyNode) options.handshake = options.handshake.filter((h) => !h.equals(READONLY));
    const conn = new BackendConnection(address, options);
    for (let i = 0; i < node.writeHolds; i++) conn.holdWrites();
    let connected = false;
    conn.onReady(() => {
      connected = true;
      node.failures = 0;
      node.suspect = false;
      for (const l of this.readyListeners) l(address);
    });
    conn.onClose((reason) => {
      if (this.closed) return;
      node.suspect = true;
      if (!connected && retryAtOnce) {
        node.failures++;
        for (const l of this.retryFailedListeners) l(address);
        return;
      }
      if (!connected) node.failures++;
      for (const l of this.lostListeners) l(address, reason);
    });
    return conn;
  }

  /** The later of a node's reconnect backoff and the global connect-rate cap's next free turn. */
  private connectDelay(backoffMs: number): number {
    this.connectsStarted++;
    return Math.max(backoffMs, this.limiter.reserve());
  }

  /** A fail-fast node's next attempt: now, not booked on the connect-rate cap. */
  private connectAtOnce(): number {
    this.connectsStarted++;
    return 0;
  }

  private connectionOptions(delayMs: number, protocol: 2 | 3 = 2): ConnectionOptions {
    return {
      connectTimeoutMs: this.options.connectTimeoutMs,
      commandTimeoutMs: this.options.commandTimeoutMs,
      delayMs,
      handshake: protocol === 3 ? [...this.options.handshake, HELLO_3] : this.options.handshake,
      tls: this.options.tls,
    };
  }
}

/** A node's shared lanes, RESP2 and RESP3. */
function sharedConnections(node: NodeState): (BackendConnection | null)[] {
  return [...node.lanes, ...node.resp3Lanes, ...node.spares, ...node.resp3Spares];
}
