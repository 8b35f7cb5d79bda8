// Jest helper for the replication carry: in double-write a write is answered after side A and
// reaches side B through its node's replication stream, so "on B" is checked once every replica
// of the A nodes (the proxy's follower among them) acknowledged A's offset at that moment. A
// follower acknowledges only what B has applied, so WAIT on A returns once B holds the write.
import Redis from 'ioredis';

function connectedReplicas(info: string): number {
  return Number(/^connected_slaves:(\d+)/m.exec(info)?.[1] ?? 0);
}

/** Resolves once every replica of each node (`host:port`) has what the node holds now; throws after `ms`. */
export async function carriedToB(nodes: readonly string[], ms = 30_000): Promise<void> {
  await Promise.all(
    nodes.map(async (addr) => {
      const [host, port] = addr.split(':');
      const c = new Redis({ host, port: Number(port), maxRetriesPerRequest: 0, disableClientInfo: true, lazyConnect: true });
      try {
        await c.connect();
        const replicas = connectedReplicas(String(await c.info('replication')));
        if (replicas === 0) throw new Error(`${addr} has no replica: nothing follows it`);
        const acked = Number(await c.call('WAIT', String(replicas), String(ms)));
        if (acked < replicas) throw new Error(`${addr}: ${acked} of ${replicas} replicas acknowledged its offset within ${ms} ms`);
      } finally {
        c.disconnect();
      }
    }),
  );
}

/** The carry a proxy chose for its migration (INFO's migration_carry), null outside one. */
export async function carryOf(proxy: Redis): Promise<'replication' | 'feeds' | null> {
  const m = /^migration_carry:(\w+)/m.exec(String(await proxy.info('proxy')));
  return m === null ? null : (m[1] as 'replication' | 'feeds');
}
