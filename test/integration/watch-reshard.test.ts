// WATCH while the cluster changes under it (SPEC section 5): a command between WATCH and MULTI that
// the watched node can no longer serve (the slot moved away, the node's slots gone for a moment)
// is answered as outside a transaction, and the transaction is doomed: EXEC answers nil, as when a
// watched key was touched, so a client's WATCH retry loop simply goes round again. A WATCH the
// node redirects is the same: OK, then a nil EXEC, never a MOVED the client cannot follow.

import calculateSlot from 'cluster-key-slot';
import { useProxy } from '../helpers/proxy';
import { keyPerMaster } from '../helpers/master-keys';
import { RedisNode } from '../../cmd/sandbox/redis-node';

// No periodic slot-map refresh during the file: the second test needs the proxy's map to stay stale
// (one landing between its slot move and its WATCH sent the WATCH to the new owner: CI, once).
const { cluster, connect } = useProxy({ cluster: { refreshIntervalMs: 600_000 } }, { replicasPerMaster: 0 });

/** Moves `slot` and its keys from one master to another, telling every master the new owner. */
async function moveSlot(slot: number, from: RedisNode, to: RedisNode): Promise<void> {
  const [fromId, toId] = (await Promise.all([from.command('CLUSTER', 'MYID'), to.command('CLUSTER', 'MYID')])) as string[];
  await to.command('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await from.command('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  const keys = (await from.command('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
  if (keys.length > 0) await from.command('MIGRATE', to.host, to.port, '', 0, 5000, 'KEYS', ...keys);
  for (const m of cluster().masters) await m.command('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
}

test('a slot moved between WATCH and a read: the read answers the value, EXEC answers nil, the retry runs', async () => {
  const [a, b] = await keyPerMaster(cluster(), 'wmove');
  const c = connect();
  await c.set(a.key, '5');
  expect(await c.watch(a.key)).toBe('OK');
  await moveSlot(calculateSlot(a.key), a.node, b.node);
  // The watched node answers MOVED now: the proxy follows it instead of passing it on.
  expect(await c.get(a.key)).toBe('5');
  expect(await c.multi().set(a.key, '6').exec()).toBeNull();
  expect(await c.get(a.key)).toBe('5');
  // The client's loop goes round again, on the new owner.
  expect(await c.watch(a.key)).toBe('OK');
  expect(await c.multi().set(a.key, '6').exec()).toEqual([[null, 'OK']]);
  expect(await b.node.command('GET', a.key)).toBe('6');
});

test("a WATCH the proxy sends to a slot's former owner: OK, EXEC nil, and the next WATCH binds to the owner", async () => {
  const [a, b] = await keyPerMaster(cluster(), 'wstale');
  const c = connect();
  await c.set(a.key, '1');
  // Moved behind the proxy's back, and back again: the proxy still believes the slot is a's.
  const slot = calculateSlot(a.key);
  await moveSlot(slot, a.node, b.node);
  expect(await c.watch(a.key)).toBe('OK');
  expect(await c.multi().incr(a.key).exec()).toBeNull();
  expect(await c.watch(a.key)).toBe('OK');
  expect(await c.multi().incr(a.key).exec()).toEqual([[null, 2]]);
  expect(await b.node.command('GET', a.key)).toBe('2');
});

test("the watched node's slots gone for a moment (CLUSTERDOWN): the read waits it out, EXEC answers nil", async () => {
  const [a] = await keyPerMaster(cluster(), 'wdown');
  const c = connect();
  await c.set(a.key, 'v');
  expect(await c.watch(a.key)).toBe('OK');
  const slot = calculateSlot(a.key);
  await a.node.command('CLUSTER', 'DELSLOTS', slot);
  const read = c.get(a.key);
  // The node refuses the slot until it has it back; the read is held meanwhile.
  expect(await a.node.command('GET', a.key).catch((e: Error) => e.message)).toMatch(/^CLUSTERDOWN/);
  await a.node.command('CLUSTER', 'ADDSLOTS', slot);
  expect(await read).toBe('v');
  expect(await c.multi().set(a.key, 'w').exec()).toBeNull();
  expect(await c.get(a.key)).toBe('v');
});
