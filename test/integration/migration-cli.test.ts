// The migration from the command line: `slotproxy migrate status|verify|copy|cleanup -c FILE`
// against real nodes, and a running `slotproxy start` switched between phases by SIGHUP (a bad
// migration block is refused and the running phase stays). Once per carry: the change feeds (the
// copy walks side A with saved cursors) and replication (the copy is each node's full sync, run
// by the proxy that follows it; `migrate copy` asks for or watches it).
import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freePort } from '../../cmd/sandbox/ports';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { Ring } from '../../sharding/ring';

const BIN = path.resolve(__dirname, '..', '..', 'dist', 'cmd', 'slotproxy.js');
const KEYS = 2000;

describe.each(['feeds', 'replication'] as const)('carry %s', (carry) => {

let nodes: StandaloneNodes | undefined;
let dir: string;
let file: string;
let port: number;
let metricsPort: number;
let proxy: ChildProcess | undefined;
let client: Redis | undefined;
let proxyLog = '';

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr, ms: Date.now() - started });
    });
  });
}

function writeConfig(phaseLine: string): void {
  const [a, b, c] = nodes!.addresses;
  fs.writeFileSync(file, [
    `listen: 127.0.0.1:${port}`, 'mode: ring', 'metrics:', `  listen: 127.0.0.1:${metricsPort}`, 'log:', '  level: info', 'ring:', '  hash: murmur', '  nodes:',
    `    - { name: a, addr: "${a}" }`, `    - { name: b, addr: "${b}" }`,
    'migration:', `  ${phaseLine}`, `  carry: ${carry}`, '  to:', '    nodes:',
    `      - { name: a, addr: "${a}" }`, `      - { name: b, addr: "${b}" }`, `      - { name: c, addr: "${c}" }`, '',
  ].join('\n'));
}

async function status(): Promise<string> {
  return String(await client!.call('PROXY', 'MIGRATION', 'STATUS'));
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` (npm test does)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-migrate-'));
  file = path.join(dir, 'migration.yaml');
  nodes = await StandaloneNodes.start(3);
  port = await freePort();
  metricsPort = await freePort();
  writeConfig('phase: double-write');
  // The data set before the migration, on ring A's nodes.
  const ringA = new Ring({ hash: 'murmur', hashTag: '{}', nodes: nodes.addresses.slice(0, 2).map((addr, i) => ({ name: 'ab'[i], addr, weight: 1 })) });
  const direct = nodes.nodes.slice(0, 2).map((n) => new Redis({ port: n.port, host: '127.0.0.1', disableClientInfo: true }));
  try {
    const pipes = direct.map((c) => c.pipeline());
    for (let i = 0; i < KEYS; i++) {
      const key = `k:${i}`;
      const idx = ringA.indexOf(Buffer.from(key));
      if (i % 4 === 0) pipes[idx].set(key, String(i), 'PX', 600_000);
      else pipes[idx].rpush(key, 'x', String(i));
    }
    for (const p of pipes) await p.exec();
  } finally {
    for (const c of direct) c.disconnect();
  }
  // A node starts a full sync at once (not 5 s after the request, Redis's default): the suite's time only.
  for (const n of nodes.nodes.slice(0, 2)) {
    const c = new Redis({ port: n.port, host: '127.0.0.1', disableClientInfo: true });
    await c.config('SET', 'repl-diskless-sync-delay', '0').finally(() => c.disconnect());
  }
  proxy = spawn(process.execPath, [...NODE_FLAGS, BIN, 'start', '-c', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    proxy!.stderr?.on('data', (d: Buffer) => {
      proxyLog += d.toString();
    });
    // The banner on stdout comes once clients and /metrics are both served.
    let banner = '';
    proxy!.stdout?.on('data', (d: Buffer) => {
      banner += d.toString();
      if (banner.includes('metrics at http')) resolve();
    });
    proxy!.on('exit', (code) => reject(new Error(`slotproxy exited with ${code}:\n${proxyLog}`)));
  });
  client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, disableClientInfo: true });
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  if (proxy !== undefined && proxy.exitCode === null) {
    const exited = new Promise((r) => proxy!.on('exit', r));
    proxy.kill('SIGTERM');
    await exited;
  }
  await nodes?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

/** One sample of the proxy's /metrics, e.g. `slotproxy_migration_copy_nodes{state="done"}`. */
async function metric(series: string): Promise<number | null> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

/** INFO's `migration_follow_full_syncs` of the proxy: full syncs its followers began. */
async function fullSyncs(): Promise<number> {
  return Number(/^migration_follow_full_syncs:(\d+)/m.exec(String(await client!.info()))?.[1] ?? NaN);
}

/** A list key of ring A that moves to ring B's new node c. */
function movingKey(): string {
  const [a, b, c] = nodes!.addresses;
  // Ring B's third node is new: every key it owns moves there.
  const ringA = new Ring({ hash: 'murmur', hashTag: '{}', nodes: [a, b].map((addr, i) => ({ name: 'ab'[i], addr, weight: 1 })) });
  const ringB = new Ring({ hash: 'murmur', hashTag: '{}', nodes: [a, b, c].map((addr, i) => ({ name: 'abc'[i], addr, weight: 1 })) });
  for (let i = 1; i < KEYS; i += 4) if (ringB.indexOf(Buffer.from(`k:${i}`)) === 2 && ringA.indexOf(Buffer.from(`k:${i}`)) >= 0) return `k:${i}`;
  throw new Error('no key moves to c');
}

test('status before the copy: phase, both rings, copy not started', async () => {
  if (carry === 'replication') {
    // The history copy is each node's full sync, begun as soon as the proxy follows the node.
    await until('both full syncs restored', async () => (await metric('slotproxy_migration_copy_nodes{state="done"}')) === 2);
    expect(await metric('slotproxy_migration_copied_keys')).toBeGreaterThan(KEYS / 5);
  } else {
    expect(await metric('slotproxy_migration_copied_keys')).toBe(0);
    expect(await metric('slotproxy_migration_copy_nodes{state="done"}')).toBe(0);
  }
  expect(await metric('slotproxy_migration_copy_nodes{state="total"}')).toBe(2);
  // One change feed per node of ring A, all covered.
  expect(await metric('slotproxy_migration_feeds{state="total"}')).toBe(2);
  expect(await metric('slotproxy_migration_feeds{state="uncovered"}')).toBe(0);
  // The fleet record is rewritten on the proxy's registration tick: a follow that just went live shows at the next one.
  let r = await run(['migrate', 'status', '-c', file]);
  if (carry === 'replication') {
    await until('the fleet record saying every follow is live', async () => {
      r = await run(['migrate', 'status', '-c', file]);
      return r.stdout.includes('    change feeds: all live');
    });
  }
  expect(r.code).toBe(0);
  expect(r.stdout).toContain('phase: double-write');
  expect(r.stdout).toContain('    change feeds: all live');
  if (carry === 'replication') {
    expect(r.stdout).toMatch(/ring A \(murmur\):\n {2}a .* full sync done \(\d+ of \d+ keys read, [1-9]\d* restored on side B/);
    expect(r.stdout).toMatch(/replication carry \(side A followed as replicas\):\n {2}\S+: full sync done/);
  } else expect(r.stdout).toMatch(/ring A \(murmur\):\n {2}a .* copy not started/);
  expect(r.stdout).toMatch(/ring B \(murmur\):[\s\S]* c .*: \d+ keys/);
  if (carry === 'feeds') expect(r.stdout).toMatch(/ring B \(murmur\):[\s\S]* c .*: 0 keys/);
});

test('verify finds the keys not copied yet, and exits 1', async () => {
  if (carry === 'replication') {
    // Everything is copied already: a moving key changed straight on its B node is what differs.
    const key = movingKey();
    const c = new Redis({ port: nodes!.nodes[2].port, host: '127.0.0.1', disableClientInfo: true });
    try {
      await c.set(key, 'changed behind the migration');
    } finally {
      c.disconnect();
    }
    const r = await run(['migrate', 'verify', '-c', file, '--show', '3']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(new RegExp(`differs: ${key}: type \\w+ in \\S+, string in \\S+ \\(B holds A's stream through offset \\d+, past offset \\d+, and A's key did not change between\\)`));
    expect(r.stdout.match(/differs:/g)).toHaveLength(1);
    expect(r.stdout).toMatch(/verify: \d+ moved keys compared, 1 differ/);
    return;
  }
  const r = await run(['migrate', 'verify', '-c', file, '--show', '3']);
  expect(r.code).toBe(1);
  expect(r.stdout).toMatch(/differs: k:\d+: missing in /);
  expect(r.stdout.match(/differs:/g)).toHaveLength(3);
  expect(r.stdout).toMatch(/verify: \d+ moved keys compared, [1-9]\d* differ/);
});

test('copy moves every moved key with its TTL, with progress lines when not on a terminal; a rerun resumes', async () => {
  if (carry === 'replication') {
    // --restart: a new full sync of each node, which puts B's moving keys back as A holds them.
    const before = await fullSyncs();
    const r = await run(['migrate', 'copy', '-c', file, '--restart']);
    expect(r.code).toBe(0);
    const m = /copy: the full syncs of side A are restored on side B: (\d+) of (\d+) keys read, (\d+) restored/.exec(r.stdout);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThanOrEqual(KEYS);
    expect(Number(m![3])).toBeGreaterThan(KEYS / 5);
    expect(r.stdout).toMatch(/^ {2}\S+: a new full sync asked for \(the last: full sync done/m);
    expect(r.stderr).toMatch(/^copy: 100% \d+\/\d+ keys, \d+ keys\/s, ETA 0s, \d+ restored on side B/m);
    expect(await fullSyncs()).toBe(before + 2);
    // A rerun starts nothing: it finds every full sync restored.
    const again = await run(['migrate', 'copy', '-c', file]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`copy: the full syncs of side A were restored on side B before this run (--restart runs new ones): ${m![1]} of ${m![2]} keys read, ${m![3]} restored`);
    expect(await fullSyncs()).toBe(before + 2);
    const verify = await run(['migrate', 'verify', '-c', file]);
    expect(verify.stdout).toMatch(/verify: [1-9]\d* moved keys compared, 0 differ/);
    expect(verify.code).toBe(0);
    const s = await run(['migrate', 'status', '-c', file]);
    expect(s.stdout).toMatch(/a .* full sync done \(\d+ of \d+ keys read, \d+ restored on side B/);
    // The proxy's /metrics follows the full syncs (read from ring A's nodes at scrape time).
    expect(await metric('slotproxy_migration_copied_keys')).toBe(Number(m![3]));
    expect(await metric('slotproxy_migration_copy_nodes{state="done"}')).toBe(2);
    return;
  }
  const r = await run(['migrate', 'copy', '-c', file]);
  expect(r.code).toBe(0);
  const m = /copy: (\d+) keys scanned, (\d+) copied/.exec(r.stdout);
  expect(m).not.toBeNull();
  expect(Number(m![1])).toBeGreaterThanOrEqual(KEYS);
  expect(Number(m![2])).toBeGreaterThan(KEYS / 5);
  expect(r.stderr).toMatch(/^copy: 100% \d+\/\d+ keys, \d+ keys\/s, ETA 0s/m);
  const again = await run(['migrate', 'copy', '-c', file]);
  expect(again.stdout).toContain('copy: 0 keys scanned, 0 copied');
  const verify = await run(['migrate', 'verify', '-c', file]);
  expect(verify.stdout).toMatch(/verify: [1-9]\d* moved keys compared, 0 differ/);
  expect(verify.code).toBe(0);
  const s = await run(['migrate', 'status', '-c', file]);
  expect(s.stdout).toMatch(/a .* copy done \(\d+ keys copied\)/);
  // The proxy's /metrics follows the copy (read from ring A's nodes at scrape time).
  expect(await metric('slotproxy_migration_copied_keys')).toBe(Number(m![2]));
  expect(await metric('slotproxy_migration_copy_nodes{state="done"}')).toBe(2);
}, 30_000);

test('copy resumes where an interrupted run stopped', async () => {
  const before = carry === 'replication' ? await fullSyncs() : 0;
  // Replication: restores capped low enough for the full syncs to be caught under way.
  const rate = carry === 'replication' ? '100' : '1500';
  const child = spawn(process.execPath, [BIN, 'migrate', 'copy', '-c', file, '--restart', '--rate', rate, '--batch', '100'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let progress = '';
  child.stderr?.on('data', (d: Buffer) => (progress += d.toString()));
  const exited = new Promise((r) => child.on('exit', r));
  // Interrupted (Ctrl-C) once it has made progress: the saved cursor survives.
  await until('some copy progress', async () => /copy: \d+% [1-9]\d*\//.test(progress));
  child.kill('SIGINT');
  await exited;
  const resumed = await run(['migrate', 'copy', '-c', file]);
  expect(resumed.code).toBe(0);
  if (carry === 'replication') {
    // The full syncs went on in the proxy: the rerun watched them to their end, starting none.
    expect(resumed.stdout).toMatch(/^ {2}\S+: full sync restoring \(/m);
    expect(resumed.stdout).toMatch(/copy: the full syncs of side A are restored on side B: \d+ of \d+ keys read, [1-9]\d* restored/);
    expect(await fullSyncs()).toBe(before + 2);
  } else {
    const scanned = Number(/copy: (\d+) keys scanned/.exec(resumed.stdout)?.[1]);
    expect(scanned).toBeGreaterThan(0);
    expect(scanned).toBeLessThan(KEYS);
  }
  const verify = await run(['migrate', 'verify', '-c', file]);
  expect(verify.code).toBe(0);
}, 30_000);

test('--rate caps keys per second', async () => {
  const r = await run(['migrate', 'copy', '-c', file, '--restart', '--rate', carry === 'replication' ? '500' : '2000']);
  expect(r.code).toBe(0);
  if (carry === 'replication') {
    // Restores on B capped at 500 keys/s: the moving keys' count over 500, never much less.
    const restored = Number(/, (\d+) restored, /.exec(r.stdout)?.[1]);
    expect(restored).toBeGreaterThan(KEYS / 5);
    expect(r.ms).toBeGreaterThan((restored / 500) * 1000 * 0.9);
    return;
  }
  // At least 2000 keys scanned at 2000 keys/s: about a second, never much less.
  expect(r.ms).toBeGreaterThan(900);
}, 30_000);

test('SIGHUP switches the phase without dropping clients; a bad migration block is refused and the phase stays', async () => {
  await client!.set('during:hup', '1');
  const id = await client!.client('ID');
  expect(await status()).toContain('phase:double-write');
  writeConfig('phase: read-new');
  proxy!.kill('SIGHUP');
  await until('phase read-new', async () => (await status()).includes('phase:read-new'));
  expect(await client!.incr('during:hup')).toBe(2);
  expect(await client!.get('during:hup')).toBe('2');

  writeConfig('phase: sideways');
  const check = await run(['check-config', file]);
  expect(check.code).toBe(2);
  expect(check.stderr).toContain('migration.phase');
  proxy!.kill('SIGHUP');
  await until('the refusal in the log', async () => proxyLog.includes('reload refused'));
  expect(proxyLog).toContain('migration.phase');
  expect(await status()).toContain('phase:read-new');
  expect(await client!.get('during:hup')).toBe('2');
  // The same client connection throughout.
  expect(await client!.client('ID')).toBe(id);
}, 30_000);

test('cleanup refuses before done, then deletes the moved keys from their old owners', async () => {
  writeConfig('phase: read-new');
  const refused = await run(['migrate', 'cleanup', '-c', file]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('switch every proxy to done first');
  writeConfig('phase: done');
  // The file says done, the running proxy is still in read-new: the fleet, not the file, decides.
  const stillReading = await run(['migrate', 'cleanup', '-c', file]);
  expect(stillReading.code).toBe(1);
  expect(stillReading.stderr).toMatch(new RegExp(`refused: live proxies are not in done: \\S+ \\(127\\.0\\.0\\.1:${port}\\) in read-new`));
  expect(await client!.lrange('k:1', 0, -1)).toEqual(['x', '1']);
  // --force says what it skips.
  expect((await run(['migrate', 'cleanup', '--help'])).stdout.replace(/\s+/g, ' ')).toContain('--force skip both checks (the file says phase done; every live proxy of the fleet is in done)');
  proxy!.kill('SIGHUP');
  await until('phase done', async () => (await status()).includes('phase:done'));
  // B alone is written now, so it moves on from A: verify says A is closed and checks B instead.
  for (let i = 2; i < 200; i++) if (i % 4 !== 0) await client!.rpush(`k:${i}`, 'after done');
  const verify = await run(['migrate', 'verify', '-c', file]);
  expect(verify.stdout).toMatch(
    /verify: side A is closed \(phase done\): B alone takes writes, so its keys are no longer compared with A's; checked on B: [1-9]\d* moved keys of A, each with A's last state applied on B \(0 differ\), B fenced on 3 of 3 nodes\n/,
  );
  expect(verify.code).toBe(0);
  const r = await run(['migrate', 'cleanup', '-c', file]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/cleanup: [1-9]\d* moved keys deleted/);
  expect(await client!.dbsize()).toBe(KEYS + 1);
  expect(await client!.lrange('k:1', 0, -1)).toEqual(['x', '1']);
  expect(await client!.pttl('k:0')).toBeGreaterThan(500_000);
}, 30_000);
});
