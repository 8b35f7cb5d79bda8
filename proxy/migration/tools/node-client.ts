/**
 * Direct connections to the nodes of both sides for the `migrate` tools (they work on the nodes,
 * not through a proxy): the proxy's own back-end pool, with the config's credentials and TLS.
 * When side B is a Redis Cluster, its slot map is loaded (start()) and kept current by the
 * redirects its nodes answer, so requests to it follow MOVED/ASK and ride out a failover.
 */
import { RingModeConfig } from '../../../config/schema';
import { BackendPool } from '../../backend/pool';
import { request } from '../../backend/request';
import { backendTls } from '../../security/tls';
import { Reply, decodeReply, errorText } from '../../resp/decode-reply';
import { ClusterTopology } from '../../cluster/topology';
import { Placement } from '../../../sharding/migration';
import { SlotOwners } from '../../../sharding/key-space';
import { sideRequest } from '../side-request';
import * as encode from '../../resp/encode';

/** How long a request to a cluster side rides out a failover (TRYAGAIN, CLUSTERDOWN, a lost node). */
const CLUSTER_RETRY_WINDOW_MS = 30_000;

export class NodeClient {
  private readonly pool: BackendPool;
  /** Side B's slot map when it is a Redis Cluster. */
  private readonly target: ClusterTopology | null = null;

  constructor(private readonly config: RingModeConfig, private readonly timeoutMs = 30_000) {
    const { username, password } = config.backend;
    this.pool = new BackendPool({
      connectionsPerNode: 1,
      connectTimeoutMs: config.backend.connectTimeoutMs,
      commandTimeoutMs: timeoutMs,
      handshake: password === undefined ? [] : [encode.command(username === undefined ? ['AUTH', password] : ['AUTH', username, password])],
      tls: backendTls(config.backend.tls),
      maxConnectsPerSecond: config.backend.maxConnectsPerSecond,
    });
    const to = config.migration?.to;
    if (to !== undefined && 'cluster' in to) {
      this.target = new ClusterTopology(this.pool, { seeds: to.cluster.seeds, refreshIntervalMs: 60_000, queryTimeoutMs: config.backend.connectTimeoutMs });
    }
  }

  /** Loads side B's slot map when B is a cluster; throws when no seed answers. */
  async start(): Promise<void> {
    await this.target?.refresh();
  }

  /** The config's placement, its cluster side (if any) read through this client's slot map. */
  placement(): Placement {
    if (this.config.migration === undefined) throw new Error('the config has no migration: section');
    return Placement.fromConfig(this.config.ring, this.config.migration, undefined, () => this.target as ClusterTopology);
  }

  /**
   * The raw reply of the node serving a key on a side (`owners`: its slot map when it is a
   * cluster, redirects followed; null for a ring node); throws on an error reply.
   */
  async rawOn(owners: SlotOwners | null, addr: string, args: readonly (Buffer | string)[]): Promise<Buffer> {
    if (owners === null) return this.raw(addr, args);
    const frame = await sideRequest(this.pool, owners, addr, args, { lane: 0, timeoutMs: this.timeoutMs, retryWindowMs: CLUSTER_RETRY_WINDOW_MS });
    const err = errorText(frame);
    if (err !== null) throw new Error(`${addr}: ${err}`);
    return frame;
  }

  async callOn(owners: SlotOwners | null, addr: string, args: readonly (Buffer | string)[]): Promise<Reply> {
    return decodeReply(await this.rawOn(owners, addr, args), true);
  }

  /** The raw reply frame; throws on an error reply or a lost connection. */
  async raw(addr: string, args: readonly (Buffer | string)[]): Promise<Buffer> {
    const frame = await request(this.pool.connection(addr, 0), args, this.timeoutMs);
    const err = errorText(frame);
    if (err !== null) throw new Error(`${addr}: ${err}`);
    return frame;
  }

  /** The decoded reply, bulk strings as Buffers. */
  async call(addr: string, args: readonly (Buffer | string)[]): Promise<Reply> {
    return decodeReply(await this.raw(addr, args), true);
  }

  close(): void {
    this.target?.stop();
    this.pool.closeAll();
  }
}

/** One SCAN step: the next cursor and the keys. */
export async function scanStep(nodes: NodeClient, addr: string, cursor: string, count: number): Promise<{ cursor: string; keys: Buffer[] }> {
  const r = await nodes.call(addr, ['SCAN', cursor, 'COUNT', String(count)]);
  if (!Array.isArray(r) || r.length !== 2 || !Array.isArray(r[1])) throw new Error(`${addr}: unexpected SCAN reply`);
  const next = Buffer.isBuffer(r[0]) ? r[0].toString('latin1') : String(r[0]);
  return { cursor: next, keys: r[1].filter((k): k is Buffer => Buffer.isBuffer(k)) };
}

/** A key as text for people: printable keys as they are, others as hex. */
export function showKey(key: Buffer): string {
  for (const b of key) if (b < 0x20 || b > 0x7e) return `0x${key.toString('hex')}`;
  return key.toString('latin1');
}
