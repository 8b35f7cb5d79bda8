// The tarball for hosts without the npm registry (scripts/pack-offline.sh): it carries its runtime
// dependencies, so `npm install -g --offline` of it, with an empty npm cache and a registry that
// cannot be reached, gives a slotproxy that runs `--version` and `check-config`.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const VERSION = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

let tmp = '';
let tarball = '';
let bin = '';
let install: { code: number; stdout: string; stderr: string } | undefined;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-offline-'));
  // --prebuilt: the suite has built dist/ (npm test builds before jest), so the pack does not again.
  const packed = await run('bash', [path.join(ROOT, 'scripts', 'pack-offline.sh'), '--prebuilt', tmp], ROOT);
  if (packed.code !== 0) throw new Error(`pack-offline.sh failed:\n${packed.stderr}`);
  tarball = packed.stdout.trim();
  // No registry (port 9 answers nothing) and an empty cache: whatever is not in the tarball fails.
  const offline = { npm_config_registry: 'http://127.0.0.1:9/', npm_config_cache: path.join(tmp, 'empty-cache') };
  install = await run('npm', ['install', '-g', '--offline', '--prefix', path.join(tmp, 'prefix'), '--no-audit', '--no-fund', tarball], tmp, offline);
  bin = path.join(tmp, 'prefix', 'bin', 'slotproxy');
}, 420_000);

afterAll(() => {
  if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
});

test('the offline tarball bundles the runtime dependencies and nothing for development', async () => {
  expect(path.basename(tarball)).toBe(`slotproxy-${VERSION}-offline.tgz`);
  const files = (await run('tar', ['tzf', tarball], tmp)).stdout.trim().split('\n');
  for (const dep of ['commander', 'pino', 'prom-client', 'redis-parser', 'valibot', 'yaml']) expect(files).toContain(`package/node_modules/${dep}/package.json`);
  expect(files).toContain('package/dist/cmd/slotproxy.js');
  expect(files.filter((f) => /^package\/node_modules\/(typescript|jest|ioredis|ts-jest)\//.test(f))).toEqual([]);
});

test('npm install --offline of it succeeds with no registry and an empty cache', () => {
  expect(install?.stderr).not.toMatch(/ENOTCACHED|ECONNREFUSED/);
  expect(install?.code).toBe(0);
});

test('the installed slotproxy prints its version and checks a config', async () => {
  const version = await run(bin, ['--version'], tmp);
  expect(version).toMatchObject({ code: 0, stdout: `${VERSION}\n` });
  const check = await run(bin, ['check-config', path.join(ROOT, 'config', 'examples', 'cluster.yaml')], tmp);
  expect(check.stdout).toMatch(/: OK \(mode cluster/);
  expect(check.code).toBe(0);
  fs.writeFileSync(path.join(tmp, 'bad.yaml'), 'mode: cluster\ncluster:\n  seeds: []\n');
  expect((await run(bin, ['check-config', path.join(tmp, 'bad.yaml')], tmp)).code).toBe(2);
});
