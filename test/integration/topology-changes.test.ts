// Resharding and a manual failover under a steady write load, through the proxy: no error reaches
// a client and every acknowledged INCR is counted exactly once.

import Redis from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { useProxy } from '../helpers/proxy';
import { RedisNode } from '../../cmd/sandbox/redis-node';

const { cluster, proxy, connect } = useProxy();

const RESHARD_SLOTS = 1000;

/** Keys covering the first RESHARD_SLOTS slots (the ones a reshard from the first master moves) and the rest. */
function makeKeys(prefix: string): string[] {
  const moving: string[] = [];
  const staying: string[] = [];
  for (let i = 0; moving.length < 120 || staying.length < 120; i++) {
    const key = `${prefix}:${i}`;
    const slot = calculateSlot(key);
    if (slot < RESHARD_SLOTS && moving.length < 120) moving.push(key);
    else if (slot >= RESHARD_SLOTS && staying.length < 120) staying.push(key);
  }
  return [...moving, ...staying];
}

/**
 * INCRs from `workers` clients over `keys` until stop() is called; counts acknowledgements per key
 * and records every error a client saw.
 */
function startLoad(clients: Redis[], keys: string[]) {
  const acked = new Map<string, number>(keys.map((k) => [k, 0]));
  const errors: string[] = [];
  let total = 0;
  let running = true;
  let waiters: { target: number; resolve: () => void }[] = [];
  const workers = clients.map(async (c, w) => {
    for (let i = w; running; i++) {
      const key = keys[i % keys.length];
      try {
        await c.incr(key);
        acked.set(key, (acked.get(key) ?? 0) + 1);
        total++;
        waiters = waiters.filter((x) => (x.target <= total ? (x.resolve(), false) : true));
      } catch (err) {
        errors.push(`${key}: ${(err as Error).message}`);
      }
    }
  });
  return {
    acked,
    errors,
    /** Resolves once `n` more INCRs have been acknowledged. */
    progress: (n: number) => new Promise<void>((resolve) => waiters.push({ target: total + n, resolve })),
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

async function nodeId(node: RedisNode): Promise<string> {
  return node.cli('CLUSTER', 'MYID');
}

async function expectCountsExact(acked: Map<string, number>): Promise<void> {
  const reader = connect();
  const keys = [...acked.keys()];
  const values = await Promise.all(keys.map((k) => reader.get(k)));
  const wrong = keys.filter((k, i) => Number(values[i] ?? 0) !== acked.get(k));
  expect(wrong).toEqual([]);
}

test('a reshard of 1,000 slots under load: no client error, every acknowledged INCR counted', async () => {
  const keys = makeKeys('reshard');
  const clients = Array.from({ length: 8 }, () => connect());
  const from = await cluster().masterFor(0);
  const to = await cluster().masterFor(16383);
  const load = startLoad(clients, keys);
  await load.progress(2000);
  const movedBefore = proxy().stats.moved + proxy().stats.ask;
  await from.cli(
    '--cluster', 'reshard', from.address,
    '--cluster-from', await nodeId(from),
    '--cluster-to', await nodeId(to),
    '--cluster-slots', String(RESHARD_SLOTS),
    '--cluster-yes',
  );
  await load.progress(2000);
  await load.stop();
  expect(load.errors).toEqual([]);
  // The slots really moved, and the proxy really was redirected while they did.
  expect((await cluster().masterFor(0)).port).toBe(to.port);
  expect((await cluster().masterFor(RESHARD_SLOTS - 1)).port).toBe(to.port);
  expect(proxy().stats.moved + proxy().stats.ask).toBeGreaterThan(movedBefore);
  await expectCountsExact(load.acked);
}, 120_000);

test('a manual failover (CLUSTER FAILOVER on a replica) under load: no client error, nothing lost', async () => {
  const keys = makeKeys('failover');
  const clients = Array.from({ length: 8 }, () => connect());
  const oldMaster = await cluster().masterFor(calculateSlot(keys[keys.length - 1]));
  const [replica] = await cluster().replicasOf(oldMaster);
  const load = startLoad(clients, keys);
  await load.progress(2000);
  expect(await replica.cli('CLUSTER', 'FAILOVER')).toBe('OK');
  await cluster().waitForClusterOk();
  expect((await replica.info('replication')).get('role')).toBe('master');
  await load.progress(3000);
  await load.stop();
  expect(load.errors).toEqual([]);
  expect((await cluster().masterFor(calculateSlot(keys[keys.length - 1]))).port).toBe(replica.port);
  await expectCountsExact(load.acked);
}, 120_000);
