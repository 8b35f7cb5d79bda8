// readFrom: replica against a real 3-master, 3-replica cluster: reads land on replicas (counted
// with INFO commandstats on every node), writes on masters, and a replica that goes down is
// replaced by its master without an error reaching the client.

import { RedisNode } from '../../cmd/sandbox/redis-node';
import { ProxyServer } from '../../proxy/server/server';
import { client, startProxy, useProxy } from '../helpers/proxy';

const KEYS = 300;
const key = (i: number): string => `rr:${i}`;

/** `cmdstat_get` calls on a node since its last CONFIG RESETSTAT. */
async function getCalls(node: RedisNode): Promise<number> {
  const line = (await node.info('commandstats')).get('cmdstat_get') ?? '';
  const m = /calls=(\d+)/.exec(line);
  return m === null ? 0 : Number(m[1]);
}

async function sumGetCalls(nodes: RedisNode[]): Promise<number> {
  let n = 0;
  for (const node of nodes) n += await getCalls(node);
  return n;
}

async function resetStats(nodes: RedisNode[]): Promise<void> {
  for (const node of nodes) await node.command('CONFIG', 'RESETSTAT');
}

/** Polls `check` until it holds or `ms` pass. */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('readFrom: replica', () => {
  const env = useProxy({ cluster: { readFrom: 'replica', replicaCheckIntervalMs: 200 } });

  beforeAll(async () => {
    const c = env.connect();
    for (let i = 0; i < KEYS; i++) await c.set(key(i), `v${i}`);
    // Every replica has every write before the reads below are counted. (Not WAIT on a master:
    // from a connection that made no writes it answers at once; see waitForReplication.)
    await env.cluster().waitForReplication();
  });

  test('read-only commands land on replicas, writes on masters, values exact', async () => {
    const cluster = env.cluster();
    const c = env.connect();
    await resetStats([...cluster.masters, ...cluster.replicas]);
    const values = await Promise.all(Array.from({ length: KEYS }, (_, i) => c.get(key(i))));
    expect(values).toEqual(Array.from({ length: KEYS }, (_, i) => `v${i}`));
    expect(await sumGetCalls(cluster.replicas)).toBe(KEYS);
    expect(await sumGetCalls(cluster.masters)).toBe(0);
    // Every replica served some: the keys spread over all three masters.
    for (const replica of cluster.replicas) expect(await getCalls(replica)).toBeGreaterThan(0);

    expect(await c.set(key(0), 'again')).toBe('OK');
    expect(await c.incr('rr:counter')).toBe(1);
    const info = await c.info('proxy');
    expect(info).toContain('read_from:replica');
    expect(info).toMatch(/healthy_replicas:3/);
  });

  test('a replica that goes down: its master serves the reads, no client error', async () => {
    const cluster = env.cluster();
    const c = env.connect();
    const victim = cluster.replicas[0];
    victim.kill('SIGKILL');
    await victim.waitForExit();
    await resetStats([...cluster.masters, ...cluster.replicas.filter((r) => r !== victim)]);
    // Reads go on while the proxy notices: each one answers, from a replica or a master.
    for (let round = 0; round < 3; round++) {
      const values = await Promise.all(Array.from({ length: KEYS }, (_, i) => c.get(key(i))));
      expect(values.slice(1)).toEqual(Array.from({ length: KEYS - 1 }, (_, i) => `v${i + 1}`));
    }
    expect(await sumGetCalls(cluster.masters)).toBeGreaterThan(0);
    expect(await eventually(async () => /healthy_replicas:2/.test(await c.info('proxy')), 5000)).toBe(true);
    await victim.restart();
    expect(await eventually(async () => /healthy_replicas:3/.test(await c.info('proxy')), 15000)).toBe(true);
  });

  test('readFrom: master (the default) reads only from masters', async () => {
    const cluster = env.cluster();
    let proxy: ProxyServer | undefined;
    const c2 = await (async () => {
      proxy = await startProxy(cluster.seeds);
      return client(proxy);
    })();
    try {
      await resetStats([...cluster.masters, ...cluster.replicas]);
      for (let i = 0; i < 30; i++) await c2.get(key(i));
      expect(await sumGetCalls(cluster.masters)).toBe(30);
      expect(await sumGetCalls(cluster.replicas)).toBe(0);
    } finally {
      c2.disconnect();
      await proxy?.close(500);
    }
  });
});
