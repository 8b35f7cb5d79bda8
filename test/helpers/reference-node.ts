// "One Redis" for differential tests: a single-node Redis Cluster owning every slot, started before
// the file's tests and stopped after them, with its clients.
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';

export interface ReferenceNode {
  /** The node itself (its port, its commands). */
  node(): RedisNode;
  /** A new client of the node, closed after the file's tests. */
  connect(): Redis;
}

/** Registers the node's start (beforeAll) and stop (afterAll) in the calling test file. */
export function useReferenceNode(opts: { extraArgs?: string[] } = {}): ReferenceNode {
  let ref: RedisCluster | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    ref = await RedisCluster.start({ masters: 1, replicasPerMaster: 0, extraArgs: opts.extraArgs });
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await ref?.stop();
  }, 30_000);
  const node = (): RedisNode => {
    if (ref === undefined) throw new Error('the reference node did not start');
    return ref.nodes[0];
  };
  return {
    node,
    connect: () => {
      const c = new Redis({ port: node().port, maxRetriesPerRequest: 0 });
      clients.push(c);
      return c;
    },
  };
}
