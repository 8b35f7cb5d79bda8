// The change feeds' snapshot script (converge.ts SNAPSHOT_CHANGED_SCRIPT) on a real redis-server:
// its flat reply read back by parseSnapshotsIfChanged, "only if changed" against forced (the mode
// used while writes are answered after side A), a key gone, a key with a TTL, and that a forced
// snapshot still records the fingerprint a later "only if changed" compares with.
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { parseSnapshotsIfChanged, snapshotChangedCommand } from '../../proxy/migration/converge';
import { exchange, splitReplies } from '../helpers/raw-exchange';

let nodes: StandaloneNodes | undefined;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(1);
}, 60_000);

afterAll(async () => {
  await nodes?.stop();
}, 30_000);

/** The script's reply for `keys`, parsed as the feeds parse it. */
async function snapshot(keys: string[], ifChanged: boolean): Promise<ReturnType<typeof parseSnapshotsIfChanged>> {
  const args = snapshotChangedCommand(keys.map((k) => Buffer.from(k)), false, undefined, ifChanged).map((a) => (Buffer.isBuffer(a) ? a.toString('latin1') : a));
  const { replies } = await exchange(nodes!.nodes[0].port, [args]);
  const [reply] = splitReplies(replies);
  return parseSnapshotsIfChanged(Buffer.from(reply, 'latin1'), keys.length);
}

test('only if changed: a key snapshotted once is skipped until it changes; forced: snapshotted every time', async () => {
  const node = nodes!.nodes[0];
  await node.command('SET', 'fs:a', '1');
  await node.command('SET', 'fs:b', '2', 'PX', '60000');

  const first = await snapshot(['fs:a', 'fs:b', 'fs:gone'], true);
  expect(first.map((s) => s !== null)).toEqual([true, true, true]);
  expect(first[0]!.payload).not.toBeNull();
  expect(first[0]!.ttlMs).toBe(0);
  expect(first[1]!.ttlMs).toBeGreaterThan(59_000);
  expect(first[2]!.payload).toBeNull();

  // Nothing changed: "only if changed" takes none of them.
  expect(await snapshot(['fs:a', 'fs:b', 'fs:gone'], true)).toEqual([null, null, null]);

  // Forced: a new version for each, changed or not.
  const forced = await snapshot(['fs:a', 'fs:b'], false);
  expect(forced[0]!.version).toBeGreaterThan(first[0]!.version);
  expect(forced[1]!.version).toBeGreaterThan(first[1]!.version);

  // A change after a forced snapshot is seen by the next "only if changed"; the unchanged key is not.
  await node.command('INCR', 'fs:a');
  const after = await snapshot(['fs:a', 'fs:b'], true);
  expect(after[0]!.version).toBeGreaterThan(forced[0]!.version);
  expect(after[1]).toBeNull();
}, 30_000);
