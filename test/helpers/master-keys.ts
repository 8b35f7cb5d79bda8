// Jest helper: keys that live on each master of a test cluster, so a test can touch every master.

import calculateSlot from 'cluster-key-slot';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';

/** One key per master (in master order of CLUSTER SLOTS), named `${prefix}:<n>`, with the node that owns it. */
export async function keyPerMaster(cluster: RedisCluster, prefix: string): Promise<{ key: string; node: RedisNode }[]> {
  const ranges = await cluster.slots();
  const out: { key: string; node: RedisNode }[] = [];
  const seen = new Set<number>();
  for (const r of ranges) {
    if (seen.has(r.master.port)) continue;
    seen.add(r.master.port);
    for (let i = 0; ; i++) {
      const key = `${prefix}:${i}`;
      const slot = calculateSlot(key);
      if (slot >= r.start && slot <= r.end) {
        const node = cluster.nodeByPort(r.master.port);
        if (node === undefined) throw new Error(`no node on port ${r.master.port}`);
        out.push({ key, node });
        break;
      }
    }
  }
  return out;
}

/** Polls `check` until it returns true or `timeoutMs` passes; throws with `what` on timeout. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
