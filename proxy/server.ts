/**
 * The proxy process's front door: loads what routing needs (topology, command table), then accepts
 * clients (up to maxClients), each served by a Session over shared back-end connections.
 *
 *   m client sessions --(Dispatcher, Router)--> n shared back-end connections (lanes per node)
 *
 * Shutdown (SIGTERM via cmd/): stop accepting, let sessions finish their in-flight replies, close.
 */
import net from 'node:net';
import { Config, parseHostPort } from '../config/schema';
import { BackendPool } from './backend/pool';
import { request } from './backend/request';
import { ClusterTopology } from './cluster/topology';
import { ClusterRouter } from './cluster/router';
import { CommandTable } from './commands/table';
import { ProxyContext } from './context';
import { Dispatcher } from './dispatch';
import { Session } from './session';
import { ProxyStats } from './stats';
import { decodeReply, errorText } from './resp/decode-reply';
import * as encode from './resp/encode';
import { log, setLogLevel } from './log';

import { VERSION } from './version';
const MAX_CLIENTS_REACHED = encode.error('ERR max number of clients reached');

export class ProxyServer {
  private readonly sessions = new Set<Session>();
  private readonly listener: net.Server;
  private readonly dispatcher: Dispatcher;

  private constructor(readonly config: Config, private readonly ctx: ProxyContext) {
    this.dispatcher = new Dispatcher(ctx, () => this.infoSection());
    this.listener = net.createServer({ noDelay: true }, (socket) => this.accept(socket));
  }

  /** Starts a proxy: resolves once it is listening and has loaded its topology and command table. */
  static async start(config: Config): Promise<ProxyServer> {
    if (config.mode !== 'cluster') throw new Error('ring mode is not implemented yet');
    setLogLevel(config.log.level);
    const pool = new BackendPool({
      connectionsPerNode: config.backend.connectionsPerNode,
      connectTimeoutMs: config.backend.connectTimeoutMs,
      commandTimeoutMs: config.backend.commandTimeoutMs,
      handshake: backendHandshake(config),
    });
    const topology = new ClusterTopology(pool, {
      seeds: config.cluster.seeds,
      refreshIntervalMs: config.cluster.refreshIntervalMs,
      queryTimeoutMs: config.backend.commandTimeoutMs,
    });
    pool.onConnectionLost(() => topology.requestRefresh());
    topology.onChange((map) => pool.retain(new Set([...map.addresses(), ...config.cluster.seeds])));
    const ctx: ProxyContext = {
      mode: 'cluster',
      pool,
      router: new ClusterRouter(topology),
      topology,
      table: CommandTable.fallback(),
      stats: new ProxyStats(),
      forward: { maxRedirects: config.cluster.maxRedirects, retryWindowMs: config.cluster.retryWindowMs },
      backendVersion: '7.0.0',
    };
    await topology.start();
    await loadBackendFacts(ctx);
    const server = new ProxyServer(config, ctx);
    await server.listen();
    return server;
  }

  /** The address clients connect to (the real port when the config asked for port 0). */
  get address(): { host: string; port: number } {
    const a = this.listener.address() as net.AddressInfo;
    return { host: a.address, port: a.port };
  }

  get stats(): ProxyStats {
    return this.ctx.stats;
  }

  /** Stops accepting, waits (up to `graceMs`) for in-flight replies, then closes everything. */
  async close(graceMs = 5000): Promise<void> {
    const closed = new Promise<void>((resolve) => this.listener.close(() => resolve()));
    const deadline = Date.now() + graceMs;
    for (const s of this.sessions) s.drainThenClose();
    while (this.sessions.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    for (const s of this.sessions) s.destroy();
    this.ctx.topology?.stop();
    this.ctx.pool.closeAll();
    await closed;
  }

  private listen(): Promise<void> {
    const { host, port } = parseHostPort(this.config.listen);
    return new Promise((resolve, reject) => {
      this.listener.once('error', reject);
      this.listener.listen(port, host, () => {
        this.listener.off('error', reject);
        log.info({ listen: this.address, mode: this.config.mode }, 'slotproxy is listening');
        resolve();
      });
    });
  }

  private accept(socket: net.Socket): void {
    const stats = this.ctx.stats;
    if (this.sessions.size >= this.config.limits.maxClients) {
      stats.rejectedConnections++;
      socket.on('error', () => undefined);
      socket.end(MAX_CLIENTS_REACHED);
      return;
    }
    stats.totalConnections++;
    stats.connectedClients++;
    const session = new Session(socket, this.dispatcher, stats, this.config.limits, (s) => {
      stats.connectedClients--;
      this.sessions.delete(s);
    });
    this.sessions.add(session);
  }

  private infoSection(): string {
    const s = this.ctx.stats;
    const map = this.ctx.topology?.current;
    const lines = [
      '# Proxy',
      `proxy_name:slotproxy`,
      `proxy_version:${VERSION}`,
      `proxy_mode:${this.ctx.mode}`,
      `process_id:${process.pid}`,
      `uptime_in_seconds:${Math.floor((Date.now() - s.startedAt) / 1000)}`,
      `connected_clients:${s.connectedClients}`,
      `total_connections_received:${s.totalConnections}`,
      `rejected_connections:${s.rejectedConnections}`,
      `total_commands_processed:${s.commands}`,
      `protocol_errors:${s.protocolErrors}`,
      `crossslot_errors:${s.crossSlotErrors}`,
      `redirections_moved:${s.moved}`,
      `redirections_ask:${s.ask}`,
      `retries:${s.retries}`,
      `backend_errors:${s.backendErrors}`,
      `backend_connections:${this.ctx.pool.openConnections}`,
      `command_table:${this.ctx.table.source}`,
      ...memoryLines(),
    ];
    if (map !== undefined) {
      lines.push(`cluster_masters:${map.masters.length}`, `cluster_slots_served:${map.servedSlots}`);
    }
    return lines.join('\r\n');
  }
}

function memoryLines(): string[] {
  const m = process.memoryUsage();
  return [`used_memory_rss:${m.rss}`, `used_memory_heap:${m.heapUsed}`, `used_memory_buffers:${m.arrayBuffers}`];
}

function backendHandshake(config: Config): Buffer[] {
  const { username, password } = config.backend;
  if (password === undefined) return [];
  return [encode.command(username === undefined ? ['AUTH', password] : ['AUTH', username, password])];
}

/** The command table and version of the back end; the recorded table stays if no master answers. */
async function loadBackendFacts(ctx: ProxyContext): Promise<void> {
  for (const address of ctx.router.masters()) {
    try {
      const conn = ctx.pool.connection(address, 0);
      const table = await request(conn, ['COMMAND'], 10_000);
      if (errorText(table) !== null) throw new Error(errorText(table) ?? '');
      ctx.table = CommandTable.fromCommandReply(decodeReply(table));
      const info = decodeReply(await request(conn, ['INFO', 'server'], 10_000));
      const m = /redis_version:([^\r\n]+)/.exec(Buffer.isBuffer(info) ? info.toString() : String(info));
      if (m !== null) ctx.backendVersion = m[1];
      log.info({ node: address, commands: ctx.table.size, redisVersion: ctx.backendVersion }, 'command table loaded from the back end');
      return;
    } catch (err) {
      log.warn({ node: address, err: (err as Error).message }, 'cannot load COMMAND from this master');
    }
  }
  log.warn('no master answered COMMAND; using the table recorded from Redis 7.0');
}
