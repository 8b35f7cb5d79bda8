// Starting RedisNodes on automatically picked ports (retrying a lost port race) and
// destroying a group of them together; shared by RedisCluster and StandaloneNodes.

import { RedisNode, RedisNodeOptions, RedisStartError } from './redis-node';

/** Attempts when ports are picked automatically and another process wins the race for one. */
const PORT_RACE_ATTEMPTS = 3;

/** Starts a node on automatically picked ports, retrying if another process grabs a port first. */
export async function startOnFreePort(
  pickPort: () => Promise<number>,
  opts: (port: number) => RedisNodeOptions,
): Promise<RedisNode> {
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort();
    try {
      return await RedisNode.start(opts(port));
    } catch (err) {
      if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= PORT_RACE_ATTEMPTS) throw err;
    }
  }
}

/** Stops nodes in parallel, reporting the first failure only after all have been tried. */
export async function destroyAll(nodes: readonly RedisNode[]): Promise<void> {
  const results = await Promise.allSettled(nodes.map((n) => n.destroy()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}
