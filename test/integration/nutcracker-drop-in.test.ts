// slotproxy as a drop-in for nutcracker, on real processes (dist/, built by `npm test`): one
// `slotproxy start -c nutcracker.yml` serves every pool of a three-pool file (ketama, modula,
// random), each on its listen, beside a real nutcracker serving the same file over the same nodes:
// keys where nutcracker puts them, random spread by both, the same answers to MGET, MSET, DEL,
// UNLINK, TOUCH over several servers; SIGHUP reloads each pool and refuses an added one; SIGTERM
// stops them all with exit 0. `slotproxy nutcracker` takes nutcracker's flags: -t (nutcracker's
// line, for files nutcracker accepts and refuses; check-config agrees), -p (pid file written and
// removed), -D, -d, and the stats flags' warning.
import { SpawnSyncReturns, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { freePorts } from '../../cmd/sandbox/ports';
import { sendCommand } from '../../cmd/sandbox/resp-client';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { BIN, ProxyProcess } from '../helpers/cli';
import { Ring } from '../../sharding/ring';
import { Nutcracker } from './ring-nutcracker';
import { useNutcrackerEnv } from '../helpers/nutcracker-env';

const KEYS = 300;

const env = useNutcrackerEnv('slotproxy-nc-drop-in-');

function client(port: number): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 5000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null });
  env.keep(c);
  return c;
}

/**
 * Three pools over the same two nodes, placed differently: alpha ketama/fnv1a_64 with named,
 * weighted servers; beta modula/murmur with a hash tag; gamma random. `extra` appends a pool.
 */
function threePools([alphaPort, betaPort, gammaPort]: number[], extra = ''): string {
  const [a, b] = env.nodes().addresses;
  return [
    'alpha:',
    `  listen: 127.0.0.1:${alphaPort}`,
    '  hash: fnv1a_64',
    '  distribution: ketama',
    '  redis: true',
    '  servers:',
    `   - ${a}:1 first`,
    `   - ${b}:3 second`,
    'beta:',
    `  listen: 127.0.0.1:${betaPort}`,
    '  hash: murmur',
    '  distribution: modula',
    '  hash_tag: "{}"',
    '  redis: true',
    '  servers:',
    `   - ${a}:1`,
    `   - ${b}:1`,
    'gamma:',
    `  listen: 127.0.0.1:${gammaPort}`,
    '  distribution: random',
    '  redis: true',
    '  servers:',
    `   - ${a}:1`,
    `   - ${b}:1`,
    extra,
  ].join('\n');
}

const write = (name: string, text: string): string => env.write(name, text);

function keys(prefix: string): string[] {
  return Array.from({ length: KEYS }, (_, i) => (i % 5 === 0 ? `${prefix}:{tag${i % 17}}:${i}` : `${prefix}:${i}`));
}

async function writeAll(c: Redis, ks: string[]): Promise<void> {
  const results = (await ks.reduce((p, k) => p.set(k, `v-${k}`), c.pipeline()).exec()) ?? [];
  for (const [err] of results) if (err !== null) throw err;
}

/** The keys whose value does not come back through `c`. */
async function missing(c: Redis, ks: string[]): Promise<string[]> {
  const results = (await ks.reduce((p, k) => p.get(k), c.pipeline()).exec()) ?? [];
  return ks.filter((k, i) => results[i][1] !== `v-${k}`);
}

/** How many of `ks` each node holds, read on the nodes themselves. */
async function perNode(ks: string[]): Promise<number[]> {
  return Promise.all(
    env.nodes().addresses.map(async (addr) => {
      const n = client(Number(addr.split(':')[1]));
      const results = (await ks.reduce((p, k) => p.exists(k), n.pipeline()).exec()) ?? [];
      return results.filter(([, v]) => v === 1).length;
    }),
  );
}

/** Resolves true when something accepts a connection on `port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

/** `slotproxy ARGS...` to its end (for the flags that exit at once). */
function runToEnd(args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [...NODE_FLAGS, BIN, ...args], { encoding: 'utf8', timeout: 30_000 });
}

/** Each node's DBSIZE. */
function sizes(): Promise<number[]> {
  return Promise.all(env.nodes().nodes.map(async (n) => Number(await n.command('DBSIZE'))));
}

/** MGET, MSET, DEL, UNLINK, TOUCH, EXISTS over `ks` (on several servers) through `c`: every answer. */
async function multiKey(c: Redis, ks: string[]): Promise<unknown[]> {
  const script: string[][] = [
    ['MSET', ...ks.flatMap((k, i) => [k, `v${i}`])],
    ['MGET', ...ks, 'multi:none'],
    ['TOUCH', ...ks, 'multi:none'],
    ['EXISTS', ...ks, 'multi:none', ks[0]],
    ['DEL', ...ks.slice(0, 4), 'multi:none'],
    ['UNLINK', ...ks.slice(4)],
    ['MGET', ...ks],
  ];
  const replies: unknown[] = [];
  for (const [name, ...args] of script) {
    replies.push(await c.call(name, ...args).catch((err: Error) => `error: ${err.message}`));
    // Where MSET put them, read on the nodes.
    if (name === 'MSET') replies.push(await perNode(ks));
  }
  return replies;
}

test('start -c nutcracker.yml: every pool from one process, beside nutcracker serving the same file: keys placed alike, random spread, multi-key answers alike; SIGHUP reloads each, refuses an added pool; SIGTERM stops all, exit 0', async () => {
  await Promise.all(env.nodes().nodes.map((n) => n.command('FLUSHALL')));
  const [alphaPort, betaPort, gammaPort, ncAlpha, ncBeta, ncGamma, ncStats, deltaPort] = await freePorts(8);
  const file = write('nutcracker.yml', threePools([alphaPort, betaPort, gammaPort]));
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000, 3);
  // One banner line per pool, once all serve.
  for (let i = 0; i < 100 && proxy.out.split('\n').length < 4; i++) await new Promise((r) => setTimeout(r, 20));
  expect(proxy.out).toContain(`listening on 127.0.0.1:${alphaPort} (ring mode, twemproxy pool alpha)`);
  expect(proxy.out).toContain(`listening on 127.0.0.1:${betaPort} (ring mode, twemproxy pool beta)`);
  expect(proxy.out).toContain(`listening on 127.0.0.1:${gammaPort} (ring mode, twemproxy pool gamma)`);

  // The same file, only its listens changed (both cannot listen on one port).
  const ncFile = write('nutcracker-real.yml', threePools([ncAlpha, ncBeta, ncGamma]));
  expect(fs.readFileSync(ncFile, 'utf8').replace(/listen: .*/g, '')).toBe(fs.readFileSync(file, 'utf8').replace(/listen: .*/g, ''));
  const nc = await env.startNutcracker(['-c', ncFile], [ncAlpha, ncBeta, ncGamma], ncStats);
  const pools = [
    { name: 'alpha', ours: client(alphaPort), theirs: client(ncAlpha) },
    { name: 'beta', ours: client(betaPort), theirs: client(ncBeta) },
  ];
  for (const { name, ours, theirs } of pools) {
    // Written through nutcracker, read through slotproxy; and the other way round.
    const viaNutcracker = keys(`${name}-nc`);
    await writeAll(theirs, viaNutcracker);
    expect(await missing(ours, viaNutcracker)).toEqual([]);
    const viaSlotproxy = keys(`${name}-sp`);
    await writeAll(ours, viaSlotproxy);
    expect(await missing(theirs, viaSlotproxy)).toEqual([]);
    // Both nodes hold some: a placement that put everything on one node would not prove much.
    const counts = await perNode([...viaNutcracker, ...viaSlotproxy]);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(2 * KEYS);
    for (const n of counts) expect(n).toBeGreaterThan(20);
  }
  // The two pools place the same keys differently (else reading through the wrong one would pass).
  expect(await missing(pools[1].ours, keys('alpha-nc'))).not.toEqual([]);

  // random: each write to either server, in both (about half each).
  for (const [port, name] of [[ncGamma, 'gamma-nc'], [gammaPort, 'gamma-sp']] as const) {
    const before = await sizes();
    await writeAll(client(port), keys(name));
    const added = (await sizes()).map((n, i) => n - before[i]);
    expect(added[0] + added[1]).toBe(KEYS);
    for (const n of added) expect(n).toBeGreaterThan(KEYS / 4);
  }

  // Multi-key commands over keys on both of alpha's servers: the same answers, but EXISTS, which
  // nutcracker 0.5.0 sends whole to its first key's server and slotproxy splits (answering as one Redis).
  const [a, b] = env.nodes().addresses;
  const alphaRing = new Ring({ hash: 'fnv1a_64', hashTag: '', nodes: [{ addr: a, weight: 1, name: 'first' }, { addr: b, weight: 3, name: 'second' }] });
  const multi: string[] = [];
  const onEach = [0, 0];
  for (let i = 0; multi.length < 10; i++) {
    const node = alphaRing.indexOf(Buffer.from(`multi:${i}`));
    if (onEach[node]++ < 5) multi.push(`multi:${i}`);
  }
  const fromNutcracker = await multiKey(pools[0].theirs, multi);
  expect(fromNutcracker[1]).toEqual([5, 5]);
  expect(fromNutcracker.slice(2, 4)).toEqual([[...multi.map((_, i) => `v${i}`), null], 10]);
  const fromSlotproxy = await multiKey(pools[0].ours, multi);
  const EXISTS = 4;
  expect(fromSlotproxy.filter((_, i) => i !== EXISTS)).toEqual(fromNutcracker.filter((_, i) => i !== EXISTS));
  expect(fromSlotproxy[EXISTS]).toBe(11);
  await nc.stop();

  // SIGHUP: each pool reloads; a pool added to the file is refused with a log line, not started.
  fs.writeFileSync(file, threePools([alphaPort, betaPort, gammaPort], ['delta:', `  listen: 127.0.0.1:${deltaPort}`, '  redis: true', '  servers:', `   - ${env.nodes().addresses[0]}:1`, ''].join('\n')));
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/"pool":"delta"[^\n]*a pool added to the file is not started/);
  for (const pool of ['alpha', 'beta', 'gamma']) await proxy.waitForLog(new RegExp(`"pool":"${pool}"[^\\n]*configuration reloaded`));
  expect(await accepts(deltaPort)).toBe(false);
  expect(await pools[0].ours.ping()).toBe('PONG');

  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
  for (const port of [alphaPort, betaPort, gammaPort]) expect(await accepts(port)).toBe(false);
}, 90_000);

/** `nutcracker -t -c file` (the real one): exit code and stderr. */
function nutcrackerTest(file: string): { status: number | null; stderr: string } {
  const r = spawnSync(Nutcracker.bin(), ['-t', '-c', file], { encoding: 'utf8', timeout: 10_000 });
  return { status: r.status, stderr: r.stderr };
}

test('nutcracker -t prints nutcracker\'s line (ok: exit 0; invalid: exit 1, then why, naming the pool and field) for the files nutcracker accepts and refuses; check-config takes a nutcracker.yml', () => {
  const ok = write('ok.yml', threePools([22121, 22122, 22123]));
  const good = runToEnd(['nutcracker', '-c', ok, '-t']);
  expect({ status: good.status, stderr: good.stderr }).toEqual(nutcrackerTest(ok));
  expect(good.stderr).toBe(`nutcracker: configuration file '${ok}' syntax is ok\n`);
  // Quoted numbers and booleans are as good as plain ones to nutcracker (its scalars are text).
  const quoted = write('quoted.yml', threePools([22121, 22122, 22123]).replace('  redis: true', '  redis: "true"\n  timeout: "400"\n  tcpkeepalive: true\n  preconnect: false'));
  expect(nutcrackerTest(quoted).status).toBe(0);
  expect(runToEnd(['nutcracker', '-c', quoted, '-t']).status).toBe(0);

  const invalid: [string, string, string][] = [
    ['hash', threePools([22121, 22122, 22123]).replace('hash: murmur', 'hash: nope'), 'pool beta: unknown hash nope'],
    ['field', threePools([22121, 22122, 22123]).replace('  hash: murmur', '  hash: murmur\n  hashes: md5'), 'pool beta: unknown field hashes'],
    ['listen', threePools([22121, 22122, 22121]), 'pool gamma: listen 127.0.0.1:22121 is pool alpha\'s too'],
    ['timeout', threePools([22121, 22122, 22123]).replace('  hash: murmur', '  hash: murmur\n  timeout: soon'), 'pool beta: timeout: expected a whole number of at least 0, got "soon"'],
    ['eject', threePools([22121, 22122, 22123]).replace('  hash: murmur', '  hash: murmur\n  auto_eject_hosts: yes'), 'pool beta: auto_eject_hosts: expected true or false, got "yes"'],
    ['servers', threePools([22121, 22122, 22123]).replace(/gamma:[^]*$/, 'gamma:\n  listen: 127.0.0.1:22123\n  redis: true\n'), 'pool gamma: servers must be a non-empty list'],
    ['weight', threePools([22121, 22122, 22123]).replace(':3 second', ':0 second'), 'pool alpha: server'],
  ];
  for (const [name, text, why] of invalid) {
    const file = write(`bad-${name}.yml`, text);
    const theirs = nutcrackerTest(file);
    expect({ name, status: theirs.status }).toEqual({ name, status: 1 });
    const ours = runToEnd(['nutcracker', '--conf-file', file, '--test-conf']);
    expect({ name, status: ours.status }).toEqual({ name, status: 1 });
    // nutcracker's line first (nutcracker itself says nothing more), then slotproxy's reason.
    const [line, reason] = ours.stderr.split('\n');
    expect(line).toBe(theirs.stderr.split('\n')[0]);
    expect(line).toBe(`nutcracker: configuration file '${file}' syntax is invalid`);
    expect(reason).toContain(why);
    // check-config: the same reason, exit 2 (two cases: each run starts a Node process).
    if (name !== 'field' && name !== 'listen') continue;
    const checked = runToEnd(['check-config', file]);
    expect({ name, status: checked.status }).toEqual({ name, status: 2 });
    expect(checked.stderr).toContain(why);
  }

  const gone = path.join(env.dir(), 'missing.yml');
  const none = runToEnd(['nutcracker', '-c', gone, '-t']);
  expect(none.status).toBe(1);
  expect(none.stderr).toBe(`${nutcrackerTest(gone).stderr.split('\n')[0]}\n  ${gone}: no such file\n`);

  const checked = runToEnd(['check-config', ok]);
  expect(checked.status).toBe(0);
  expect(checked.stdout).toBe([
    `${ok}: pool alpha OK (mode ring, 2 ring node(s), listen 127.0.0.1:22121)`,
    `${ok}: pool beta OK (mode ring (modula), 2 ring node(s), listen 127.0.0.1:22122)`,
    `${ok}: pool gamma OK (mode ring (random), 2 ring node(s), listen 127.0.0.1:22123)`,
    '',
  ].join('\n'));
}, 60_000);

test('nutcracker -D describes the stats with a note; -V names slotproxy', () => {
  const d = runToEnd(['nutcracker', '-D']);
  expect(d.status).toBe(0);
  expect(d.stdout).toMatch(/^pool stats:\n {2}client_eof {10}"# eof on client connections"\n/);
  expect(d.stdout).toContain('  out_queue_bytes     "current request bytes in outgoing queue"\n');
  expect(d.stdout).toContain('slotproxy serves these on its stats port with -s/-a');

  expect(runToEnd(['nutcracker', '-V']).stdout).toMatch(/^slotproxy \d+\.\d+\.\d+ \(nutcracker's flags\)\n$/);
}, 60_000);

test('nutcracker -c -p -o -v -s -a -m: pid file written and removed, logs in the file at the level, one -m warning, stats served; SIGTERM exits 0', async () => {
  const [alphaPort, betaPort, gammaPort, statsPort] = await freePorts(4);
  const file = write('served.yml', threePools([alphaPort, betaPort, gammaPort]));
  const pidFile = path.join(env.dir(), 'nutcracker.pid');
  const logFile = path.join(env.dir(), 'served.log');
  const proxy = ProxyProcess.run(['nutcracker', '-c', file, '-p', pidFile, '-o', logFile, '-v', '4', '-s', String(statsPort), '-a', '127.0.0.1', '-m', '512']);
  for (let i = 0; i < 1500 && !/nutcracker stats at/.test(proxy.out); i++) {
    if (!proxy.running) throw new Error(`exited: ${proxy.log}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(proxy.out).toMatch(/pool beta/);
  expect(fs.readFileSync(pidFile, 'utf8')).toBe(`${proxy.pid}\n`);
  expect(proxy.out).toContain(`nutcracker stats at 127.0.0.1:${statsPort}\n`);
  // The only stderr line: the -m warning (logs go to the file).
  expect(proxy.log).toBe('slotproxy nutcracker: warning: -m 512 accepted but not used: slotproxy has no mbufs\n');
  const stats = JSON.parse(await new Promise<string>((resolve, reject) => {
    let text = '';
    net.connect(statsPort, '127.0.0.1').on('data', (d: Buffer) => (text += d.toString())).on('end', () => resolve(text)).on('error', reject);
  })) as Record<string, unknown>;
  expect(Object.keys(stats)).toEqual(['service', 'source', 'version', 'uptime', 'timestamp', 'total_connections', 'curr_connections', 'alpha', 'beta', 'gamma']);
  const c = client(betaPort);
  expect(await c.set('k', 'v')).toBe('OK');
  expect(await client(alphaPort).ping()).toBe('PONG');
  // -v 4 is nutcracker's LOG_WARN: the info lines of the start are not written; SIGTTIN steps to info.
  proxy.kill('SIGTTIN');
  for (let i = 0; i < 500 && !/log level raised to info/.test(fs.readFileSync(logFile, 'utf8')); i++) await new Promise((r) => setTimeout(r, 20));
  const logged = fs.readFileSync(logFile, 'utf8');
  expect(logged).toMatch(/"level":30,[^\n]*"msg":"log level raised to info"/);
  expect(logged).not.toContain('slotproxy is listening');

  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
  expect(fs.existsSync(pidFile)).toBe(false);
}, 60_000);

/** Daemons started by the -d test, killed in afterAll if a test failed before stopping them. */
const daemons: number[] = [];
afterAll(() => {
  for (const pid of daemons) if (alive(pid)) process.kill(pid, 'SIGKILL');
});

/** Whether `pid` runs (a zombie, exited but not yet reaped by whoever adopted it, does not). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('nutcracker -d: returns once the daemon serves, printing nothing; the pid file holds the daemon\'s pid; SIGTERM stops it; also with --workers 2. A daemon that cannot start: its error, exit 1', async () => {
  const ports = await freePorts(3);
  const file = write('daemon.yml', threePools(ports));
  const pidFile = path.join(env.dir(), 'daemon.pid');
  const logFile = path.join(env.dir(), 'daemon.log');
  const started = runToEnd(['nutcracker', '-d', '-c', file, '-p', pidFile, '-o', logFile, '-m', '512']);
  expect({ status: started.status, stdout: started.stdout, stderr: started.stderr }).toEqual({ status: 0, stdout: '', stderr: '' });
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  daemons.push(pid);
  expect(pid).not.toBe(started.pid);
  expect(alive(pid)).toBe(true);
  // Serving by the time the command returned: no wait.
  for (const port of ports) expect(await sendCommand(port, ['PING'])).toBe('PONG');
  const log = fs.readFileSync(logFile, 'utf8');
  expect(log).toMatch(/slotproxy is listening/);
  expect(log).toContain('-m 512 accepted but not used');
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 500 && alive(pid); i++) await new Promise((r) => setTimeout(r, 20));
  expect(alive(pid)).toBe(false);
  expect(fs.existsSync(pidFile)).toBe(false);
  for (const port of ports) expect(await accepts(port)).toBe(false);

  // With --workers 2: the pid file holds the daemon's (the primary's) pid, the -m warning is written
  // once, both workers serve before the command returns.
  const workersLog = path.join(env.dir(), 'daemon-workers.log');
  const withWorkers = runToEnd(['nutcracker', '-d', '--workers', '2', '-c', file, '-p', pidFile, '-o', workersLog, '-m', '512']);
  expect({ status: withWorkers.status, stderr: withWorkers.stderr }).toEqual({ status: 0, stderr: '' });
  const primary = Number(fs.readFileSync(pidFile, 'utf8'));
  daemons.push(primary);
  for (const port of ports) expect(await sendCommand(port, ['PING'])).toBe('PONG');
  const workersLogged = fs.readFileSync(workersLog, 'utf8');
  expect(workersLogged.match(/slotproxy is listening/g)).toHaveLength(2 * ports.length);
  expect(workersLogged.match(/-m 512 accepted/g)).toHaveLength(1);
  expect(workersLogged).not.toMatch(/a worker died/);
  process.kill(primary, 'SIGTERM');
  for (let i = 0; i < 500 && alive(primary); i++) await new Promise((r) => setTimeout(r, 20));
  expect(alive(primary)).toBe(false);
  expect(fs.existsSync(pidFile)).toBe(false);
  for (const port of ports) expect(await accepts(port)).toBe(false);

  // A pool's listen already taken: the daemon's error, printed by the command, which exits 1.
  const taken = net.createServer().listen(ports[1], '127.0.0.1');
  try {
    await new Promise((r) => taken.once('listening', r));
    const refused = runToEnd(['nutcracker', '-d', '-c', file, '-p', pidFile]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toBe(`slotproxy: listen EADDRINUSE: address already in use 127.0.0.1:${ports[1]}\n`);
    expect(fs.existsSync(pidFile)).toBe(false);
    // A bad file: exit 2, as in the foreground.
    const bad = runToEnd(['nutcracker', '-d', '-c', path.join(env.dir(), 'missing.yml')]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('missing.yml: no such file');
  } finally {
    taken.close();
  }
}, 60_000);
