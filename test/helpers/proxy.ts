// Jest helpers: a slotproxy in this process, in front of a test cluster, on a free port.

import Redis, { RedisOptions } from 'ioredis';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { RedisCluster, RedisClusterOptions } from '../../cmd/sandbox/redis-cluster';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';

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

/**
 * `n` standalone redis-servers and a ring-mode proxy over them (md5, nodes `n0`, `n1` ...) for the
 * enclosing describe block, both always stopped, and every client made with `connect()` closed.
 */
export function useRingProxy(
  n: number,
  extra: Record<string, unknown> = {},
): {
  nodes: () => StandaloneNodes;
  proxy: () => ProxyServer;
  connect: (options?: RedisOptions) => Redis;
} {
  let nodes: StandaloneNodes | undefined;
  let proxy: ProxyServer | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    nodes = await StandaloneNodes.start(n);
    const ring = { hash: 'md5', nodes: nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) };
    proxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring, log: { level: 'silent' }, ...extra }));
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close(200);
    await nodes?.stop();
  }, 30_000);
  const started = <T>(what: T | undefined): T => {
    if (what === undefined) throw new Error('useRingProxy: the nodes or the proxy did not start');
    return what;
  };
  return {
    nodes: () => started(nodes),
    proxy: () => started(proxy),
    connect: (options?: RedisOptions) => {
      const c = client(started(proxy), options);
      clients.push(c);
      return c;
    },
  };
}
