// The slotproxy binary (dist/cmd/slotproxy.js, built by `npm test`): exit codes, output, flags over
// the file, SIGTERM, and --workers.

import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { freePort } from '../../cmd/sandbox/ports';
import { NODE_FLAGS } from '../../cmd/node-flags';

const BIN = path.resolve(__dirname, '..', '..', 'dist', 'cmd', 'slotproxy.js');
const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
const children: ChildProcess[] = [];
let dir: string;

beforeAll(() => {
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` (npm test does)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-cli-'));
});

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

function writeConfig(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** Starts `slotproxy start ...` and resolves once it logged that it listens. */
function startProxy(args: string[], listening = 1): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, 'start', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let seen = 0;
    let log = '';
    child.stderr?.on('data', (d: Buffer) => {
      log += d.toString();
      seen = (log.match(/slotproxy is listening/g) ?? []).length;
      if (seen >= listening) resolve(child);
    });
    child.on('exit', (code) => reject(new Error(`slotproxy exited with ${code} before listening:\n${log}`)));
  });
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

test('check-config: exit 0 and a summary for a good file, exit 2 naming each bad field', async () => {
  const good = await run(['check-config', path.resolve(__dirname, '..', '..', 'config', 'examples', 'cluster.yaml')]);
  expect(good.code).toBe(0);
  expect(good.stdout).toMatch(/cluster\.yaml: OK \(mode cluster, 2 seed\(s\), listen 127\.0\.0\.1:7777\)/);
  const bad = writeConfig('bad.yaml', 'mode: cluster\ncluster:\n  seeds: [localhost]\nbackend:\n  connectionsPerNode: 100\n');
  const r = await run(['check-config', bad]);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('cluster.seeds[0]: expected host:port, got "localhost"');
  expect(r.stderr).toContain('backend.connectionsPerNode: must be at most 64');
});

test('check-config and the start log warn of a ring config that names no hash (md5 here, fnv1a_64 in a twemproxy pool); one that names it, and a nutcracker.yml, get no warning', async () => {
  const warning = "warning: ring.hash not set: md5, slotproxy's default; a twemproxy pool's default is fnv1a_64: set hash: to the pool's";
  const port = await freePort();
  const unset = writeConfig('ring-no-hash.yaml', `listen: 127.0.0.1:${port}\nmode: ring\nring:\n  nodes:\n    - addr: 127.0.0.1:1\n`);
  const checked = await run(['check-config', unset]);
  expect(checked.code).toBe(0);
  expect(checked.stderr).toBe(`${unset}: ${warning}\n`);
  const named = await run(['check-config', writeConfig('ring-md5.yaml', 'mode: ring\nring:\n  hash: md5\n  nodes:\n    - addr: 127.0.0.1:1\n')]);
  expect(named).toMatchObject({ code: 0, stderr: '' });
  const pool = await run(['check-config', writeConfig('nutcracker.yml', 'alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - 127.0.0.1:1:1\n')]);
  expect(pool).toMatchObject({ code: 0, stderr: '' });
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, 'start', '-c', unset], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let log = '';
  const exited = exitOf(child);
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (d: Buffer) => {
      log += d.toString();
      if (/slotproxy is listening/.test(log)) resolve();
    });
    void exited.then((code) => reject(new Error(`slotproxy exited with ${String(code)} before listening:\n${log}`)));
  });
  const line = log.split('\n').find((l) => l.includes('ring.hash not set'));
  expect(line).toBeDefined();
  expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 40, msg: warning.replace('warning: ', '') });
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});

test('slot: each key with its slot and hash tag', async () => {
  const r = await run(['slot', 'foo', 'user:{42}:name', 'foo{}{bar}']);
  expect(r.code).toBe(0);
  expect(r.stdout).toBe('foo\tslot=12182\ttag=-\nuser:{42}:name\tslot=8000\ttag=42\nfoo{}{bar}\tslot=8363\ttag=-\n');
});

test('slot: output cut short by its reader (| head -1) ends the command with status 0 and no stack trace', async () => {
  const keys = Array.from({ length: 20_000 }, (_, i) => `key${i}`);
  const child = spawn(process.execPath, [...NODE_FLAGS, BIN, 'slot', ...keys]);
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // Read one chunk, then close the pipe as `head -1` does.
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  child.stdout.destroy();
  expect(await exitOf(child)).toBe(0);
  expect(stderr).toBe('');
});

test('slot -c with a migration into a cluster: the ring owner, and the slot on the cluster side', async () => {
  const file = path.resolve(__dirname, '..', '..', 'config', 'examples', 'migration-to-cluster.yaml');
  const r = await run(['slot', 'user:{42}:name', '-c', file]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/^user:\{42\}:name\tslot=8000\ttag=42\thash=\d+\tnode=[ab]\(127\.0\.0\.1:710[12]\)\tnew=slot 8000\tphase=double-write\n$/);
});

test('start: --listen overrides the file; SIGTERM drains and exits 0', async () => {
  const port = await freePort();
  const file = writeConfig('c.yaml', `listen: 127.0.0.1:1\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds[0]}]\n`);
  const child = await startProxy(['-c', file, '--listen', `127.0.0.1:${port}`, '--log-level', 'info']);
  const c = new Redis({ port, maxRetriesPerRequest: 0 });
  try {
    expect(await c.set('cli:k', 'v')).toBe('OK');
    expect(await c.get('cli:k')).toBe('v');
  } finally {
    c.disconnect();
  }
  const exited = exitOf(child);
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});

test('start --workers 2: two processes serve the same port; SIGTERM stops them all', async () => {
  const port = await freePort();
  const file = writeConfig('w.yaml', `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds[0]}]\n`);
  const child = await startProxy(['-c', file, '--workers', '2'], 2);
  const pids = new Set<string>();
  const clients = Array.from({ length: 8 }, () => new Redis({ port, maxRetriesPerRequest: 0 }));
  try {
    for (const c of clients) {
      const info = (await c.call('INFO', 'proxy')) as string;
      pids.add(/proxy_process_id:(\d+)/.exec(info)?.[1] ?? '');
      expect(await c.incr('cli:workers')).toBeGreaterThan(0);
    }
  } finally {
    for (const c of clients) c.disconnect();
  }
  expect(pids.size).toBe(2);
  const exited = exitOf(child);
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
  for (const pid of pids) expect(() => process.kill(Number(pid), 0)).toThrow();
});
