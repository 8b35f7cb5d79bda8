// The follow's replica check on one master of B with one replica (real redis-servers): a batch's
// `WAIT 1` goes right behind its script (one round trip, the record not written twice), and a batch
// the node finds held already (its script wrote nothing: a run of it that timed out may be on no
// replica) is confirmed only once the replica really holds the node's writes. On 7.4 and Valkey 8 a
// script that wrote nothing leaves WAIT counting from the connection's last write (7.0 counts from
// the node's offset), so there a WAIT behind such a script would confirm at once.
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { BackendPool } from '../../proxy/backend/pool';
import { FollowApplier } from '../../proxy/migration/follow-applier';
import { APPLIED_KEY } from '../../proxy/migration/follow-node-keys';
import { ProxyContext } from '../../proxy/context';
import { eventually } from '../helpers/eventually';

let nodes: StandaloneNodes;
let pool: BackendPool;

beforeAll(async () => {
  nodes = await StandaloneNodes.start(2);
  const [master, replica] = nodes.nodes;
  await replica.command('REPLICAOF', '127.0.0.1', String(master.port));
  await eventually(async () => String(await replica.command('INFO', 'replication')), (t) => /master_link_status:up/.test(t), 20_000);
}, 60_000);

afterAll(async () => {
  nodes?.nodes[1].kill('SIGCONT');
  pool?.closeAll();
  await nodes?.stop();
}, 30_000);

function applierOn(address: string): FollowApplier {
  pool = new BackendPool({ connectionsPerNode: 1, connectTimeoutMs: 2000, commandTimeoutMs: 0, handshake: [], tls: null });
  const ctx = { pool, forward: { retryWindowMs: 5000, maxRedirects: 16 } } as unknown as ProxyContext;
  return new FollowApplier(ctx, address, null, '127.0.0.1:1', () => 'rid');
}

/** Resolves with the part's error (null: applied) once the applier says it is done. */
function apply(applier: FollowApplier, end: number, key: string): Promise<string | null> {
  return new Promise((resolve) => applier.push({ args: ['SET', key, String(end)].map((a) => Buffer.from(a)), end, done: (error) => resolve(error) }));
}

async function stat(command: string): Promise<number> {
  const info = String(await nodes.nodes[0].command('INFO', 'commandstats'));
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

test('a batch\'s WAIT goes behind its script; a batch found held waits until the replica holds the node\'s writes', async () => {
  const [master, replica] = nodes.nodes;
  const applier = applierOn(master.address);
  // The first batch reads the node's replicas (ROLE) and checks by HSET + WAIT.
  expect(await apply(applier, 100, 'k1')).toBeNull();
  const hset = await stat('hset');
  // The next one, its replicas known: the WAIT right behind the script, no HSET but the script's
  // own (a WAIT that blocked is not counted by 7.0 at once, so HSETs tell the two ways apart).
  expect(await apply(applier, 200, 'k2')).toBeNull();
  expect((await stat('hset')) - hset).toBe(1);
  expect(await replica.command('GET', 'k2')).toBe('200');

  // An earlier run of the next batch wrote the record (its reply lost), and the replica never got it.
  replica.kill('SIGSTOP');
  await master.command('HSET', APPLIED_KEY, '127.0.0.1:1', 'rid 300 300');
  const before = await stat('hset');
  let answered: string | null | undefined;
  const held = apply(applier, 300, 'k3').then((error) => (answered = error));
  // The script finds it held and writes nothing: a WAIT behind it would count from the last batch,
  // which the replica has. The applier checks with HSET + WAIT instead, and that waits for the replica.
  await eventually(() => stat('hset'), (n) => n >= before + 1, 10_000);
  expect(answered).toBeUndefined();
  replica.kill('SIGCONT');
  expect(await held).toBeNull();
  expect(await replica.command('HGET', APPLIED_KEY, '127.0.0.1:1')).toBe('rid 300 300');
  applier.close('the test ended');
}, 60_000);
