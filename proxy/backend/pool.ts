/**
 * Shared back-end connections: a small fixed number per node ("lanes"), whatever the number of
 * clients. A client session always uses the same lane on every node, so its commands to one node
 * run in the order it sent them.
 *
 * A closed connection is replaced on next use. Reconnects to a node that keeps failing wait an
 * exponential backoff with jitter, so a restarting node is not hammered by every client at once.
 */
import { BackendConnection, ConnectionOptions } from './connection';
import { BackendTls } from '../tls';

export interface PoolOptions {
  connectionsPerNode: number;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  handshake: Buffer[];
  tls: BackendTls | null;
}

interface NodeState {
  lanes: (BackendConnection | null)[];
  failures: number;
}

const BACKOFF_BASE_MS = 25;
const BACKOFF_CAP_MS = 1000;

export class BackendPool {
  private readonly nodes = new Map<string, NodeState>();
  private lostListeners: ((address: string, reason: string) => void)[] = [];
  private closed = false;

  constructor(private readonly options: PoolOptions) {}

  /** Called when a connection that was in use closes (a hint that the topology may have changed). */
  onConnectionLost(listener: (address: string, reason: string) => void): void {
    this.lostListeners.push(listener);
  }

  connection(address: string, lane: number): BackendConnection {
    let node = this.nodes.get(address);
    if (node === undefined) {
      node = { lanes: new Array<BackendConnection | null>(this.options.connectionsPerNode).fill(null), failures: 0 };
      this.nodes.set(address, node);
    }
    const i = lane % node.lanes.length;
    const existing = node.lanes[i];
    if (existing !== null && !existing.isClosed) return existing;
    const conn = this.open(address, node);
    node.lanes[i] = conn;
    return conn;
  }

  /**
   * A connection of its own for one client (MULTI, blocking commands, Pub/Sub). Not in the lanes;
   * the caller closes it. `commandTimeoutMs` 0 suits blocking commands.
   */
  dedicated(address: string, commandTimeoutMs: number): BackendConnection {
    return new BackendConnection(address, { ...this.connectionOptions(0), commandTimeoutMs });
  }

  /** How a connection the caller manages itself is opened (Pub/Sub links): timeouts, handshake, TLS. */
  linkOptions(): ConnectionOptions {
    return this.connectionOptions(0);
  }

  /** Number of open shared connections, for INFO and metrics. */
  get openConnections(): number {
    let n = 0;
    for (const node of this.nodes.values()) for (const c of node.lanes) if (c !== null && !c.isClosed) n++;
    return n;
  }

  /** Forgets nodes that are no longer part of the topology, closing their connections. */
  retain(addresses: ReadonlySet<string>): void {
    for (const [address, node] of this.nodes) {
      if (addresses.has(address)) continue;
      for (const c of node.lanes) c?.close('node left the topology');
      this.nodes.delete(address);
    }
  }

  closeAll(): void {
    this.closed = true;
    for (const node of this.nodes.values()) for (const c of node.lanes) c?.close('shutting down');
    this.nodes.clear();
  }

  private open(address: string, node: NodeState): BackendConnection {
    const delay = node.failures === 0 ? 0 : Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (node.failures - 1)) * (0.5 + Math.random() / 2);
    const conn = new BackendConnection(address, this.connectionOptions(delay));
    let connected = false;
    conn.onReady(() => {
      connected = true;
      node.failures = 0;
    });
    conn.onClose((reason) => {
      if (!connected) node.failures++;
      if (!this.closed) for (const l of this.lostListeners) l(address, reason);
    });
    return conn;
  }

  private connectionOptions(delayMs: number): ConnectionOptions {
    return {
      connectTimeoutMs: this.options.connectTimeoutMs,
      commandTimeoutMs: this.options.commandTimeoutMs,
      delayMs,
      handshake: this.options.handshake,
      tls: this.options.tls,
    };
  }
}
