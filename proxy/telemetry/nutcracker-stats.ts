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
 * and the connections' queue lengths; nothing runs per command.
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
  /** In nutcracker's server order, each keyed as nutcracker keys it (its name, else host:port). */
  servers: (NutcrackerServerSource & { key: string })[];
}

export interface NutcrackerStatsPool {
  name: string;
  read(): NutcrackerPoolSource;
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

/** The whole JSON, as nutcracker writes it, for `pools` at `now` (ms since the epoch). */
export function nutcrackerStatsJson(pools: readonly NutcrackerStatsPool[], version: string, startedAt: number, now: number): string {
  const read = pools.map((p) => ({ name: p.name, source: p.read() }));
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
  private text: string;
  private readonly timer: NodeJS.Timeout;
  private readonly startedAt = Date.now();

  private constructor(private readonly server: net.Server, private readonly pools: readonly NutcrackerStatsPool[], private readonly options: NutcrackerStatsOptions) {
    this.text = this.build();
    this.timer = setInterval(() => {
      this.text = this.build();
    }, options.intervalMs);
    this.timer.unref();
    server.on('connection', (socket) => {
      socket.on('error', () => undefined);
      socket.end(this.text);
    });
  }

  /** Listens on `options.listen`; resolves once it does (rejects when the address cannot be bound). */
  static async start(options: NutcrackerStatsOptions, pools: readonly NutcrackerStatsPool[]): Promise<NutcrackerStatsServer> {
    const { host, port } = parseHostPort(options.listen);
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return new NutcrackerStatsServer(server, pools, options);
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  private build(): string {
    return nutcrackerStatsJson(this.pools, this.options.version, this.startedAt, Date.now());
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
