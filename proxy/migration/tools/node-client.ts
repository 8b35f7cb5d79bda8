/**
 * Direct connections to the nodes of both sides for the `migrate` tools (they work on the nodes,
 * not through a proxy): the proxy's own back-end pool, with the config's credentials and TLS.
 * A side that is a Redis Cluster (the config's own cluster in cluster mode, or `migration.to`) has
 * its slot map loaded (start()) and kept current by the redirects its nodes answer, so requests
 * to it follow MOVED/ASK and ride out a failover.
 */
import { Config } from '../../../config/schema';
import { BackendPool } from '../../backend/pool';
import { CarryChoice, chooseCarry } from '../carry-choice';
import { request } from '../../backend/request';
import { backendTls } from '../../security/tls';
import { Reply, decodeReply, errorText } from '../../resp/decode-reply';
import { ClusterTopology } from '../../cluster/topology';
import { Placement } from '../../../sharding/migration';
import { SlotOwners } from '../../../sharding/key-space';
import { sideRequest } from '../side-request';
import { migrationAt, ringAt } from '../../../sharding/master-addresses';
import { NO_MASTERS, startSentinelMasters } from '../../sentinel/start';
import { SentinelMasters } from '../../sentinel/masters';
import * as encode from '../../resp/encode';

/** How long a request to a cluster side rides out a failover (TRYAGAIN, CLUSTERDOWN, a lost node). */
const CLUSTER_RETRY_WINDOW_MS = 30_000;
/** How often a tool reads a cluster side's slot map again (a MOVED or a lost connection also does). */
const TOPOLOGY_REFRESH_MS = 1000;

export class NodeClient {
  private readonly pool: BackendPool;
  /** Side A's slot map in cluster mode. */
  private readonly source: ClusterTopology | null = null;
  /** Side B's slot map when it is a Redis Cluster. */
  private readonly target: ClusterTopology | null = null;

  constructor(private readonly config: Config, private readonly timeoutMs = 30_000) {
    const { username, password } = config.backend;
    this.pool = new BackendPool({
      connectionsPerNode: 1,
      connectTimeoutMs: config.backend.connectTimeoutMs,
      commandTimeoutMs: timeoutMs,
      handshake: password === undefined ? [] : [encode.command(username === undefined ? ['AUTH', password] : ['AUTH', username, password])],
      tls: backendTls(config.backend.tls),
      maxConnectsPerSecond: config.backend.maxConnectsPerSecond,
    });
    const topology = (seeds: readonly string[]): ClusterTopology =>
      new ClusterTopology(this.pool, { seeds, refreshIntervalMs: 60_000, queryTimeoutMs: config.backend.connectTimeoutMs });
    if (config.mode === 'cluster') this.source = topology(config.cluster.seeds);
    const to = config.migration?.to;
    if (to !== undefined && 'cluster' in to) this.target = topology(to.cluster.seeds);
  }

  /** The carry the proxies choose for this migration (carry-choice.ts), asked of side A's nodes as they ask. */
  async carry(placement: Placement): Promise<CarryChoice['carry']> {
    return (await chooseCarry(this.pool, placement, this.config.migration?.carry, this.config.backend.connectTimeoutMs)).carry;
  }

  /** Ring nodes given by their Sentinel master name: where the sentinels say those are (start()). */
  private masters: SentinelMasters | null = null;

  /**
   * Loads the slot map of each side that is a cluster, and asks the sentinels where the ring's
   * Sentinel-managed nodes are; throws when no seed of a cluster answers, or a master is unknown.
   */
  async start(): Promise<void> {
    await this.source?.refresh();
    await this.target?.refresh();
    this.masters = await startSentinelMasters(this.config);
    // `migrate copy` may watch the nodes for minutes (the replication carry's full syncs): a
    // cluster side's map is read again, so a failover's new masters are the ones asked.
    if (this.source !== null || this.target !== null) {
      this.refresher ??= setInterval(() => (this.source?.requestRefresh(), this.target?.requestRefresh()), TOPOLOGY_REFRESH_MS).unref();
    }
  }

  private refresher: NodeJS.Timeout | null = null;

  /** The config's placement, its cluster sides read through this client's slot maps. */
  placement(): Placement {
    const config = this.config;
    if (config.migration === undefined) throw new Error('the config has no migration: section');
    const target = (): ClusterTopology => this.target as ClusterTopology;
    const at = this.masters?.addressOf ?? NO_MASTERS;
    if (config.mode === 'ring') return Placement.fromConfig(ringAt(config.ring, at), migrationAt(config.migration, at), undefined, target);
    return Placement.forCluster(config.cluster.seeds, this.source as ClusterTopology, config.migration, target);
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

  /** How the pool connects (TLS, AUTH), for a replication link of its own (verify-offsets.ts). */
  linkOptions(): ReturnType<BackendPool['linkOptions']> {
    return this.pool.linkOptions();
  }

  close(): void {
    if (this.refresher !== null) clearInterval(this.refresher);
    this.masters?.stop();
    this.source?.stop();
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
