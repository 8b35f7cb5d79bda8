/**
 * Reads from replicas (`cluster.readFrom: replica | prefer-replica`, and `ring.sentinel.readFrom`
 * for a ring of Sentinel masters, whose replicas the sentinels name): which replica of a slot's
 * (or a ring server's) master may serve a read-only command now.
 *
 * A replica is used only while it is healthy, judged every `checkIntervalMs` from its master's own
 * view (`INFO replication`: the replica is `state=online` and acknowledged within `maxLagSeconds`)
 * and from the proxy's (it answers PING). A replica that fails a request is dropped at once and
 * comes back only with the next good check. When a slot's master has no healthy replica, pick()
 * returns null and the caller reads from the master.
 *
 * The healthy set is rebuilt whole by each check and swapped in; pick() reads it without locking.
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { decodeReply } from '../resp/decode-reply';
import { log } from '../telemetry/log';

export interface ReplicaReadOptions {
  /** How often replicas are checked. */
  checkIntervalMs: number;
  /** A replica whose last acknowledgement to its master is older than this is not read from. */
  maxLagSeconds: number;
  /** Time limit of each check's requests. */
  queryTimeoutMs: number;
}

export interface ReplicaLink {
  state: string;
  lagSeconds: number;
}

/** Parses the `slaveN:ip=...,port=...,state=online,offset=...,lag=0` lines of a master's INFO replication. */
export function parseReplicaLinks(info: string): Map<string, ReplicaLink> {
  const out = new Map<string, ReplicaLink>();
  for (const line of info.split(/\r?\n/)) {
    const m = /^slave\d+:(.*)$/.exec(line);
    if (m === null) continue;
    const fields = new Map(m[1].split(',').map((kv) => kv.split('=') as [string, string]));
    const ip = fields.get('ip');
    const port = fields.get('port');
    if (ip === undefined || port === undefined) continue;
    const address = ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
    out.set(address, { state: fields.get('state') ?? '', lagSeconds: Number(fields.get('lag') ?? Infinity) });
  }
  return out;
}

/** What the master says of a replica is enough to read from it: linked, and acknowledged recently. */
export function linkIsUsable(link: ReplicaLink | undefined, maxLagSeconds: number): boolean {
  return link !== undefined && link.state === 'online' && link.lagSeconds <= maxLagSeconds;
}

/** A master and the replicas that may serve its reads (a cluster's slot map, or what the sentinels know of a ring's master). */
export interface MasterReplicas {
  readonly address: string;
  readonly replicas: readonly string[];
}

export class ReplicaReads {
  /** Master address -> its healthy replicas (never empty arrays). */
  private healthy = new Map<string, readonly string[]>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private stopped = false;
  /** Reads sent to a replica, and reads that fell back to the master for want of one (INFO, metrics). */
  replicaReads = 0;
  masterFallbacks = 0;

  /** `masters`: every master now with its replicas, read at each check. */
  constructor(
    private readonly pool: BackendPool,
    private readonly masters: () => readonly MasterReplicas[] | Promise<readonly MasterReplicas[]>,
    private readonly options: ReplicaReadOptions,
  ) {}

  /** Runs a first check, then keeps checking in the background. */
  async start(): Promise<void> {
    await this.check();
    this.timer = setInterval(() => void this.check(), this.options.checkIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
  }

  /** A healthy replica of `master` for a client on `lane`, or null (read from the master). */
  pick(master: string, lane: number): string | null {
    const replicas = this.healthy.get(master);
    if (replicas === undefined) {
      this.masterFallbacks++;
      return null;
    }
    this.replicaReads++;
    return replicas[lane % replicas.length];
  }

  /** A replica that failed a request is not read from until a check finds it healthy again. */
  markDown(replica: string): void {
    const next = new Map<string, readonly string[]>();
    for (const [master, replicas] of this.healthy) {
      const kept = replicas.filter((r) => r !== replica);
      if (kept.length > 0) next.set(master, kept);
    }
    this.healthy = next;
  }

  /** Number of replicas currently read from. */
  get healthyCount(): number {
    let n = 0;
    for (const r of this.healthy.values()) n += r.length;
    return n;
  }

  private async check(): Promise<void> {
    if (this.checking || this.stopped) return;
    this.checking = true;
    try {
      const next = new Map<string, readonly string[]>();
      await Promise.all(
        (await this.masters()).map(async (m) => {
          if (m.replicas.length === 0) return;
          const links = await this.replicaLinks(m.address);
          const ok = await Promise.all(m.replicas.map((r) => this.isHealthy(r, links.get(r))));
          const replicas = m.replicas.filter((_, i) => ok[i]);
          if (replicas.length > 0) next.set(m.address, Object.freeze(replicas));
        }),
      );
      if (!this.stopped) this.healthy = next;
    } finally {
      this.checking = false;
    }
  }

  private async replicaLinks(master: string): Promise<Map<string, ReplicaLink>> {
    try {
      const reply = decodeReply(await request(this.pool.connection(master, 0), ['INFO', 'replication'], this.options.queryTimeoutMs));
      return typeof reply === 'string' ? parseReplicaLinks(reply) : new Map();
    } catch (err) {
      log.debug({ master, err: (err as Error).message }, 'replica check: master did not answer INFO replication');
      return new Map();
    }
  }

  private async isHealthy(replica: string, link: ReplicaLink | undefined): Promise<boolean> {
    if (!linkIsUsable(link, this.options.maxLagSeconds)) return false;
    try {
      const pong = decodeReply(await request(this.pool.connection(replica, 0), ['PING'], this.options.queryTimeoutMs));
      return pong === 'PONG';
    } catch {
      return false;
    }
  }
}
