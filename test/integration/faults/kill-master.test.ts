// SPEC section 3 and issue 7: `kill -9` of a master under a steady write load. The proxy follows the
// replica's promotion without a restart; errors reach clients only around the kill (commands that
// were on the wire to the dead node: they may or may not have run), then stop by themselves.
// The measured windows are printed for the report.

import { keySlot } from '../../../sharding/slot';
import { useProxy } from '../../helpers/proxy';

const NODE_TIMEOUT_MS = 1000;
const WRITERS = 8;
const env = useProxy({}, { masters: 3, replicasPerMaster: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });

interface Outcome {
  at: number;
  ms: number;
  error: string | null;
}

test('kill -9 of a master: the proxy follows the promotion; errors only at the kill, then none', async () => {
  const cluster = env.cluster();
  // One key per writer, spread over all masters; writer 0's key decides which master dies.
  const keys = Array.from({ length: WRITERS }, (_, i) => `fault:{w${i}}`);
  const victimSlot = keySlot(Buffer.from(keys[0]));
  const victim = await cluster.masterFor(victimSlot);
  const [heir] = await cluster.replicasOf(victim);
  expect(heir).toBeDefined();
  const onVictim = await Promise.all(keys.map(async (k) => (await cluster.masterFor(keySlot(Buffer.from(k)))) === victim));

  const outcomes: Outcome[][] = keys.map(() => []);
  const acked = keys.map(() => 0);
  let stop = false;
  const writers = keys.map(async (key, i) => {
    const c = env.connect({ retryStrategy: () => null });
    await c.del(key);
    while (!stop) {
      const at = Date.now();
      try {
        await c.incr(key);
        acked[i]++;
        outcomes[i].push({ at, ms: Date.now() - at, error: null });
      } catch (err) {
        outcomes[i].push({ at, ms: Date.now() - at, error: (err as Error).message });
      }
    }
  });

  const waitFor = async (check: () => Promise<boolean>, ms: number, what: string): Promise<void> => {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  // Steady load first.
  await waitFor(async () => outcomes.every((o) => o.length >= 50), 10_000, 'every writer running');
  const killedAt = Date.now();
  victim.kill('SIGKILL');
  await victim.waitForExit();
  // The promotion, as the cluster itself sees it.
  await waitFor(async () => (await cluster.masterFor(victimSlot)) === heir, 20_000, 'replica promoted');
  const promotedAt = Date.now();
  // Then the load keeps going: every writer, including the dead master's, must succeed again.
  await waitFor(async () => outcomes.every((o) => o.filter((x) => x.at > promotedAt + 1000 && x.error === null).length >= 20), 15_000, 'all writers succeeding after the promotion');
  stop = true;
  await Promise.all(writers);

  const all = outcomes.flat();
  const errors = all.filter((o) => o.error !== null);
  const lastError = errors.length === 0 ? killedAt : Math.max(...errors.map((o) => o.at + o.ms));
  const stall = Math.max(...all.filter((o) => o.at >= killedAt).map((o) => o.ms));
  const othersStall = Math.max(0, ...outcomes.filter((_, i) => !onVictim[i]).flat().filter((o) => o.at >= killedAt).map((o) => o.ms));
  // Reported numbers (the issue asks for the measured window).
  process.stdout.write(
    `kill -9 under load: cluster promotion after ${promotedAt - killedAt} ms (node timeout ${NODE_TIMEOUT_MS} ms); ` +
      `${errors.length} client errors of ${all.length} commands, the last ${lastError - killedAt} ms after the kill; ` +
      `longest command ${stall} ms; others ${othersStall} ms\n`,
  );
  // Errors are only the commands that were on the wire to the dead master: at most one per writer.
  expect(errors.length).toBeLessThanOrEqual(WRITERS);
  for (const e of errors) expect(e.error).toMatch(/may or may not have run|unreachable|CLUSTERDOWN/);
  // And they all happened while the cluster itself was failing over.
  expect(lastError).toBeLessThanOrEqual(promotedAt + 1000);
  // Nothing failed after the promotion.
  expect(all.filter((o) => o.at > promotedAt + 1000 && o.error !== null)).toEqual([]);
  // The proxy follows the new master: every slot is served, the dead node is gone from its map.
  const c = env.connect();
  const info = String(await c.call('INFO', 'proxy'));
  expect(info).toMatch(/cluster_slots_served:16384/);
  expect(info).toMatch(/cluster_masters:3/);
  // Every acknowledged INCR is in Redis, unless the kill lost writes not yet replicated (Redis's asynchronous replication).
  const finals = await Promise.all(keys.map((k) => c.get(k)));
  const lost = keys.map((_, i) => Math.max(0, acked[i] - Number(finals[i])));
  process.stdout.write(`acknowledged INCRs lost to the kill (not yet replicated): ${lost.reduce((a, b) => a + b, 0)}\n`);
  // Writers on the other masters lose nothing.
  for (let i = 0; i < keys.length; i++) if (!onVictim[i]) expect(Number(finals[i])).toBe(acked[i]);
}, 60_000);
