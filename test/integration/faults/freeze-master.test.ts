// Issue 7, faults: a master frozen with SIGSTOP for longer than backend.commandTimeoutMs. Clients of
// the other masters are not slowed; the frozen master's clients get a timeout error, not a hang;
// after SIGCONT everything recovers. The cluster's node timeout is long, so the freeze is not
// mistaken for a failure (no failover, no CLUSTERDOWN): only the proxy's own timeout acts.

import Redis from 'ioredis';
import { keySlot } from '../../../sharding/slot';
import { useProxy } from '../../helpers/proxy';

const COMMAND_TIMEOUT_MS = 1000;
const RETRY_WINDOW_MS = 1000;
const FREEZE_MS = 3000;
const env = useProxy(
  { backend: { commandTimeoutMs: COMMAND_TIMEOUT_MS }, cluster: { retryWindowMs: RETRY_WINDOW_MS } },
  { replicasPerMaster: 0, nodeTimeoutMs: 15_000 },
);
// No ready check: its INFO fans out to every master, the frozen one included.
const connect = (): Redis => env.connect({ enableReadyCheck: false });

test('SIGSTOP longer than the command timeout: others unaffected, a timeout error for the frozen node, recovery after SIGCONT', async () => {
  const cluster = env.cluster();
  const frozenKey = 'freeze:{a}';
  const frozen = await cluster.masterFor(keySlot(Buffer.from(frozenKey)));
  // A key on another master.
  let otherKey = '';
  for (let i = 0; otherKey === ''; i++) {
    const k = `freeze:{b${i}}`;
    if ((await cluster.masterFor(keySlot(Buffer.from(k)))) !== frozen) otherKey = k;
  }
  const victim = connect();
  const bystander = connect();
  expect(await victim.set(frozenKey, 'before')).toBe('OK');
  expect(await bystander.set(otherKey, '0')).toBe('OK');

  frozen.kill('SIGSTOP');
  const frozenAt = Date.now();
  try {
    // A write and a read to the frozen node, and a bystander working the whole time.
    const write = victim.set(frozenKey, 'during').then(() => 'OK', (err: Error) => err.message);
    const read = connect().get(frozenKey).then((v) => `value ${v}`, (err: Error) => err.message);
    const latencies: number[] = [];
    const bystanderLoad = (async () => {
      while (Date.now() - frozenAt < FREEZE_MS - 200) {
        const t = Date.now();
        await bystander.incr(otherKey);
        latencies.push(Date.now() - t);
      }
    })();
    const writeResult = await write;
    const writeMs = Date.now() - frozenAt;
    const readResult = await read;
    const readMs = Date.now() - frozenAt;
    await bystanderLoad;
    process.stdout.write(
      `SIGSTOP ${FREEZE_MS} ms (command timeout ${COMMAND_TIMEOUT_MS} ms): write answered after ${writeMs} ms, ` +
        `read after ${readMs} ms; bystander ${latencies.length} commands, slowest ${Math.max(...latencies)} ms\n`,
    );
    // The write was on the wire, so it is not retried: a timeout error after about one command timeout.
    expect(writeResult).toBe(`ERR slotproxy: node ${frozen.address} timed out (no reply within ${COMMAND_TIMEOUT_MS} ms)`);
    expect(writeMs).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS);
    expect(writeMs).toBeLessThan(COMMAND_TIMEOUT_MS * 1.25 + 500);
    // A read is retried for the retry window, then gets the timeout error too: bounded, not a hang.
    expect(readResult).toMatch(/timed out \(no reply within|unreachable|connection to .* lost/);
    expect(readMs).toBeLessThan(FREEZE_MS);
    // The bystander's master was never slowed by its frozen neighbour.
    expect(latencies.length).toBeGreaterThan(50);
    expect(Math.max(...latencies)).toBeLessThan(250);
  } finally {
    frozen.kill('SIGCONT');
  }
  // Recovery: the frozen node's keys are served again (the write may or may not have run).
  const deadline = Date.now() + 10_000;
  let value: string | null = null;
  for (;;) {
    try {
      value = await victim.get(frozenKey);
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  expect(['before', 'during']).toContain(value);
  expect(await victim.set(frozenKey, 'after')).toBe('OK');
  expect(await victim.get(frozenKey)).toBe('after');
}, 60_000);
