/**
 * INFO's `# Proxy` section (INFO proxy, and the proxy's part of INFO / INFO all): the proxy's own
 * counters, as `name:value` lines. No name is one Redis's INFO uses (`connected_clients`,
 * `total_commands_processed`, `used_memory_rss` ...: those take a `proxy_` prefix here): a client
 * that reads INFO into one map keeps Redis's meaning for every field Redis names.
 */
import { Config } from '../../config/schema';
import { ProxyContext } from '../context';
import { targetRefusalSummary } from '../migration/target-refusals';
import { VERSION } from './version';

export function proxyInfoSection(ctx: ProxyContext, config: Config): string {
  const s = ctx.stats;
  const map = ctx.topology?.current;
  const lines = [
    '# Proxy',
    `proxy_name:slotproxy`,
    `proxy_version:${VERSION}`,
    `proxy_mode:${ctx.mode}`,
    `proxy_process_id:${process.pid}`,
    `proxy_uptime_in_seconds:${Math.floor((Date.now() - s.startedAt) / 1000)}`,
    `proxy_connected_clients:${s.connectedClients}`,
    `proxy_total_connections_received:${s.totalConnections}`,
    `proxy_rejected_connections:${s.rejectedConnections}`,
    `proxy_total_commands_processed:${s.commands}`,
    `protocol_errors:${s.protocolErrors}`,
    `crossslot_errors:${s.crossSlotErrors}`,
    `split_commands:${s.splitCommands}`,
    `migration_target_refused:${targetRefusalSummary(s.targetRefusals)}`,
    `redirections_moved:${s.moved}`,
    `redirections_ask:${s.ask}`,
    `retries:${s.retries}`,
    `backend_errors:${s.backendErrors}`,
    `reply_errors:${s.replyErrors}`,
    `auth_failures:${s.authFailures}`,
    `noauth_errors:${s.noauthErrors}`,
    `acl_denied:${s.aclDenied.command + s.aclDenied.key + s.aclDenied.channel}`,
    `acl_denied_cmd:${s.aclDenied.command}`,
    `acl_denied_key:${s.aclDenied.key}`,
    `acl_denied_channel:${s.aclDenied.channel}`,
    `tls_handshake_errors:${s.tlsHandshakeErrors}`,
    `backend_connections:${ctx.pool.openConnections}`,
    `backend_connects_started:${ctx.pool.connectsStarted}`,
    `command_table:${ctx.table.source}`,
    ...memoryLines(),
    ...ctx.scripts.infoLines(),
    ...(ctx.changes?.infoLines() ?? []),
    `proxy_tracking_clients:${ctx.caching.trackingClients}`,
    `proxy_tracking_total_keys:${ctx.caching.trackedKeys}`,
    `proxy_tracking_evicted_keys:${ctx.caching.evictedKeys}`,
    `proxy_tracking_invalidations_sent:${ctx.caching.invalidationsSent}`,
    `proxy_tracking_flushes_sent:${ctx.caching.flushesSent}`,
  ];
  if (map !== undefined) {
    lines.push(`cluster_masters:${map.masters.length}`, `cluster_slots_served:${map.servedSlots}`);
  }
  const replicas = ctx.replicaReads;
  if (replicas !== null) {
    lines.push(
      `read_from:${config.mode === 'cluster' ? config.cluster.readFrom : (config.ring.sentinel?.readFrom ?? 'master')}`,
      `healthy_replicas:${replicas.healthyCount}`,
      `replica_reads:${replicas.replicaReads}`,
      `replica_master_fallbacks:${replicas.masterFallbacks}`,
    );
  }
  return lines.join('\r\n');
}

function memoryLines(): string[] {
  const m = process.memoryUsage();
  return [`proxy_used_memory_rss:${m.rss}`, `proxy_used_memory_heap:${m.heapUsed}`, `proxy_used_memory_buffers:${m.arrayBuffers}`];
}
