// The walkthrough "From twemproxy to Redis Cluster" (docs/replacing-twemproxy.md), run as a user
// would type it: its shell block is read from that page and run one step at a time with bash (the
// `slotproxy` on PATH is the built binary, the ports replaced by free ones), while clients write,
// read and pop through the proxy between the steps. At the end the new cluster, through the restarted
// cluster-mode proxy, holds exactly what the clients were told.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freeClusterPorts, freePort } from '../../cmd/sandbox/ports';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { linkRedisTools } from '../../cmd/sandbox/executables';
import { BIN, tempDir } from '../helpers/cli';

const PAGE = path.resolve(__dirname, '..', '..', 'docs', 'replacing-twemproxy.md');

/** The walkthrough's steps: the shell block after its marker, split at its `# N.` comments. */
function walkthroughSteps(): string[] {
  const text = fs.readFileSync(PAGE, 'utf8');
  const at = text.indexOf('<!-- walkthrough:');
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at))?.[1];
  if (at < 0 || block === undefined) throw new Error('docs/replacing-twemproxy.md has no walkthrough block');
  return block.split(/\n(?=# \d+\.)/).map((s) => s.trim());
}

let pool: StandaloneNodes | undefined;
let dir = '';
let clusterPorts: number[] = [];
const clients: Redis[] = [];

/** The step's text with the page's ports replaced by this run's. */
function localized(step: string, ports: Map<string, string>): string {
  let out = step;
  for (const [from, to] of ports) out = out.replaceAll(from, to);
  return out;
}

function bash(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // PATH first: `slotproxy` is the built binary, run with the flags its shebang would pass, and
    // redis-server / redis-cli the build under test.
    const env = { ...process.env, PATH: `${dir}/bin:${process.env.PATH ?? ''}` };
    execFile('bash', ['-e', '-o', 'pipefail', '-c', script], { cwd: dir, env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  pool = await StandaloneNodes.start(2);
  dir = tempDir('slotproxy-walkthrough-');
  fs.mkdirSync(path.join(dir, 'bin'));
  linkRedisTools(path.join(dir, 'bin')); // the Redis build under test (SLOTPROXY_REDIS_BIN)
  fs.writeFileSync(path.join(dir, 'bin', 'slotproxy'), `#!/bin/sh\nexec "${process.execPath}" ${NODE_FLAGS.join(' ')} "${BIN}" "$@"\n`, { mode: 0o755 });
  clusterPorts = await freeClusterPorts(3);
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  // Whatever the walkthrough left running: the proxy, and the cluster's daemonized nodes.
  const pid = Number(fs.existsSync(path.join(dir, 'slotproxy.pid')) ? fs.readFileSync(path.join(dir, 'slotproxy.pid'), 'utf8') : NaN);
  if (Number.isInteger(pid)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await bash(clusterPorts.map((p) => `redis-cli -p ${p} shutdown nosave > /dev/null 2>&1 || true`).join('\n'));
  await pool?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

test('the walkthrough from a twemproxy pool to a Redis Cluster, under load', async () => {
  const steps = walkthroughSteps();
  expect(steps.map((s) => /^# (\d+)\./.exec(s)?.[1])).toEqual(['1', '2', '3', '4', '5']);
  const listen = await freePort();
  const [n1, n2] = pool!.addresses;
  const ports = new Map([
    ['22121', String(listen)],
    ['7001', String(clusterPorts[0])],
    ['7002', String(clusterPorts[1])],
    ['7003', String(clusterPorts[2])],
  ]);
  // The user's twemproxy config, as the walkthrough describes it.
  fs.writeFileSync(
    path.join(dir, 'nutcracker.yml'),
    ['alpha:', `  listen: 127.0.0.1:${listen}`, '  hash: fnv1a_64', '  hash_tag: "{}"', '  distribution: ketama', '  redis: true', '  servers:', `    - ${n1}:1 a`, `    - ${n2}:1 b`, ''].join('\n'),
  );
  const run = async (i: number): Promise<void> => {
    const r = await bash(localized(steps[i], ports));
    if (r.code !== 0) throw new Error(`step ${i + 1} failed (${r.code}):\n${r.stdout}\n${r.stderr}\n${fs.existsSync(path.join(dir, 'slotproxy.log')) ? fs.readFileSync(path.join(dir, 'slotproxy.log'), 'utf8') : ''}`);
  };
  const connect = (): Redis => {
    const c = new Redis({ host: '127.0.0.1', port: listen, maxRetriesPerRequest: 0, disableClientInfo: true });
    clients.push(c);
    return c;
  };
  const until = async (check: () => Promise<boolean>): Promise<void> => {
    for (let i = 0; i < 200 && !(await check().catch(() => false)); i++) await new Promise((r) => setTimeout(r, 50));
  };

  await run(0);
  const client = connect();
  await until(async () => (await client.ping()) === 'PONG');
  // What the pool held before: counters, lists, hashes, values with a TTL.
  const expected = new Map<string, string>();
  for (let i = 0; i < 300; i++) {
    await client.set(`user:${i}`, `name-${i}`);
    expected.set(`user:${i}`, `name-${i}`);
  }
  for (let i = 0; i < 50; i++) await client.rpush(`jobs:{q${i % 5}}`, `job-${i}`);
  await client.set('session:x', 'alive', 'EX', 3600);

  await run(1);
  await run(2);
  // Double-writing: writes of every kind, a transaction and a blocking pop.
  for (let i = 0; i < 100; i++) {
    await client.incr(`counter:${i % 10}`);
    await client.append(`user:${i}`, '!');
    expected.set(`user:${i}`, `name-${i}!`);
  }
  expect(await client.multi().incr('counter:0').incr('counter:0').exec()).toEqual([[null, 11], [null, 12]]);
  const popped = await client.blpop('jobs:{q0}', 1);
  expect(popped).toEqual(['jobs:{q0}', 'job-0']);

  await run(3);
  // Cluster only now (done): writes go there alone.
  await client.set('after:done', 'yes');
  expected.set('after:done', 'yes');
  await run(4);

  const fresh = connect();
  await until(async () => (await fresh.ping()) === 'PONG');
  const info = String(await fresh.info('proxy'));
  expect(info).toContain('proxy_mode:cluster');
  for (const [k, v] of expected) expect([k, await fresh.get(k)]).toEqual([k, v]);
  expect(await fresh.get('counter:0')).toBe('12');
  expect(await fresh.get('counter:9')).toBe('10');
  expect(await fresh.lrange('jobs:{q0}', 0, -1)).toEqual(['job-5', 'job-10', 'job-15', 'job-20', 'job-25', 'job-30', 'job-35', 'job-40', 'job-45']);
  expect(await fresh.ttl('session:x')).toBeGreaterThan(3500);
  // The pool's nodes were emptied by cleanup; the cluster holds no bookkeeping.
  for (const n of pool!.nodes) expect(await n.command('DBSIZE')).toBe(0);
  expect(await fresh.dbsize()).toBe(expected.size + 10 + 5 + 1);
  const leftovers = await bash(clusterPorts.map((p) => `redis-cli -p ${p} --scan --pattern '__slotproxy*'`).join('\n'));
  expect(leftovers.stdout).toBe('');
}, 180_000);
