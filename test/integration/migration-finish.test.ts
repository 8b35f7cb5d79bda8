// The end of a ring -> cluster migration without a restart: a `slotproxy start` proxy driven to done
// with the `migrate` commands, then `slotproxy migrate finish -c FILE` and SIGHUP. The file keeps
// every setting (split, auth, users, timeouts, comments); the proxy becomes a cluster-mode proxy
// live, a client connected before the switch is still connected and served after it, and side A's
// nodes can go.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { BIN, ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { freePort } from '../../cmd/sandbox/ports';
import { keySlot } from '../../sharding/slot';

const KEYS = 200;
const TIMEOUT_MS = 400;

let ring: StandaloneNodes | undefined;
let cluster: RedisCluster | undefined;
let dir = '';

beforeAll(async () => {
  dir = tempDir('slotproxy-finish-');
  [ring, cluster] = await Promise.all([StandaloneNodes.start(2), RedisCluster.start({ masters: 3, replicasPerMaster: 0 })]);
}, 90_000);

afterAll(async () => {
  killAllProxies();
  for (const m of cluster?.masters ?? []) m.kill('SIGCONT');
  await Promise.all([ring?.stop(), cluster?.stop()]);
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

async function ok(args: string[]): Promise<string> {
  const r = await run(args);
  if (r.code !== 0) throw new Error(`slotproxy ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

test('ring -> cluster: migrate finish rewrites the file keeping every setting, and SIGHUP makes the proxy a cluster-mode proxy with its clients connected', async () => {
  const port = await freePort();
  const file = path.join(dir, 'shop.yaml');
  const [a, b] = ring!.addresses;
  fs.writeFileSync(
    file,
    [
      '# the shop\'s proxies',
      `listen: 127.0.0.1:${port}`,
      'mode: ring',
      'crossSlot: split # MGET and DEL across nodes',
      'ring:',
      '  hash: fnv1a_64',
      '  nodes:',
      `    - { name: a, addr: "${a}" }`,
      `    - { name: b, addr: "${b}" }`,
      'migration:',
      '  phase: double-write',
      '  to:',
      '    cluster:',
      `      seeds: ["${cluster!.masters[0].address}"]`,
      'auth:',
      '  password: adminpw',
      '  users:',
      '    - { name: app, password: apppw, commands: ["+@all", "-flushall"], keys: ["~*"] }',
      'backend:',
      `  commandTimeoutMs: ${TIMEOUT_MS}`,
      'log:',
      '  level: info',
      '',
    ].join('\n'),
  );
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  const before = new Redis({ host: '127.0.0.1', port, username: 'app', password: 'apppw', maxRetriesPerRequest: 0, disableClientInfo: true });
  let closes = 0;
  before.on('close', () => closes++);
  try {
    const keys = Array.from({ length: KEYS }, (_, i) => `finish:${i}`);
    for (const k of keys) await before.set(k, k);
    const id = await before.client('ID');
    await ok(['migrate', 'copy', '-c', file]);
    await ok(['migrate', 'phase', 'read-new', '-c', file]);
    await ok(['migrate', 'phase', 'done', '-c', file]);

    const finished = await ok(['migrate', 'finish', '-c', file]);
    expect(finished).toContain('now names side B as its back end (mode cluster');
    const text = fs.readFileSync(file, 'utf8');
    expect(text).not.toContain('migration:');
    expect(text).not.toContain('ring:');
    for (const kept of ['# the shop\'s proxies', 'crossSlot: split # MGET and DEL across nodes', 'mode: cluster', 'name: app, password: apppw', `commandTimeoutMs: ${TIMEOUT_MS}`, cluster!.masters[0].address]) {
      expect(text).toContain(kept);
    }
    expect(await run(['check-config', file])).toMatchObject({ code: 0 });

    proxy.kill('SIGHUP');
    await proxy.waitForLog(/migration finished: serving side B alone/, 15_000);
    await proxy.waitForLog(/configuration reloaded/, 15_000);
    expect(proxy.log).not.toMatch(/reload refused|need a restart/);
    // Side A is no longer needed.
    await ring!.stop();

    // The client connected before the switch: the same connection, served by the cluster.
    expect(await before.client('ID')).toBe(id);
    expect(String(await before.info('proxy'))).toContain('proxy_mode:cluster');
    const spread = keys.slice(0, 40);
    expect(new Set(spread.map((k) => keySlot(Buffer.from(k)))).size).toBeGreaterThan(1);
    expect(await before.mget(...spread)).toEqual(spread);
    await before.set('finish:after', 'x');
    expect(await before.del('finish:after', keys[0], keys[1])).toBe(3);
    expect(await before.exists(...keys.slice(2, 10))).toBe(8);
    // The user's rules still apply.
    await expect(before.flushall()).rejects.toThrow(/NOPERM/);
    // Every key is on the cluster now.
    let onCluster = 0;
    for (const m of cluster!.masters) onCluster += Number(await m.command('EVAL', "return #redis.call('KEYS', 'finish:*')", '0'));
    expect(onCluster).toBe(KEYS - 2);

    // AUTH as the file says, for a client that connects after the switch.
    const late = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true, lazyConnect: true, enableReadyCheck: false });
    try {
      await late.connect();
      await expect(late.get(keys[5])).rejects.toThrow(/NOAUTH/);
      await expect(late.auth('app', 'wrong')).rejects.toThrow(/WRONGPASS/);
      expect(await late.auth('adminpw')).toBe('OK');
      expect(await late.get(keys[5])).toBe(keys[5]);
    } finally {
      late.disconnect();
    }

    // The timeout: a master that stops answering fails its key's request after commandTimeoutMs.
    const key = keys[7];
    const owner = await cluster!.masterFor(keySlot(Buffer.from(key)));
    owner.kill('SIGSTOP');
    try {
      const started = Date.now();
      await expect(before.get(key)).rejects.toThrow(/timed out/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    } finally {
      owner.kill('SIGCONT');
    }
    let back: string | null = null;
    for (let i = 0; i < 100 && back === null; i++) {
      back = await before.get(key).catch(() => null);
      if (back === null) await new Promise((r) => setTimeout(r, 50));
    }
    expect(back).toBe(key);
    expect(closes).toBe(0);
    expect(await before.client('ID')).toBe(id);
  } finally {
    before.disconnect();
    proxy.kill('SIGTERM');
    await proxy.exitCode();
  }
}, 120_000);
