// Jest helpers: a slotproxy in this process, in front of a test cluster, on a free port.

import Redis, { RedisOptions } from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { RedisCluster, RedisClusterOptions } from '../../cmd/sandbox/redis-cluster';

/** Starts a cluster-mode proxy on 127.0.0.1:0 (a free port) with the given config fields merged in. */
export async function startProxy(seeds: string[], extra: Record<string, unknown> = {}): Promise<ProxyServer> {
  const { cluster, ...rest } = extra as { cluster?: Record<string, unknown> };
  return ProxyServer.start(
    parseConfig({ listen: '127.0.0.1:0', mode: 'cluster', cluster: { seeds, ...cluster }, log: { level: 'silent' }, ...rest }),
  );
}

/** An ioredis client of the proxy as a plain standalone server (`options` override); closed by the caller. */
export function client(proxy: ProxyServer, options: RedisOptions = {}): Redis {
  return new Redis({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0, lazyConnect: false, enableOfflineQueue: true, ...options });
}

/**
 * A cluster and a proxy in front of it for the enclosing describe block, both always stopped, and
 * every ioredis client made with `connect()` closed. Returns getters.
 */
export function useProxy(
  extra: Record<string, unknown> = {},
  clusterOptions: RedisClusterOptions = {},
): {
  cluster: () => RedisCluster;
  proxy: () => ProxyServer;
  connect: (options?: RedisOptions) => Redis;
} {
  let cluster: RedisCluster | undefined;
  let proxy: ProxyServer | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1, ...clusterOptions });
    proxy = await startProxy(cluster.seeds, extra);
  }, 90_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close(500);
    await cluster?.stop();
  }, 30_000);
  return {
    cluster: () => {
      if (cluster === undefined) throw new Error('useProxy: the cluster did not start');
      return cluster;
    },
    proxy: () => {
      if (proxy === undefined) throw new Error('useProxy: the proxy did not start');
      return proxy;
    },
    connect: (options?: RedisOptions) => {
      if (proxy === undefined) throw new Error('useProxy: the proxy did not start');
      const c = client(proxy, options);
      clients.push(c);
      return c;
    },
  };
}
