// Functions and scripts travel with a migration: a ring of 2 into a cluster of 3 (the migration
// added by a reload), then a cluster of 3 into another (the migration at start). Libraries loaded
// through the proxy before and during the migration are on every master of B, FCALL works in
// every phase, after done and through a cluster-mode proxy restarted in front of B, FUNCTION
// DELETE reaches both sides, EVALSHA of preloaded and SCRIPT LOADed scripts works there too, and
// a library altered straight on a B node is reported by `migrate status` and `migrate verify`
// (and put back to A's code by the switch to done).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { copyHistory } from '../../proxy/migration/tools/copy-history';
import { sha1 } from '../../proxy/scripts/store';
import { setLogLevel } from '../../proxy/telemetry/log';
import { BIN, tempDir } from '../helpers/cli';

let ring: StandaloneNodes | undefined;
let first: RedisCluster | undefined;
let second: RedisCluster | undefined;
let dir = '';
const servers: ProxyServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  setLogLevel('silent');
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` (npm test does)`);
  dir = tempDir('slotproxy-functions-');
  const opts = { masters: 3, replicasPerMaster: 0 };
  [ring, first, second] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start(opts), RedisCluster.start(opts)]);
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.close(200)));
  await Promise.all([ring?.stop(), first?.stop(), second?.stop()]);
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

const library = (name: string, fn: string, result = 'GET'): string =>
  `#!lua name=${name}\n` +
  `redis.register_function('${fn}', function(keys, args) redis.call('SET', keys[1], args[1]) return redis.call('${result}', keys[1]) end)\n` +
  `redis.register_function{function_name='${fn}_ro', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}`;
const LIB1 = library('lib1', 'f1');
const LIB2 = library('lib2', 'f2');
const TEMP = library('temp', 'ftemp');
const PRELOADED = "return 'preloaded:' .. KEYS[1]";
const LOADED_BEFORE = "return 'before:' .. KEYS[1]";
const LOADED_DURING = "return 'during:' .. KEYS[1]";

function connect(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

async function start(raw: Record<string, unknown>): Promise<{ server: ProxyServer; client: Redis }> {
  const server = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', log: { level: 'silent' }, ...raw }));
  servers.push(server);
  return { server, client: connect(server.address.port) };
}

/** Closes a proxy, its clients first (ioredis would keep reconnecting to it). */
async function stop(server: ProxyServer): Promise<void> {
  for (const c of clients.filter((c) => c.options.port === server.address.port)) {
    c.disconnect();
    clients.splice(clients.indexOf(c), 1);
  }
  servers.splice(servers.indexOf(server), 1);
  await server.close(200);
}

/** name -> code of every library on a node. */
async function librariesOn(node: RedisNode): Promise<Map<string, string>> {
  const reply = (await node.command('FUNCTION', 'LIST', 'WITHCODE')) as unknown[];
  const out = new Map<string, string>();
  for (const entry of reply as unknown[][]) {
    const fields = new Map<string, unknown>();
    for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
    out.set(String(fields.get('library_name')), String(fields.get('library_code')));
  }
  return out;
}

/** The libraries every node holds, the same on each (fails the test otherwise). */
async function commonLibraries(nodes: readonly RedisNode[]): Promise<Record<string, string>> {
  const all = await Promise.all(nodes.map((n) => librariesOn(n)));
  for (const l of all.slice(1)) expect(Object.fromEntries(l)).toEqual(Object.fromEntries(all[0]));
  return Object.fromEntries(all[0]);
}

async function scriptsOn(nodes: readonly RedisNode[], bodies: readonly string[]): Promise<number[][]> {
  return Promise.all(nodes.map(async (n) => (await n.command('SCRIPT', 'EXISTS', ...bodies.map((b) => sha1(Buffer.from(b))))) as number[]));
}

async function phase(client: Redis, to: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const reply = await client.call('PROXY', 'MIGRATION', 'PHASE', to).catch((err: Error) => err);
    if (reply === 'OK') return;
    // The change feeds may hold a switch until they cover every node: asked again.
    if (Date.now() > deadline) throw reply instanceof Error ? reply : new Error(String(reply));
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** FCALL and FCALL_RO of both libraries' functions on keys of every node, in the current phase. */
async function fcallWorks(client: Redis, tag: string): Promise<void> {
  for (let i = 0; i < 12; i++) {
    const key = `fn:${tag}:${i}`;
    expect(await client.call('FCALL', 'f1', 1, key, `v${i}`)).toBe(`v${i}`);
    expect(await client.call('FCALL', 'f2', 1, `${key}:2`, `w${i}`)).toBe(`w${i}`);
    expect(await client.call('FCALL_RO', 'f1_ro', 1, key)).toBe(`v${i}`);
    expect(await client.get(`${key}:2`)).toBe(`w${i}`);
  }
}

async function evalshaWorks(client: Redis, bodies: readonly string[]): Promise<void> {
  const prefixes = bodies.map((b) => /'([a-z]+):'/.exec(b)?.[1]);
  for (let i = 0; i < bodies.length; i++) expect(await client.call('EVALSHA', sha1(Buffer.from(bodies[i])), 1, `k${i}`)).toBe(`${prefixes[i]}:k${i}`);
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

/**
 * `migrate status` and `verify` agree that every library is the same on both sides (and every
 * key); then, with lib2 altered straight on one master of B, both name it and verify exits 1.
 */
async function reportsAlteredLibrary(raw: Record<string, unknown>, b: RedisNode): Promise<void> {
  const file = path.join(dir, `migration-${b.port}.json`);
  fs.writeFileSync(file, JSON.stringify({ listen: '127.0.0.1:0', log: { level: 'silent' }, ...raw }));
  const clean = await cli(['migrate', 'verify', '-c', file]);
  expect(clean.stdout).toMatch(/verify: 2 function libraries compared, 0 differ/);
  expect(clean.code).toBe(0);
  expect((await cli(['migrate', 'status', '-c', file])).stdout).toMatch(/function libraries: 2, the same on every master of both sides/);

  await b.command('FUNCTION', 'LOAD', 'REPLACE', library('lib2', 'f2', 'STRLEN'));
  const status = await cli(['migrate', 'status', '-c', file]);
  expect(status.code).toBe(0);
  expect(status.stdout).toMatch(/function libraries: 2, 1 differ:\n {2}lib2: code differs from A \S+'s on B 127\.0\.0\.1:(\d+)/);
  expect(status.stdout).toContain(`on B ${b.address}`);
  const verify = await cli(['migrate', 'verify', '-c', file]);
  expect(verify.stdout).toContain(`library differs: lib2: code differs from A`);
  expect(verify.stdout).toMatch(/verify: 2 function libraries compared, 1 differ/);
  expect(verify.code).toBe(1);
}

test('ring of 2 into a cluster of 3: libraries and scripts before and during, every phase, and a proxy restarted in front of B', async () => {
  const target = first as RedisCluster;
  const aNodes = (ring as StandaloneNodes).nodes;
  const scriptFile = path.join(dir, 'preloaded.lua');
  fs.writeFileSync(scriptFile, PRELOADED);
  const ringRaw = { mode: 'ring', ring: { hash: 'fnv1a_64', nodes: (ring as StandaloneNodes).addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) }, scripts: [scriptFile] };
  const migrating = (p: string): Record<string, unknown> => ({ ...ringRaw, migration: { phase: p, to: { cluster: { seeds: [target.masters[0].address] } } } });
  const { server, client } = await start(ringRaw);

  // Before the migration: loaded on ring A only.
  expect(await client.call('FUNCTION', 'LOAD', LIB1)).toBe('lib1');
  expect(await client.call('SCRIPT', 'LOAD', LOADED_BEFORE)).toBe(sha1(Buffer.from(LOADED_BEFORE)));
  expect(await commonLibraries(aNodes)).toEqual({ lib1: LIB1 });
  expect(await commonLibraries(target.masters)).toEqual({});

  // A reload adds the migration: B has lib1 and the known scripts once the proxy double-writes.
  server.reloadRing(parseConfig({ listen: '127.0.0.1:0', log: { level: 'silent' }, ...migrating('double-write') }));
  const deadline = Date.now() + 10_000;
  while (!String(await client.call('PROXY', 'MIGRATION', 'STATUS')).startsWith('phase:double-write')) {
    if (Date.now() > deadline) throw new Error('the reload did not switch to double-write');
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await commonLibraries(target.masters)).toEqual({ lib1: LIB1 });
  expect(await scriptsOn(target.masters, [PRELOADED, LOADED_BEFORE])).toEqual(target.masters.map(() => [1, 1]));

  // During double-write: a new library, one loaded and deleted, a script, on both sides.
  expect(await client.call('FUNCTION', 'LOAD', LIB2)).toBe('lib2');
  expect(await client.call('FUNCTION', 'LOAD', TEMP)).toBe('temp');
  expect(await commonLibraries([...aNodes, ...target.masters])).toEqual({ lib1: LIB1, lib2: LIB2, temp: TEMP });
  expect(await client.call('FUNCTION', 'DELETE', 'temp')).toBe('OK');
  await expect(client.call('FUNCTION', 'DELETE', 'temp')).rejects.toThrow('ERR Library not found');
  await expect(client.call('FUNCTION', 'LOAD', LIB2)).rejects.toThrow("ERR Library 'lib2' already exists");
  expect(await commonLibraries([...aNodes, ...target.masters])).toEqual({ lib1: LIB1, lib2: LIB2 });
  expect(await client.call('SCRIPT', 'LOAD', LOADED_DURING)).toBe(sha1(Buffer.from(LOADED_DURING)));
  expect(await scriptsOn(target.masters, [LOADED_DURING])).toEqual(target.masters.map(() => [1]));
  await fcallWorks(client, 'dw');

  const direct = new NodeClient(parseConfig({ listen: '127.0.0.1:0', ...migrating('double-write') }));
  try {
    await direct.start();
    await copyHistory(direct, direct.placement(), { rate: 0, batch: 200, restart: true, progress: false });
  } finally {
    direct.close();
  }
  await phase(client, 'read-new');
  await fcallWorks(client, 'rn');
  await reportsAlteredLibrary(migrating('read-new'), target.masters[2]);
  // Entering done copies A's libraries again: f2 is A's again on every master of B.
  await phase(client, 'done');
  await fcallWorks(client, 'done');
  expect(await commonLibraries(target.masters)).toEqual({ lib1: LIB1, lib2: LIB2 });
  await evalshaWorks(client, [PRELOADED, LOADED_BEFORE, LOADED_DURING]);
  await stop(server);

  // A cluster-mode proxy in front of B alone, knowing no script: B really holds them.
  const behindB = await start({ mode: 'cluster', cluster: { seeds: [target.masters[1].address] } });
  await fcallWorks(behindB.client, 'after');
  await evalshaWorks(behindB.client, [PRELOADED, LOADED_BEFORE, LOADED_DURING]);
  await stop(behindB.server);
}, 90_000);

test('cluster of 3 into another: libraries copied at start, followed during, every phase, and a proxy restarted in front of B', async () => {
  const source = first as RedisCluster;
  const target = second as RedisCluster;
  // The first test's target is this one's source: emptied of keys, libraries and scripts.
  await Promise.all(source.masters.flatMap((m) => [m.command('FLUSHALL'), m.command('FUNCTION', 'FLUSH'), m.command('SCRIPT', 'FLUSH')]));
  const scriptFile = path.join(dir, 'preloaded-2.lua');
  fs.writeFileSync(scriptFile, PRELOADED);
  const clusterRaw = { mode: 'cluster', cluster: { seeds: [source.masters[0].address] }, scripts: [scriptFile] };
  const migrating = (p: string): Record<string, unknown> => ({ ...clusterRaw, migration: { phase: p, to: { cluster: { seeds: [target.masters[0].address] } } } });

  const before = await start(clusterRaw);
  expect(await before.client.call('FUNCTION', 'LOAD', LIB1)).toBe('lib1');
  await fcallBefore(before.client);
  await stop(before.server);
  expect(await commonLibraries(target.masters)).toEqual({});

  // Started with the migration: B has lib1 and the preloaded script before the proxy listens.
  const config: Config = parseConfig({ listen: '127.0.0.1:0', log: { level: 'silent' }, ...migrating('double-write') });
  const server = await ProxyServer.start(config);
  servers.push(server);
  expect(await commonLibraries(target.masters)).toEqual({ lib1: LIB1 });
  expect(await scriptsOn(target.masters, [PRELOADED])).toEqual(target.masters.map(() => [1]));
  const client = connect(server.address.port);

  expect(await client.call('FUNCTION', 'LOAD', LIB2)).toBe('lib2');
  expect(await client.call('FUNCTION', 'LOAD', TEMP)).toBe('temp');
  expect(await commonLibraries([...source.masters, ...target.masters])).toEqual({ lib1: LIB1, lib2: LIB2, temp: TEMP });
  expect(await client.call('FUNCTION', 'DELETE', 'temp')).toBe('OK');
  expect(await commonLibraries([...source.masters, ...target.masters])).toEqual({ lib1: LIB1, lib2: LIB2 });
  expect(await client.call('SCRIPT', 'LOAD', LOADED_DURING)).toBe(sha1(Buffer.from(LOADED_DURING)));
  await fcallWorks(client, 'dw');

  const direct = new NodeClient(config);
  try {
    await direct.start();
    await copyHistory(direct, direct.placement(), { rate: 0, batch: 200, restart: true, progress: false });
  } finally {
    direct.close();
  }
  await phase(client, 'read-new');
  await fcallWorks(client, 'rn');
  await reportsAlteredLibrary(migrating('read-new'), target.masters[1]);
  await phase(client, 'done');
  await fcallWorks(client, 'done');
  expect(await commonLibraries(target.masters)).toEqual({ lib1: LIB1, lib2: LIB2 });
  await evalshaWorks(client, [PRELOADED, LOADED_DURING]);
  await stop(server);

  const behindB = await start({ mode: 'cluster', cluster: { seeds: [target.masters[2].address] } });
  await fcallWorks(behindB.client, 'after');
  await evalshaWorks(behindB.client, [PRELOADED, LOADED_DURING]);
  await stop(behindB.server);
}, 90_000);

/** Before the migration, lib1 alone. */
async function fcallBefore(client: Redis): Promise<void> {
  for (let i = 0; i < 6; i++) expect(await client.call('FCALL', 'f1', 1, `fn:before:${i}`, `b${i}`)).toBe(`b${i}`);
}
