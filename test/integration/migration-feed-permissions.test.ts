// A back-end user that cannot read every key of side A is refused before a migration's change feeds
// start (newer Redis versions filter a tracking connection's invalidations by its key permissions,
// so such a feed would miss changes silently): at start, on a reload into double-write, and over
// `PROXY MIGRATION PHASE double-write`. Real ACL users on real standalone redis-servers. These are
// the change feeds' permissions, so the migrations pin `carry: feeds`; unset, the carry is auto,
// which takes the feeds where the user may not follow side A (no +psync), and checks them so too.
// (What auto chooses, and why, is migration-carry-choice.test.ts's.)
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freePort } from '../../cmd/sandbox/ports';
import { ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { nopermText } from '../helpers/server-version';

const USER = 'feeder';
let nodes: StandaloneNodes | undefined;
let dir: string | undefined;
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
  dir = tempDir('slotproxy-feed-acl-');
}, 60_000);

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(proxies.splice(0).map((p) => p.close(200)));
});

afterAll(async () => {
  killAllProxies();
  await nodes?.stop();
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

/** The back-end user on every node, with these key patterns on ring A's two nodes (every key on the third, ring B's own). */
async function grant(...patterns: string[]): Promise<void> {
  await Promise.all(
    nodes!.nodes.map((n, i) => n.command('ACL', 'SETUSER', USER, 'reset', 'on', '>feeder-pw', '+@all', ...(i < 2 ? patterns : ['~*']))),
  );
}

const ringNodes = (count: number): { name: string; addr: string }[] => nodes!.addresses.slice(0, count).map((addr, i) => ({ name: `n${i}`, addr }));

/** Ring A: the first two nodes; with `phase`, a migration into all three, on the change feeds unless `carry` is null (unset). */
function config(phase: 'double-write' | 'read-new' | null, port = 0, carry: 'feeds' | null = 'feeds'): Record<string, unknown> {
  return {
    listen: `127.0.0.1:${port}`,
    mode: 'ring',
    ring: { hash: 'md5', nodes: ringNodes(2) },
    ...(phase === null ? {} : { migration: { phase, ...(carry === null ? {} : { carry }), to: { nodes: ringNodes(3) } } }),
    backend: { username: USER, password: 'feeder-pw' },
    log: { level: 'silent' },
  };
}

async function start(phase: 'double-write' | 'read-new' | null): Promise<{ proxy: ProxyServer; admin: Redis }> {
  const proxy = await ProxyServer.start(parseConfig(config(phase)));
  proxies.push(proxy);
  const admin = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(admin);
  return { proxy, admin };
}

async function phaseOf(admin: Redis): Promise<string> {
  return /phase:(\S+)/.exec(String(await admin.call('PROXY', 'MIGRATION', 'STATUS')))?.[1] ?? '';
}

const limited = (address: string): string =>
  `the back-end user "${USER}" may not read every key on side A's node ${address} (its key patterns: ~app:*): its change feed would miss changes to the others; give it read access to every key (~* or %R~*)`;

test('at start in double-write: a user limited to ~app:* on ring A stops the proxy with the reason; ~* lets it start', async () => {
  await grant('~app:*');
  const port = await freePort();
  const file = path.join(dir!, 'start.json');
  fs.writeFileSync(file, JSON.stringify({ ...config('double-write', port), log: { level: 'info' } }));
  const refused = ProxyProcess.start(file);
  expect(await refused.exitCode()).toBe(1);
  expect(refused.log).toContain('migration.phase double-write refused: ');
  expect(refused.log).toMatch(new RegExp(`may not read every key on side A's node (${nodes!.addresses.slice(0, 2).join('|')}) \\(its key patterns: ~app:\\*\\)`));

  await grant('~*');
  const started = ProxyProcess.start(file);
  await started.waitForLog(/slotproxy is listening/, 30_000);
  started.kill('SIGTERM');
  expect(await started.exitCode()).toBe(0);
}, 60_000);

test('carry unset, a user without +psync limited to ~app:*: auto takes the change feeds, and their check refuses the start; ~* lets it start on them', async () => {
  await grant('~app:*', '-psync');
  await expect(ProxyServer.start(parseConfig(config('double-write', 0, null)))).rejects.toThrow(
    new RegExp(`migration\\.phase double-write refused: .*may not read every key on side A's node (${nodes!.addresses.slice(0, 2).join('|')}) \\(its key patterns: ~app:\\*\\)`),
  );
  await grant('~*', '-psync');
  const proxy = await ProxyServer.start(parseConfig(config('double-write', 0, null)));
  proxies.push(proxy);
  const admin = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(admin);
  expect(String(await admin.info('proxy'))).toMatch(/migration_carry:feeds\r\nmigration_carry_why:auto \(migration\.carry unset\): .* refuses PSYNC: /);
}, 60_000);

test('PROXY MIGRATION PHASE double-write: refused while the user reads only ~app:*, naming the node; OK once it reads every key', async () => {
  await grant('%R~*');
  const { admin } = await start('read-new');
  expect(await phaseOf(admin)).toBe('read-new');
  // Its permissions narrowed on ring A's first node while the proxy runs (Redis applies them at once).
  await nodes!.nodes[0].command('ACL', 'SETUSER', USER, 'resetkeys', '~app:*');
  await expect(admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).rejects.toThrow(`ERR slotproxy: ${limited(nodes!.addresses[0])}`);
  expect(await phaseOf(admin)).toBe('read-new');
  // A selector that reads every key is enough.
  await nodes!.nodes[0].command('ACL', 'SETUSER', USER, '(%R~* +get)');
  expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).toBe('OK');
  expect(await phaseOf(admin)).toBe('double-write');
}, 60_000);

test('a user that may not run ACL GETUSER cannot be checked: refused, saying so', async () => {
  await grant('~*');
  const { admin } = await start('read-new');
  await nodes!.nodes[1].command('ACL', 'SETUSER', USER, '-acl|getuser');
  await expect(admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).rejects.toThrow(
    `ERR slotproxy: cannot check that the back-end user may read every key on side A's node ${nodes!.addresses[1]} (ACL GETUSER ${USER}: ${nopermText('command', USER, 'acl|getuser')})`,
  );
  expect(await phaseOf(admin)).toBe('read-new');
}, 60_000);

test('SIGHUP into double-write: refused while the user reads only ~app:*, the placement kept; applied once it reads every key', async () => {
  await grant('~app:*');
  const port = await freePort();
  const file = path.join(dir!, 'reload.json');
  const write = (phase: 'double-write' | null): void => fs.writeFileSync(file, JSON.stringify({ ...config(phase, port), log: { level: 'info' } }));
  write(null);
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  const admin = new Redis({ port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(admin);
  expect(await phaseOf(admin)).toBe('none');

  write('double-write');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/reload: double-write refused; the migration phase stays none/);
  expect(proxy.log).toContain(`"problem":${JSON.stringify(limited(nodes!.addresses[0]))}`);
  expect(await phaseOf(admin)).toBe('none');
  expect(await admin.set('app:1', 'x')).toBe('OK');

  await grant('~*');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/migration phase reloaded/);
  expect(await phaseOf(admin)).toBe('double-write');
  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
}, 60_000);
