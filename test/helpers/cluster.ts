// Jest helper: one real Redis Cluster per describe block (or file).

import { RedisCluster, RedisClusterOptions } from '../../cmd/sandbox/redis-cluster';

/**
 * Starts a cluster in beforeAll and stops it in afterAll of the enclosing
 * describe block; returns a getter to use inside tests.
 */
export function useCluster(opts: RedisClusterOptions = {}): () => RedisCluster {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await RedisCluster.start(opts);
  }, 60_000);
  afterAll(async () => {
    await cluster?.stop();
    cluster = undefined;
  }, 30_000);
  return () => {
    if (cluster === undefined) {
      throw new Error('useCluster: no cluster (beforeAll failed, or the getter was called outside a test)');
    }
    return cluster;
  };
}

/**
 * A manual failover of the master serving `slot` (CLUSTER FAILOVER on its replica): the replica
 * takes over with no write lost. Resolves once the cluster is OK again and its roles re-read.
 */
export async function manualFailover(cluster: RedisCluster, slot: number): Promise<void> {
  const master = await cluster.masterFor(slot);
  const [replica] = await cluster.replicasOf(master);
  await replica.command('CLUSTER', 'FAILOVER');
  await cluster.waitForClusterOk();
  await cluster.refreshRoles();
}
