// A master of a cluster B whose lowest slot changes keeps its applied record under that slot's key
// (follow-node-keys.ts). In a reshard the slot arrives with its keys, and another node's record hash
// may be among them: this node's own field is moved there before a batch reads it, so a record
// another node wrote (further along the same stream) never makes this node skip a batch it lacks.
// A real redis-server runs the applier's scripts; the slot map is a stub (pure bookkeeping).
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { BackendPool } from '../../proxy/backend/pool';
import { FollowApplier } from '../../proxy/migration/follow-applier';
import { APPLIED_KEY } from '../../proxy/migration/follow-node-keys';
import { ProxyContext } from '../../proxy/context';
import { SlotOwners } from '../../sharding/key-space';
import { slotTag } from '../../sharding/slot-tags';
import { eventually } from '../helpers/eventually';

let nodes: StandaloneNodes;
let pool: BackendPool | undefined;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(1);
}, 60_000);

afterAll(async () => {
  pool?.closeAll();
  await nodes?.stop();
}, 30_000);

/** This node serves slots `from`..16383; the rest is another's. */
function slotMap(address: string, lowest: () => number): SlotOwners {
  return {
    ownerOf: (slot) => (slot >= lowest() ? address : '127.0.0.1:1'),
    masterAddresses: () => [address, '127.0.0.1:1'],
    applyMoved: () => undefined,
    requestRefresh: () => undefined,
  };
}

function apply(applier: FollowApplier, end: number, key: string): Promise<string | null> {
  return new Promise((resolve) => applier.push({ args: ['SET', key, String(end)].map((a) => Buffer.from(a)), end, done: (error) => resolve(error) }));
}

test('a node that gains a lower slot carrying another node\'s record moves its own record there first, and applies the next batch', async () => {
  const node = nodes.nodes[0];
  let lowest = 5000;
  pool = new BackendPool({ connectionsPerNode: 1, connectTimeoutMs: 2000, commandTimeoutMs: 0, handshake: [], tls: null });
  const ctx = { pool, forward: { retryWindowMs: 5000, maxRedirects: 16 } } as unknown as ProxyContext;
  const applier = new FollowApplier(ctx, node.address, slotMap(node.address, () => lowest), '127.0.0.1:9', () => 'rid');
  const before = `${APPLIED_KEY}:{${slotTag(5000)}}`;
  const after = `${APPLIED_KEY}:{${slotTag(0)}}`;
  expect(await apply(applier, 100, 'k1')).toBeNull();
  expect(await node.command('HGET', before, '127.0.0.1:9')).toBe('rid 100 100');

  // Slot 0 arrives, with the other node's record: the same stream, applied there through 500.
  await node.command('HSET', after, '127.0.0.1:9', 'rid 500 500');
  lowest = 0;
  // The applier places its keys again at most once a second (KEYS_PLACED_MS): a time of the code
  // under test, not an event, so the test lets it pass.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  expect(await apply(applier, 200, 'k2')).toBeNull();
  // The batch ran (the other node's 500 did not pass for this node's own), and the record is this node's.
  expect(await node.command('GET', 'k2')).toBe('200');
  expect(await node.command('HGET', after, '127.0.0.1:9')).toBe('rid 200 200');
  await eventually(async () => node.command('HGET', before, '127.0.0.1:9'), (v) => v === null, 5_000);
  applier.close('the test ended');
}, 30_000);
