// The replication carry when the following proxy dies by kill -9 (real slotproxy processes, a ring
// grown 2 -> 3 over real redis-servers): mid-stream, the next proxy continues each node with
// +CONTINUE and every counter on B equals A's, nothing applied twice; mid-snapshot, the next proxy
// makes a new full sync and B ends equal to A, with no key A does not hold.
import fs from 'node:fs';
import { useRingGrow } from '../helpers/ring-grow';
import { Placement } from '../../sharding/migration';
import { ProxyProcess, startProxyProcess } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { useProxyProcesses } from '../helpers/proxy-processes';
import { REFUSED_KEY } from '../../proxy/migration/follow-node-keys';

const grow = useRingGrow();
const procs = useProxyProcesses('slotproxy-follow-kill-');
const open = procs.open;

function setup(spoolDir?: string): { config: Record<string, unknown>; placement: Placement } {
  const cfg = grow.config();
  const spool = spoolDir === undefined ? {} : { spool: { dir: spoolDir } };
  const config = { mode: 'ring', ring: { hash: 'md5', nodes: cfg.ring.nodes }, migration: { phase: 'double-write', carry: 'replication', ...spool, to: { nodes: (cfg.migration?.to as { nodes: unknown[] }).nodes } } };
  return { config, placement: Placement.fromConfig(cfg.ring, cfg.migration) };
}

async function follows(port: number): Promise<string> {
  return String(await open(`127.0.0.1:${port}`).info('proxy'));
}

async function caughtUp(port: number, placement: Placement): Promise<string> {
  const info = await eventually(() => follows(port), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 60_000);
  for (const a of placement.from.masters()) expect(Number(await open(a).call('WAIT', '1', '10000'))).toBeGreaterThanOrEqual(1);
  return info;
}

/** Moving keys of A that differ on B, and keys on B's new node that A does not hold as they are. */
async function differences(placement: Placement): Promise<string[]> {
  const out: string[] = [];
  for (const a of placement.from.masters()) {
    const node = open(a);
    for (const key of await node.keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      const t = placement.copyTarget(Buffer.from(key));
      if (t === null || t.from !== a) continue;
      const [onA, onB] = await Promise.all([node.get(key), open(t.to).get(key)]);
      if (onA !== onB) out.push(`${key}: A ${onA} / B ${onB}`);
    }
  }
  const fresh = (placement.to?.masters() ?? []).filter((b) => !placement.from.masters().includes(b));
  for (const b of fresh) {
    for (const key of await open(b).keys('*')) {
      if (key.startsWith('__slotproxy:')) continue;
      const t = placement.copyTarget(Buffer.from(key));
      const onA = t === null ? null : await open(t.from).get(key);
      if (onA === null) out.push(`${key}: on B only`);
    }
  }
  return out;
}

beforeEach(async () => {
  for (const n of grow.nodes().nodes) await n.command('FLUSHALL');
});

test('kill -9 of the following proxy mid-stream: the next one continues with +CONTINUE and nothing is applied twice', async () => {
  const { config, placement } = setup();
  const first = await startProxyProcess(config, procs.dir());
  await caughtUp(first.port, placement);
  const [a0, a1] = placement.from.masters().map(open);
  let writing = true;
  let written = 0;
  // Straight on A, through the kill and the takeover: only the nodes' streams carry these.
  const load = (async () => {
    while (writing) {
      await Promise.all([a0.incr(`c${written % 40}`), a1.incr(`d${written % 40}`), a0.rpush(`l${written % 7}`, written)]);
      written++;
    }
  })();
  await eventually(async () => written, (n) => n > 300, 20_000);
  first.proxy.child.kill('SIGKILL');
  await eventually(async () => written, (n) => n > 900, 20_000);
  const second = await startProxyProcess(config, procs.dir());
  await eventually(() => follows(second.port), (t) => /migration_follows:\S+=live,\S+=live/.test(t), 60_000);
  await eventually(async () => written, (n) => n > 1500, 20_000);
  writing = false;
  await load;
  const info = await caughtUp(second.port, placement);
  expect(info).toMatch(/migration_follow_full_syncs:0\r\n/);
  expect(info).toMatch(/migration_follow_resumes:2\r\n/);
  expect(await differences(placement)).toEqual([]);
  // migrate copy says the history is the full sync, waits for every node's, and says where each follow stands.
  const copy = ProxyProcess.run(['migrate', 'copy', '-c', second.file]);
  expect(await copy.exitCode()).toBe(0);
  expect(copy.out).toContain('copy: the migration is carried by replication: the history is the full sync of each node of side A');
  expect(copy.out).toMatch(/copy: the full syncs of side A (are|were) restored on side B[^:]*: \d+ of \d+ keys read, \d+ restored/);
  // migrate status says where each follow stands.
  const status = ProxyProcess.run(['migrate', 'status', '-c', second.file]);
  expect(await status.exitCode()).toBe(0);
  for (const a of placement.from.masters()) expect(status.out).toMatch(new RegExp(`${a}: .*offset \\d+, online, acknowledged \\d+; applied on B through \\d+ \\(\\d+ bytes behind\\)`));
  second.proxy.child.kill('SIGTERM');
}, 120_000);

test('kill -9 of the following proxy mid-snapshot: the next one removes the snapshot file left behind, makes a new full sync, and B ends equal to A', async () => {
  const spoolDir = fs.mkdtempSync(`${procs.dir()}/spool-`);
  const { config, placement } = setup(spoolDir);
  for (const a of placement.from.masters()) {
    const node = open(a);
    for (let i = 0; i < 100_000; i += 10_000) {
      const p = node.pipeline();
      for (let k = i; k < i + 10_000; k++) p.set(`big:${a}:${k}`, `v${k}`);
      await p.exec();
    }
  }
  const first = await startProxyProcess(config, procs.dir());
  await first.proxy.waitForLog(/full sync of a node of side A begun/, 30_000);
  first.proxy.child.kill('SIGKILL');
  await first.proxy.exitCode();
  const left = fs.readdirSync(spoolDir);
  // Its files are named for its process and numbered (follow-snapshot.ts): NAME.HOST.PID-N.rdb.
  const dead = new RegExp(`\\.${first.proxy.pid}-\\d+\\.rdb$`);
  const snapshots = left.filter((f) => dead.test(f));
  expect(snapshots.length).toBeGreaterThanOrEqual(1);
  // A live process's file (this one's, as another proxy's on this host would be) is not removed.
  const alive = snapshots[0].replace(dead, `.${process.pid}-1.rdb`);
  fs.writeFileSync(`${spoolDir}/${alive}`, 'another follower');
  // What the dead proxy restored may include keys A deletes before the next one follows.
  const a0 = open(placement.from.masters()[0]);
  const gone = (await a0.keys('big:*')).slice(0, 500);
  await a0.del(...gone);
  const second: { proxy: ProxyProcess; port: number } = await startProxyProcess(config, procs.dir());
  const info = await caughtUp(second.port, placement);
  expect(info).toMatch(/migration_follow_full_syncs:2\r\n/);
  expect(await differences(placement)).toEqual([]);
  expect(second.proxy.log).toMatch(/removed the snapshot files an earlier follower of this node left/);
  // The dead proxy's files are gone, the second's own snapshots removed once restored.
  await eventually(async () => fs.readdirSync(spoolDir), (files) => files.length === 1, 10_000);
  expect(fs.readdirSync(spoolDir)).toEqual([alive]);
  second.proxy.child.kill('SIGTERM');
}, 180_000);

test('kill -9 of the following proxy after B refused a command and before its key was carried: the next one carries it', async () => {
  const { config, placement } = setup();
  const first = await startProxyProcess(config, procs.dir());
  await caughtUp(first.port, placement);
  const source = placement.from.masters()[0];
  const key = [...Array(400).keys()].map((i) => `refused:${i}`).find((k) => placement.copyTarget(Buffer.from(k))?.from === source);
  const target = key === undefined ? null : placement.copyTarget(Buffer.from(key));
  if (key === undefined || target === null) throw new Error(`no key of ${source} moves`);
  const [a, b] = [open(source), open(target.to)];
  // B holds the key with another type, so it refuses A's RPUSH (and records its offset past it).
  await b.set(key, 'not a list');
  // A then pauses its clients (not its replicas): the follower gets the RPUSH, but cannot read the
  // key's state on A to carry it, and dies in that window.
  const replies = (await a.pipeline().rpush(key, 'e1', 'e2').client('PAUSE', '3000', 'ALL').exec()) ?? [];
  expect(replies.map(([err]) => err)).toEqual([null, null]);
  await first.proxy.waitForLog(/side B refused a command of the stream/, 10_000);
  first.proxy.child.kill('SIGKILL');
  await first.proxy.exitCode();
  expect(await b.hlen(REFUSED_KEY)).toBe(1);
  const second = await startProxyProcess(config, procs.dir());
  await caughtUp(second.port, placement);
  // The next follower resumes past the RPUSH on that node, and carries the key's state instead.
  await eventually(() => b.type(key), (t) => t === 'list', 20_000);
  expect(await b.lrange(key, 0, -1)).toEqual(['e1', 'e2']);
  expect(await a.lrange(key, 0, -1)).toEqual(['e1', 'e2']);
  expect(second.proxy.log).toMatch(/side B holds commands it refused before this follow resumed/);
  // Carried: the node forgets the refused command.
  await eventually(() => b.hlen(REFUSED_KEY), (n) => n === 0, 10_000);
  second.proxy.child.kill('SIGTERM');
}, 120_000);
