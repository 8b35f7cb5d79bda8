// Another language's client through slotproxy: redis-py from Debian's python3-redis (the setup
// script installs it), run by /usr/bin/python3 against a proxy in front of a real cluster.

import { execFile } from 'node:child_process';
import path from 'node:path';
import { useProxy } from '../helpers/proxy';

const PYTHON = '/usr/bin/python3';
const SCENARIOS = path.join(__dirname, 'redis-py', 'scenarios.py');

const { proxy } = useProxy();

function scenario(name: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(PYTHON, [SCENARIOS, String(proxy().address.port), name], { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

test('redis-py is installed (python3-redis)', async () => {
  const version = await new Promise<string>((resolve, reject) => {
    execFile(PYTHON, ['-c', 'import redis; print(redis.__version__)'], (err, stdout) => (err === null ? resolve(stdout.trim()) : reject(err)));
  });
  expect(version).toMatch(/^\d+\.\d+/);
});

test.each([
  ['pipeline', 'a 102-command pipeline across slots, replies in order'],
  ['watch', 'MULTI/EXEC with WATCH, and a WatchError when another client writes'],
  ['pubsub', 'SUBSCRIBE and PSUBSCRIBE, PUBLISH counting every subscriber, messages delivered'],
  ['script', 'register_script (EVALSHA with its fallback), after a SCRIPT FLUSH too'],
  ['blocking', 'BLPOP timing out, woken by a push, and not holding up other clients'],
])('%s: %s', async (name) => {
  const r = await scenario(name);
  expect(r.stderr).toBe('');
  expect(r.stdout).toBe(`ok ${name}\n`);
  expect(r.code).toBe(0);
});
