// The package a user installs: `npm pack`, then `npm install -g` of the tarball into a temporary
// prefix, gives a working `slotproxy` on PATH with no build step; the tarball carries what it runs
// and nothing else. The installed binary is started against a real redis-server.

import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';

const ROOT = path.resolve(__dirname, '..', '..');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(cmd: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

let tmp = '';
let tarball = '';
let bin = '';
let nodes: StandaloneNodes | undefined;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-package-'));
  // `npm pack` runs `prepare` (the TypeScript build) first, as it would before a publish.
  const packed = await run(NPM, ['pack', '--json', '--pack-destination', tmp], ROOT);
  tarball = path.join(tmp, (JSON.parse(packed) as { filename: string }[])[0].filename);
  await run(NPM, ['install', '-g', '--prefix', path.join(tmp, 'prefix'), '--no-audit', '--no-fund', '--prefer-offline', tarball], tmp);
  bin = path.join(tmp, 'prefix', 'bin', 'slotproxy');
  nodes = await StandaloneNodes.start(1);
}, 300_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await nodes?.stop();
  if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
}, 30_000);

/** Starts the installed binary; resolves with its stdout banner once it serves, and the stderr so far. */
function startInstalled(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; banner: string; stderr: () => string }> {
  const config = path.join(tmp, 'ring.yaml');
  fs.writeFileSync(config, `listen: 127.0.0.1:0\nmode: ring\nring:\n  nodes:\n    - { name: a, addr: ${nodes!.addresses[0]}, weight: 1 }\nmetrics:\n  listen: 127.0.0.1:0\n`);
  const child = spawn(bin, ['start', '-c', config], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within 20 s; stderr: ${stderr}`)), 20_000);
    child.on('exit', (code) => reject(new Error(`slotproxy exited with ${String(code)}: ${stderr}`)));
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!/\/metrics\n/.test(stdout)) return;
      clearTimeout(timer);
      resolve({ child, banner: stdout, stderr: () => stderr });
    });
  });
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}

test('the tarball carries the built program, its example configs, README, docs/ and BENCHMARKS.md, and no tests, bench or CI script', async () => {
  const listing = await run('tar', ['tzf', tarball], tmp);
  const files = listing.trim().split('\n').map((f) => f.replace(/^package\//, ''));
  expect(files).toContain('dist/cmd/slotproxy.js');
  expect(files).toContain('dist/proxy/commands/fallback-table.json');
  // The console's page, served from the package (no CDN).
  for (const f of ['index.html', 'console.js', 'chart.js', 'console.css']) expect(files).toContain(`dist/proxy/console/page/${f}`);
  expect(files).toContain('config/examples/cluster.yaml');
  // README links every docs page and BENCHMARKS.md, so the installed copy's links work too.
  const pages = fs.readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`);
  expect(pages).toContain('docs/replacing-twemproxy.md');
  expect(files).toEqual(expect.arrayContaining(['README.md', 'BENCHMARKS.md', ...pages]));
  expect(files.filter((f) => /^(test|bench|scripts|\.ci|dist\/bench|dist\/test)\//.test(f) || f.endsWith('.ts') || f.endsWith('.map'))).toEqual([]);
});

test('the installed slotproxy needs no build tools: TypeScript is not installed with it', () => {
  const installed = path.join(tmp, 'prefix', 'lib', 'node_modules', 'slotproxy');
  expect(fs.existsSync(path.join(installed, 'dist', 'cmd', 'slotproxy.js'))).toBe(true);
  expect(fs.existsSync(path.join(installed, 'node_modules', 'typescript'))).toBe(false);
});

test('the installed binary serves, says where it listens and where /metrics is, and logs JSON off a terminal', async () => {
  const { child, banner, stderr } = await startInstalled({ SLOTPROXY_LOG_FORMAT: '' });
  const m = /^slotproxy \d+\.\d+\.\d+ listening on 127\.0\.0\.1:(\d+) \(ring mode\)\nmetrics at http:\/\/127\.0\.0\.1:(\d+)\/metrics\n$/.exec(banner);
  expect(m).not.toBeNull();
  const c = new Redis({ port: Number(m![1]), lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await c.connect();
    expect(await c.set('installed', 'yes')).toBe('OK');
    expect(await c.get('installed')).toBe('yes');
  } finally {
    c.disconnect();
  }
  const scrape = await fetch(`http://127.0.0.1:${m![2]}/metrics`);
  expect(await scrape.text()).toContain('slotproxy_connected_clients');
  expect(await stop(child)).toBe(0);
  const lines = stderr().trim().split('\n');
  for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
  expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain('slotproxy is listening');
});

test('with SLOTPROXY_LOG_FORMAT=pretty (what a terminal gets) the log is human-readable lines', async () => {
  const { child, stderr } = await startInstalled({ SLOTPROXY_LOG_FORMAT: 'pretty', NO_COLOR: '1' });
  expect(await stop(child)).toBe(0);
  expect(stderr()).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(slotproxy\): slotproxy is listening$/m);
  expect(stderr()).not.toMatch(/^\{"level"/m);
});
