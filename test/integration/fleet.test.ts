// Many proxies of one ring during a migration (ring A: 2 nodes -> ring B: 3 nodes): each registers
// itself on ring A's nodes; `migrate status` lists them; `migrate copy` is refused while one does
// not double-write yet; `migrate phase` switches them all and writes the file; `PROXY MIGRATION
// PHASE done` is refused while one is behind read-new. Three real proxy processes under a mixed
// write load, one killed with -9 and one restarted on the way; at the end `migrate verify` finds no
// difference and every acknowledged write is there.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freeStablePorts } from '../../cmd/sandbox/ports';
import { BIN, ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { Expected, MixedLoad, checkState, seed } from './migration-load';
import { Ring } from '../../sharding/ring';
import { errorOf } from '../helpers/reply-error';

let nodes: StandaloneNodes | undefined;
let dir = '';
let file = '';
let ports: number[] = [];
const clients: Redis[] = [];

function config(phase: string | null): string {
  const [a, b, c] = nodes!.addresses;
  const migration = phase === null ? '' : `migration:\n  phase: ${phase}\n  to:\n    nodes:\n      - { name: a, addr: ${a}, weight: 1 }\n      - { name: b, addr: ${b}, weight: 1 }\n      - { name: c, addr: ${c}, weight: 1 }\n`;
  return `listen: 127.0.0.1:0\nmode: ring\nring:\n  hash: murmur\n  nodes:\n    - { name: a, addr: ${a}, weight: 1 }\n    - { name: b, addr: ${b}, weight: 1 }\n${migration}`;
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

async function startProxy(configFile: string, port: number): Promise<ProxyProcess> {
  const p = ProxyProcess.start(configFile, ['--listen', `127.0.0.1:${port}`]);
  await p.waitForLog(/slotproxy is listening/);
  return p;
}

function connect(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true, retryStrategy: () => null });
  clients.push(c);
  return c;
}

/** The proxies `migrate status` lists, as "port phase". */
async function listed(): Promise<string[]> {
  const r = await cli(['migrate', 'status', '-c', file]);
  if (r.code !== 0) throw new Error(`migrate status: ${r.stderr}`);
  return [...r.stdout.matchAll(/^ {2}\S+ 127\.0\.0\.1:(\d+) (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
}

/** Polls `migrate status` until it lists exactly `want` (records appear at once and expire in 3 s). */
async function waitListed(want: string[], ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  let got: string[] = [];
  while (Date.now() < deadline) {
    got = await listed();
    if (JSON.stringify(got) === JSON.stringify([...want].sort())) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`migrate status listed ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
  dir = tempDir('slotproxy-fleet-');
  file = path.join(dir, 'ring.yaml');
  fs.writeFileSync(file, config('double-write'));
  // Below the ephemeral range: a proxy is restarted on its port (an outgoing connection took one once).
  ports = await freeStablePorts(5);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  killAllProxies();
  await nodes?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

test('three proxies under load: registered, copy gated, phases switched fleet-wide, one killed and one restarted, nothing lost', async () => {
  const proxies = await Promise.all(ports.slice(0, 3).map((p) => startProxy(file, p)));
  await waitListed(ports.slice(0, 3).map((p) => `${p} double-write`));
  // The registrations are not in the clients' database (named connections): the only keys are the
  // migration's bookkeeping (the follows' full-sync progress and applied records, docs/migration.md).
  const keys = (await connect(ports[0]).keys('*')).sort();
  expect(keys.filter((k) => !/^__slotproxy:migration:(follow-sync|applied)\b/.test(k))).toEqual([]);

  // The data set before the copy, written straight to ring A's nodes.
  const ringA = new Ring({ hash: 'murmur', hashTag: '{}', nodes: nodes!.addresses.slice(0, 2).map((addr, i) => ({ name: 'ab'[i], addr, weight: 1 })) });
  const direct = nodes!.nodes.slice(0, 2).map((n) => new Redis({ port: n.port, host: '127.0.0.1', disableClientInfo: true }));
  clients.push(...direct);
  const expected = new Expected();
  await seed((key) => direct[ringA.indexOf(Buffer.from(key))], expected);
  const loads = ports.slice(0, 3).map((p, i) => new MixedLoad([connect(p), connect(p)], expected, i + 1));
  for (const l of loads) l.start();

  // A fourth proxy that has no migration yet: the copy would miss its writes, so it is refused.
  const oldFile = path.join(dir, 'old.yaml');
  fs.writeFileSync(oldFile, config(null));
  const late = await startProxy(oldFile, ports[3]);
  await waitListed([...ports.slice(0, 3).map((p) => `${p} double-write`), `${ports[3]} none`]);
  const refused = await cli(['migrate', 'copy', '-c', file]);
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain(`refused: live proxies are not double-writing yet: `);
  expect(refused.stderr).toContain(`(127.0.0.1:${ports[3]}) in none`);
  late.kill('SIGTERM');
  expect(await late.exitCode()).toBe(0);
  await waitListed(ports.slice(0, 3).map((p) => `${p} double-write`), 1000); // a clean stop removes the record at once

  const copy = await cli(['migrate', 'copy', '-c', file]);
  // Feeds: a versioned walk; replication (the default): the full syncs of A's nodes, restored on B.
  expect(copy.stdout).toMatch(/^copy: \d+ keys scanned, \d+ copied|^copy: the full syncs of side A (are|were) restored on side B[^:]*: \d+ of \d+ keys read, \d+ restored/m);
  expect(copy.code).toBe(0);

  // Proxy 3 dies (its clients stop first: a reply lost with the process is no acknowledged write).
  await loads[2].pause();
  proxies[2].kill('SIGKILL');
  await waitListed(ports.slice(0, 2).map((p) => `${p} double-write`));

  const toReadNew = await cli(['migrate', 'phase', 'read-new', '-c', file]);
  expect(toReadNew.code).toBe(0);
  expect(toReadNew.stdout).toContain(`phase: all 2 proxies in read-new; ${file} says read-new`);
  expect(fs.readFileSync(file, 'utf8')).toContain('phase: read-new');

  // Restarted, it takes the phase from the file, and carries load again.
  proxies[2] = await startProxy(file, ports[2]);
  await waitListed(ports.slice(0, 3).map((p) => `${p} read-new`));
  const reborn = new MixedLoad([connect(ports[2])], expected, 9);
  reborn.start();

  // A proxy still in double-write (started from an old copy of the file) holds `done` back.
  const behindFile = path.join(dir, 'behind.yaml');
  fs.writeFileSync(behindFile, config('double-write'));
  const behind = await startProxy(behindFile, ports[4]);
  await waitListed([...ports.slice(0, 3).map((p) => `${p} read-new`), `${ports[4]} double-write`]);
  const admin = connect(ports[0]);
  expect(await errorOf(admin.call('PROXY', 'MIGRATION', 'PHASE', 'done'))).toMatch(new RegExp(`live proxies are behind read-new: \\S+ \\(127\\.0\\.0\\.1:${ports[4]}\\) in double-write`));
  behind.kill('SIGTERM');
  expect(await behind.exitCode()).toBe(0);

  // Rings A and B agree while both are written (after `done` only B is, so A goes stale by design).
  for (const l of [...loads, reborn]) await l.pause();
  const verify = await cli(['migrate', 'verify', '-c', file]);
  expect(verify.stdout).toMatch(/verify: \d+ moved keys compared, 0 differ/);
  expect(verify.code).toBe(0);

  for (const l of [...loads.slice(0, 2), reborn]) l.start();
  const toDone = await cli(['migrate', 'phase', 'done', '-c', file]);
  expect(toDone.stdout).toContain(`phase: all 3 proxies in done; ${file} says done`);
  expect(toDone.code).toBe(0);
  await waitListed(ports.slice(0, 3).map((p) => `${p} done`));

  for (const l of [...loads.slice(0, 2), reborn]) await l.pause();
  expect(expected.errors).toEqual([]);
  expect(expected.ops).toBeGreaterThan(500);
  expect(await checkState(connect(ports[0]), expected)).toEqual([]);
  expect(await checkState(connect(ports[2]), expected)).toEqual([]);
  console.log(`fleet: ${expected.ops} acknowledged operations through 3 proxies (one killed -9, one restarted), 0 lost, verify 0 differences`);
}, 120_000);
