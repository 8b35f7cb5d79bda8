// The back-end user of docs/production.md (config/examples/backend-user.acl) on real nodes, with
// exactly those rules plus the few commands this test's clients send: slotproxy serves a Redis
// Cluster through it (routing, split MGET/MSET, a preloaded script, Pub/Sub, CLIENT TRACKING,
// BLPOP, MULTI/EXEC, INFO, SCAN), and a migration from a ring into that cluster runs through it
// (double-write with change feeds, copy, read-new, done, verify, cleanup). Every node's ACL LOG
// must stay empty: nothing the proxy or its tools sent was refused, even where they would cope.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import type { RedisNode } from '../../cmd/sandbox/redis-node';
import { freePort } from '../../cmd/sandbox/ports';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { BIN, ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { Ring } from '../../sharding/ring';

const ACL_FILE = path.resolve(__dirname, '..', '..', 'config', 'examples', 'backend-user.acl');
const PASSWORD = 'backend-pw';
/** What this test's clients send, on top of the proxy's own needs (an application grants its own). */
const APP_COMMANDS = ['+set', '+get', '+mget', '+mset', '+incr', '+rpush', '+blpop', '+publish', '+evalsha', '+expire'];

/** The file's one `user NAME rules...` line, as ACL SETUSER arguments, with the test's password. */
function backendUser(): { name: string; rules: string[] } {
  const line = fs.readFileSync(ACL_FILE, 'utf8').split('\n').find((l) => l.startsWith('user '));
  if (line === undefined) throw new Error(`${ACL_FILE} has no user line`);
  const [, name, ...rules] = line.trim().split(/\s+/);
  return { name, rules: rules.map((r) => (r.startsWith('>') ? `>${PASSWORD}` : r)) };
}

const { name: USER, rules: RULES } = backendUser();

async function grant(nodes: readonly RedisNode[]): Promise<void> {
  await Promise.all(nodes.map((n) => n.command('ACL', 'SETUSER', USER, 'reset', ...RULES, ...APP_COMMANDS)));
  await Promise.all(nodes.map((n) => n.command('ACL', 'LOG', 'RESET')));
}

/** Every ACL LOG entry of these nodes, as "node: reason object (context)". */
async function refusals(nodes: readonly RedisNode[]): Promise<string[]> {
  const out: string[] = [];
  for (const n of nodes) {
    const entries = (await n.command('ACL', 'LOG')) as unknown as unknown[][];
    for (const e of entries) {
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < e.length; i += 2) f.set(String(e[i]), String(e[i + 1]));
      out.push(`${n.address}: ${f.get('reason')} ${f.get('object')} (${f.get('context')}, user ${f.get('username')})`);
    }
  }
  return out;
}

let cluster: RedisCluster | undefined;
let ring: StandaloneNodes | undefined;
let dir = '';
const clients: Redis[] = [];
const proxies: ProxyServer[] = [];

beforeAll(async () => {
  [cluster, ring] = await Promise.all([RedisCluster.start({ masters: 3, replicasPerMaster: 0 }), StandaloneNodes.start(2)]);
  await grant([...cluster.nodes, ...ring.nodes]);
  dir = tempDir('slotproxy-backend-acl-');
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await Promise.all(proxies.map((p) => p.close(200)));
  killAllProxies();
  await Promise.all([cluster?.stop(), ring?.stop()]);
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

function connect(port: number): Redis {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

test('the rules file is one user line that starts from nothing: -@all, every key and channel', () => {
  expect(USER).toBe('slotproxy');
  expect(RULES.slice(0, 4)).toEqual(['on', `>${PASSWORD}`, '~*', '&*']);
  expect(RULES).toContain('-@all');
  expect(RULES.filter((r) => r.startsWith('+@'))).toEqual([]);
});

test('cluster mode through the back-end user: routing, split MGET/MSET, scripts, Pub/Sub, tracking, BLPOP, MULTI/EXEC, INFO, SCAN; nothing refused', async () => {
  const script = path.join(dir, 'incr-by-two.lua');
  fs.writeFileSync(script, "return redis.call('INCR', KEYS[1]) + redis.call('INCR', KEYS[1])\n");
  const proxy = await ProxyServer.start(
    parseConfig({
      listen: '127.0.0.1:0',
      mode: 'cluster',
      cluster: { seeds: [cluster!.masters[0].address] },
      crossSlot: 'split',
      backend: { username: USER, password: PASSWORD },
      scripts: [script],
      log: { level: 'silent' },
    }),
  );
  proxies.push(proxy);
  const c = connect(proxy.address.port);
  const keys = Array.from({ length: 12 }, (_, i) => `acl:${i}`);
  expect(await c.mset(...keys.flatMap((k) => [k, `v-${k}`]))).toBe('OK');
  expect(await c.mget(...keys)).toEqual(keys.map((k) => `v-${k}`));
  const sha = (await import('node:crypto')).createHash('sha1').update(fs.readFileSync(script)).digest('hex');
  expect(await c.evalsha(sha, 1, 'acl:counter')).toBe(3);

  const sub = connect(proxy.address.port);
  const message = new Promise<string>((resolve) => sub.on('message', (_ch: string, m: string) => resolve(m)));
  await sub.subscribe('acl-news');
  expect(await c.publish('acl-news', 'hello')).toBe(1);
  expect(await message).toBe('hello');

  // RESP2 tracking: invalidations through REDIRECT to a client subscribed to __redis__:invalidate.
  const inbox = connect(proxy.address.port);
  const inboxId = String(await inbox.client('ID'));
  const invalidated = new Promise<void>((resolve) => inbox.on('message', () => resolve()));
  await inbox.subscribe('__redis__:invalidate');
  const tracker = connect(proxy.address.port);
  expect(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', inboxId)).toBe('OK');
  expect(await tracker.get('acl:0')).toBe('v-acl:0');
  await c.set('acl:0', 'changed');
  await invalidated;

  const waiter = connect(proxy.address.port);
  const popped = waiter.blpop('acl:queue', 5);
  await c.rpush('acl:queue', 'job');
  expect(await popped).toEqual(['acl:queue', 'job']);

  const tx = await c.multi().set('{acl}a', '1').incr('{acl}a').exec();
  expect(tx).toEqual([[null, 'OK'], [null, 2]]);
  expect(String(await c.info('server'))).toMatch(/redis_version:/);
  const [, found] = await c.scan('0', 'COUNT', 1000);
  expect(found.length).toBeGreaterThan(0);

  expect(await refusals(cluster!.nodes)).toEqual([]);
  // The check sees a refusal: a command the user is not granted is refused by the node and logged.
  await expect(c.lpush('acl:list', 'x')).rejects.toThrow(/NOPERM/);
  expect(await refusals(cluster!.nodes)).toEqual([expect.stringMatching(/: command lpush \(toplevel, user slotproxy\)$/)]);
  await Promise.all(cluster!.nodes.map((n) => n.command('ACL', 'LOG', 'RESET')));
}, 60_000);

/** `slotproxy ARGS`; rejects with its output unless it exits 0. */
function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [...NODE_FLAGS, BIN, ...args], { timeout: 120_000 }, (err, stdout, stderr) => {
      if (err === null) resolve(stdout + stderr);
      else reject(new Error(`slotproxy ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`));
    });
  });
}

test('a migration from a ring into the cluster through the back-end user: double-write, copy, read-new, done, verify, cleanup; nothing refused', async () => {
  // The data set before the migration, on ring A's nodes where the ring places it.
  const ringA = new Ring({ hash: 'fnv1a_64', hashTag: '{}', nodes: ring!.addresses.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 })) });
  const direct = ring!.nodes.map((n) => new Redis({ host: n.host, port: n.port, disableClientInfo: true }));
  clients.push(...direct);
  for (let i = 0; i < 400; i++) await direct[ringA.indexOf(Buffer.from(`old:${i}`))].set(`old:${i}`, String(i), 'EX', 3600);
  // Side B starts empty (the cluster test above wrote to it).
  await Promise.all(cluster!.masters.map((m) => m.command('FLUSHALL')));
  const port = await freePort();
  const file = path.join(dir, 'migration.yaml');
  const write = (phase: string): void =>
    fs.writeFileSync(
      file,
      [
        `listen: 127.0.0.1:${port}`,
        'mode: ring',
        'ring:',
        '  hash: fnv1a_64',
        '  nodes:',
        ...ring!.addresses.map((addr, i) => `    - { name: n${i}, addr: "${addr}" }`),
        'migration:',
        `  phase: ${phase}`,
        '  to:',
        `    cluster: { seeds: ["${cluster!.masters[0].address}"] }`,
        `backend: { username: ${USER}, password: ${PASSWORD} }`,
        'log: { level: info }',
        '',
      ].join('\n'),
    );
  write('double-write');
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 20_000);
  const c = connect(port);
  for (let i = 0; i < 100; i++) await c.set(`new:${i}`, String(i));

  await cli(['migrate', 'copy', '-c', file]);
  for (let i = 0; i < 100; i++) await c.incr(`new:${i}`);
  for (const phase of ['read-new', 'done']) await cli(['migrate', 'phase', phase, '-c', file]);
  const verify = cli(['migrate', 'verify', '-c', file]);
  await verify.catch(() => undefined);
  expect(await refusals([...ring!.nodes, ...cluster!.nodes])).toEqual([]);
  expect(await verify).toMatch(/checked on B: [1-9]\d* moved keys of A, each with A's last state applied on B \(0 differ\)/);
  expect(await c.get('old:7')).toBe('7');
  expect(await c.get('new:7')).toBe('8');
  await cli(['migrate', 'cleanup', '-c', file]);

  expect(await refusals([...ring!.nodes, ...cluster!.nodes])).toEqual([]);
}, 180_000);
