/**
 * nutcracker's stats port: every TCP connection is answered with the stats JSON and closed, as
 * nutcracker 0.5.0 does (nc_stats.c), with its field names, order and layout:
 *
 *   {"service":"nutcracker", "source":HOST, "version":V, "uptime":S, "timestamp":S,
 *    "total_connections":N, "curr_connections":N, POOL: {pool counters, SERVER: {server counters}, ...}, ...}
 *
 * As nutcracker aggregates its counters every `intervalMs` (-i, default 30000 ms) and serves the
 * last aggregate, the JSON is built every `intervalMs` (and once at start) and that text is served:
 * counts are up to one interval old. Building it reads plain counters (ProxyStats, NodeCounters)
 * and the connections' queue lengths; nothing runs per command. Under --workers the primary serves
 * the port and builds it from every worker's counts, summed (sumPoolSources).
 *
 * Connections: nutcracker counts every connection it made (listeners, clients, servers);
 * `total_connections` is each pool's listener + clients accepted + back-end connections opened,
 * `curr_connections` each pool's listener + clients connected + open shared back-end connections.
 */
import net from 'node:net';
import os from 'node:os';
import { parseHostPort } from '../../config/schema';

/** One server's counts (backend/pool.ts's NodeStats, whose counters are backend/node-counters.ts's). */
export interface NutcrackerServerSource {
  counters: {
    readonly eof: number;
    readonly err: number;
    readonly timedOut: number;
    readonly ejects: number;
    readonly ejectedAtUs: number;
    readonly requests: number;
    readonly requestBytes: number;
    readonly responses: number;
    readonly responseBytes: number;
  };
  connections: number;
  inQueue: number;
  inQueueBytes: number;
  outQueue: number;
  outQueueBytes: number;
}

/** What one pool reads out when the JSON is built (ProxyServer.nutcrackerPool()). */
export interface NutcrackerPoolSource {
  clientEof: number;
  clientErr: number;
  clientConnections: number;
  /** Client connections accepted since start. */
  totalClients: number;
  forwardErrors: number;
  backendConnectsStarted: number;
  /** In nutcracker's server order, each keyed as nutcracker keys it (its name, else host:port); in cluster mode the masters, keyed host:port. */
  servers: (NutcrackerServerSource & { key: string })[];
}

export interface NutcrackerStatsPool {
  name: string;
  read(): NutcrackerPoolSource;
}

/** One pool's counts, read (plain data: it crosses from a worker to the primary of --workers). */
export interface NamedPoolSource {
  name: string;
  source: NutcrackerPoolSource;
}

/** Where the counts come from: this process's pools, read in place, or (the primary of --workers) every worker's, gathered. */
export type NutcrackerStatsSources = readonly NutcrackerStatsPool[] | (() => Promise<NamedPoolSource[]>);

/**
 * Several processes' counts of the same pools (the workers of --workers) as one: every count
 * summed, pools by name and servers by key in first-seen order; server_ejected_at the latest.
 */
export function sumPoolSources(perProcess: readonly (readonly NamedPoolSource[])[]): NamedPoolSource[] {
  const pools = new Map<string, NutcrackerPoolSource>();
  for (const list of perProcess) {
    for (const { name, source } of list) {
      const into = pools.get(name);
      if (into === undefined) {
        pools.set(name, { ...source, servers: source.servers.map((s) => ({ ...s, counters: { ...s.counters } })) });
        continue;
      }
      into.clientEof += source.clientEof;
      into.clientErr += source.clientErr;
      into.clientConnections += source.clientConnections;
      into.totalClients += source.totalClients;
      into.forwardErrors += source.forwardErrors;
      into.backendConnectsStarted += source.backendConnectsStarted;
      for (const s of source.servers) {
        const t = into.servers.find((x) => x.key === s.key);
        if (t === undefined) {
          into.servers.push({ ...s, counters: { ...s.counters } });
          continue;
        }
        const c = t.counters as { -readonly [K in keyof NutcrackerServerSource['counters']]: number };
        for (const k of Object.keys(c) as (keyof typeof c)[]) c[k] = k === 'ejectedAtUs' ? Math.max(c[k], s.counters[k]) : c[k] + s.counters[k];
        t.connections += s.connections;
        t.inQueue += s.inQueue;
        t.inQueueBytes += s.inQueueBytes;
        t.outQueue += s.outQueue;
        t.outQueueBytes += s.outQueueBytes;
      }
    }
  }
  return [...pools].map(([name, source]) => ({ name, source }));
}

export interface NutcrackerStatsOptions {
  listen: string;
  intervalMs: number;
  /** Reported as `version`. */
  version: string;
}

/** The server fields of one node, in nutcracker's order. */
function serverJson(s: NutcrackerServerSource & { key: string }): string {
  const c = s.counters;
  const fields: [string, number][] = [
    ['server_eof', c.eof],
    ['server_err', c.err],
    ['server_timedout', c.timedOut],
    ['server_connections', s.connections],
    ['server_ejected_at', c.ejectedAtUs],
    ['requests', c.requests],
    ['request_bytes', c.requestBytes],
    ['responses', c.responses],
    ['response_bytes', c.responseBytes],
    ['in_queue', s.inQueue],
    ['in_queue_bytes', s.inQueueBytes],
    ['out_queue', s.outQueue],
    ['out_queue_bytes', s.outQueueBytes],
  ];
  return `${JSON.stringify(s.key)}: {${fields.map(([k, v]) => `"${k}":${v}`).join(', ')}}`;
}

/** One pool's object: its counters then its servers. */
function poolJson(p: NutcrackerPoolSource): string {
  const ejects = p.servers.reduce((n, s) => n + s.counters.ejects, 0);
  const fields: [string, number][] = [
    ['client_eof', p.clientEof],
    ['client_err', p.clientErr],
    ['client_connections', p.clientConnections],
    ['server_ejects', ejects],
    ['forward_error', p.forwardErrors],
    // nutcracker 0.5.0 declares it but never counts it: a split MGET leaves it at 0 there too.
    ['fragments', 0],
  ];
  return `{${fields.map(([k, v]) => `"${k}":${v}`).join(', ')}, ${p.servers.map(serverJson).join(',')}}`;
}

/** The whole JSON, as nutcracker writes it, for the pools' counts `read` at `now` (ms since the epoch). */
export function nutcrackerStatsJson(read: readonly NamedPoolSource[], version: string, startedAt: number, now: number): string {
  let total = 0;
  let current = 0;
  for (const { source } of read) {
    const open = source.servers.reduce((n, s) => n + s.connections, 0);
    total += 1 + source.totalClients + source.backendConnectsStarted;
    current += 1 + source.clientConnections + open;
  }
  const head: [string, string | number][] = [
    ['service', 'nutcracker'],
    ['source', os.hostname()],
    ['version', version],
    ['uptime', Math.floor((now - startedAt) / 1000)],
    ['timestamp', Math.floor(now / 1000)],
    ['total_connections', total],
    ['curr_connections', current],
  ];
  const parts = [...head.map(([k, v]) => `"${k}":${JSON.stringify(v)}`), ...read.map(({ name, source }) => `${JSON.stringify(name)}: ${poolJson(source)}`)];
  return `{${parts.join(', ')}}`;
}

export class NutcrackerStatsServer {
  private text = '';
  private readonly timer: NodeJS.Timeout;
  private readonly startedAt = Date.now();
  private building = false;

  private constructor(private readonly server: net.Server, private readonly sources: NutcrackerStatsSources, private readonly options: NutcrackerStatsOptions) {
    this.timer = setInterval(() => void this.rebuild(), options.intervalMs);
    this.timer.unref();
    server.on('connection', (socket) => {
      socket.on('error', () => undefined);
      socket.end(this.text);
    });
  }

  /** Builds the JSON once, then listens on `options.listen`; resolves once it does (rejects when the address cannot be bound). */
  static async start(options: NutcrackerStatsOptions, sources: NutcrackerStatsSources): Promise<NutcrackerStatsServer> {
    const { host, port } = parseHostPort(options.listen);
    const server = net.createServer();
    const stats = new NutcrackerStatsServer(server, sources, options);
    await stats.rebuild();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      clearInterval(stats.timer);
      throw err;
    }
    return stats;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** The JSON built anew; the last one is kept while a gathering fails or is still running. */
  private async rebuild(): Promise<void> {
    if (this.building) return;
    this.building = true;
    try {
      const read = typeof this.sources === 'function' ? await this.sources() : this.sources.map((p) => ({ name: p.name, source: p.read() }));
      this.text = nutcrackerStatsJson(read, this.options.version, this.startedAt, Date.now());
    } catch {
      // Kept: the previous JSON.
    } finally {
      this.building = false;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
