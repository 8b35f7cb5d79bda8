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

/** Getters of what a use*Proxy helper started, and ioredis clients of the proxy it closes itself. */
interface ProxyEnv<B> {
  backend: () => B;
  proxy: () => ProxyServer;
  connect: (options?: RedisOptions) => Redis;
}

/**
 * Starts a back end and a proxy in front of it in beforeAll of the enclosing describe block; in
 * afterAll closes every client made with `connect()` and stops both, always.
 */
function useBackendAndProxy<B extends { stop(): Promise<void> }>(
  helper: string,
  startBackend: () => Promise<B>,
  startProxyFor: (backend: B) => Promise<ProxyServer>,
  startTimeoutMs: number,
): ProxyEnv<B> {
  let backend: B | undefined;
  let proxy: ProxyServer | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    backend = await startBackend();
    proxy = await startProxyFor(backend);
  }, startTimeoutMs);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close(500);
    await backend?.stop();
  }, 30_000);
  const started = <T>(what: T | undefined, name: string): T => {
    if (what === undefined) throw new Error(`${helper}: the ${name} did not start`);
    return what;
  };
  return {
    backend: () => started(backend, 'back end'),
    proxy: () => started(proxy, 'proxy'),
    connect: (options?: RedisOptions) => {
      const c = client(started(proxy, 'proxy'), options);
      clients.push(c);
      return c;
    },
  };
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
  const env = useBackendAndProxy(
    'useProxy',
    () => RedisCluster.start({ masters: 3, replicasPerMaster: 1, ...clusterOptions }),
    (cluster) => startProxy(cluster.seeds, extra),
    90_000,
  );
  return { cluster: env.backend, proxy: env.proxy, connect: env.connect };
}

/**
 * `n` standalone redis-servers and a ring-mode proxy over them (md5, nodes `n0`, `n1` ...) for the
 * enclosing describe block, both always stopped, and every client made with `connect()` closed.
 */
export function useRingProxy(n: number, extra: Record<string, unknown> = {}): ProxyEnv<StandaloneNodes> {
  return useBackendAndProxy(
    'useRingProxy',
    () => StandaloneNodes.start(n),
    (nodes) => {
      const ring = { hash: 'md5', nodes: nodes.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) };
      return ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring, log: { level: 'silent' }, ...extra }));
    },
    60_000,
  );
}
