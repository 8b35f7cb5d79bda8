// nutcracker's signals on a real `slotproxy start` process (dist/, built by `npm test`): SIGTTIN and
// SIGTTOU step the log level, SIGUSR1 and SIGHUP reopen log.file after a logrotate-style rename,
// SIGUSR2 and SIGPIPE do nothing; none of them stops, freezes or kills the proxy, which answers PING
// after each and still drains on SIGTERM; each is logged in nutcracker's words (`signal 21 (SIGTTIN)
// received, up logging level`); SIGSEGV is not handled, so that a kill -SEGV and a real fault
// (real-fault.test.ts) end the process by it at once. Beside a real nutcracker over the same nodes, each signal
// sent under load loses no write in either. A ring node that is down answers with the OS's reason,
// as nutcracker's does, and a request the pool's timeout: cuts off says "timed out" in both.
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { freePort, freePorts } from '../../cmd/sandbox/ports';
import { Ring } from '../../sharding/ring';
import { ProxyProcess } from '../helpers/cli';
import { useNutcrackerEnv, waitForFile, waitForPing } from '../helpers/nutcracker-env';
import { WriteLoad } from '../helpers/write-load';

const env = useNutcrackerEnv('slotproxy-nc-signals-');
const loads: WriteLoad[] = [];

afterAll(() => {
  for (const l of loads) l.abandon();
});

/**
 * A client that gives up on a command after 2 s: a stopped (SIGTTIN-frozen) proxy fails the test
 * instead of hanging it. No ready check: its INFO goes to every ring node, a down one included.
 */
function client(port: number): Redis {
  return env.keep(new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 2000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null }));
}

function writeConfig(name: string, config: Record<string, unknown>): string {
  return env.write(name, JSON.stringify(config));
}

/** A JSON log line at pino's numeric `level` with message `msg` (plain text, not a pattern). */
function line(level: number, msg: string): RegExp {
  return new RegExp(`"level":${level},[^\\n]*"msg":"${msg.replace(/[()]/g, '\\$&')}"`);
}

/** nutcracker's words for a signal received (nc_signal.c), which slotproxy's log says too. */
function received(signal: NodeJS.Signals, action?: string): string {
  return `signal ${os.constants.signals[signal]} (${signal}) received${action === undefined ? '' : `, ${action}`}`;
}

test('TTIN/TTOU step the log level; USR1, USR2 and PIPE neither stop nor freeze the proxy; SIGTERM still drains', async () => {
  const port = await freePort();
  const file = writeConfig('stderr.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: env.nodes().addresses[0] }] }, log: { level: 'info' } });
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  const c = client(port);
  expect(await c.ping()).toBe('PONG');
  expect(proxy.log).not.toMatch(/"level":20,/);

  // info -> debug: the signal said, then the change, the first debug line.
  proxy.kill('SIGTTIN');
  await proxy.waitForLog(line(20, 'log level raised to debug'));
  expect(proxy.log).toMatch(line(30, received('SIGTTIN', 'up logging level')));
  expect(await c.ping()).toBe('PONG');

  // No log file: nothing to reopen, said as nutcracker says a signal it does nothing for.
  proxy.kill('SIGUSR1');
  await proxy.waitForLog(line(30, received('SIGUSR1')));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGUSR2');
  await proxy.waitForLog(line(30, received('SIGUSR2')));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGPIPE');
  expect(await c.ping()).toBe('PONG');
  expect(proxy.running).toBe(true);

  // debug -> info -> warn, each said at its new level. SIGPIPE is ignored, as nutcracker's SIG_IGN, so not logged.
  proxy.kill('SIGTTOU');
  await proxy.waitForLog(line(30, 'log level lowered to info'));
  expect(proxy.log).toMatch(line(30, received('SIGTTOU', 'down logging level')));
  expect(proxy.log).not.toContain('SIGPIPE');
  proxy.kill('SIGTTOU');
  await proxy.waitForLog(line(40, 'log level lowered to warn'));
  expect(await c.ping()).toBe('PONG');
  // At warn, SIGUSR2's info line is not written; the SIGTTIN after it (handled after it) is, at info.
  proxy.kill('SIGUSR2');
  proxy.kill('SIGTTIN');
  await proxy.waitForLog(line(30, 'log level raised to info'));
  expect(proxy.log.match(/\(SIGUSR2\) received/g)).toHaveLength(1);
  expect(await c.ping()).toBe('PONG');

  // SIGUSR1 has a handler, so Node did not open its inspector on it.
  expect(proxy.log).not.toContain('Debugger listening');
  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
  expect(proxy.log).toMatch(line(30, received('SIGTERM', 'shutting down: draining in-flight replies')));
}, 60_000);

test('log.file: JSON lines in the file, none on stderr; reopened after a rename on SIGUSR1 and on SIGHUP, which still reloads', async () => {
  const port = await freePort();
  const log = path.join(env.dir(), 'proxy.log');
  // Relative: resolved against the config file's folder.
  const file = writeConfig('file.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: env.nodes().addresses[0] }] }, log: { level: 'info', file: 'proxy.log' } });
  const proxy = ProxyProcess.start(file);
  await waitForFile(log, /slotproxy is listening/, 30_000);
  const c = client(port);
  expect(await c.ping()).toBe('PONG');

  // logrotate: rename, then the signal; the new file gets the signal's line and what follows, the old one keeps what it had.
  fs.renameSync(log, `${log}.1`);
  proxy.kill('SIGUSR1');
  await waitForFile(log, line(30, 'log file reopened'));
  expect(fs.readFileSync(log, 'utf8')).toMatch(line(30, received('SIGUSR1', 'reopening log file')));
  expect(await c.ping()).toBe('PONG');
  proxy.kill('SIGTTIN');
  await waitForFile(log, line(20, 'log level raised to debug'));
  const first = fs.readFileSync(`${log}.1`, 'utf8');
  expect(first).toMatch(/slotproxy is listening/);
  expect(first).not.toMatch(/log file reopened|raised to debug/);

  fs.renameSync(log, `${log}.2`);
  proxy.kill('SIGHUP');
  const after = await waitForFile(log, /configuration reloaded/);
  expect(after).toMatch(line(30, 'log file reopened'));
  expect(after.split('\n')[0]).toMatch(line(30, received('SIGHUP', 'reopening log file and reloading the configuration')));
  expect(fs.readFileSync(`${log}.2`, 'utf8')).not.toMatch(/configuration reloaded/);
  // The file still says info: the reload leaves the level SIGTTIN set.
  proxy.kill('SIGTTOU');
  await waitForFile(log, line(30, 'log level lowered to info'));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
  expect(fs.readFileSync(log, 'utf8')).toMatch(/shutting down/);
  expect(proxy.log).toBe('');
}, 60_000);

test('SIGSEGV sent with kill ends the process by SIGSEGV at once, as a real fault does (no handler that could spin)', async () => {
  const port = await freePort();
  const proxy = ProxyProcess.start(writeConfig('segv-stderr.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: env.nodes().addresses[0] }] }, log: { level: 'info' } }));
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  expect(await client(port).ping()).toBe('PONG');
  const closed = once(proxy.child, 'close');
  proxy.kill('SIGSEGV');
  await closed;
  expect(proxy.child.signalCode).toBe('SIGSEGV');
}, 60_000);

test('a log file that cannot be opened: exit 1 naming it', async () => {
  const file = writeConfig('nodir.json', { listen: `127.0.0.1:${await freePort()}`, mode: 'ring', ring: { nodes: [{ addr: env.nodes().addresses[0] }] }, log: { file: 'missing/proxy.log' } });
  const proxy = ProxyProcess.start(file);
  expect(await proxy.exitCode()).toBe(1);
  expect(proxy.log).toContain(`cannot open the log file ${path.join(env.dir(), 'missing', 'proxy.log')}`);
}, 30_000);

test('--workers 2: the primary steps its level and passes TTIN on to each worker', async () => {
  const port = await freePort();
  const file = writeConfig('workers.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: env.nodes().addresses[0] }] }, log: { level: 'info' } });
  const proxy = ProxyProcess.start(file, ['--workers', '2']);
  await proxy.waitForLog(/slotproxy is listening/, 30_000, 2);
  proxy.kill('SIGTTIN');
  await proxy.waitForLog(line(20, 'log level raised to debug'), 10_000, 3);
  proxy.kill('SIGUSR2');
  proxy.kill('SIGTTOU');
  await proxy.waitForLog(line(30, 'log level lowered to info'), 10_000, 3);
  expect(await client(port).ping()).toBe('PONG');
  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
}, 60_000);

test('a ring node that is down: its keys get "Connection refused", as from twemproxy, the others work', async () => {
  // Nothing listens on the second port: the kernel refuses connections to it.
  const [port, deadPort] = await freePorts(2);
  const dead = `127.0.0.1:${deadPort}`;
  const ringNodes = [
    { name: 'a', addr: env.nodes().addresses[0], weight: 1 },
    { name: 'b', addr: dead, weight: 1 },
  ];
  const file = writeConfig('down.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { hash: 'md5', nodes: ringNodes }, log: { level: 'info' } });
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  const ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: ringNodes });
  const keyOn = (idx: number): string => {
    for (let i = 0; ; i++) if (ring.indexOf(Buffer.from(`down:${i}`)) === idx) return `down:${i}`;
  };
  const c = client(port);
  await expect(c.get(keyOn(1))).rejects.toThrow(`ERR slotproxy: node ${dead} unreachable (Connection refused)`);
  expect(await c.set(keyOn(0), 'up')).toBe('OK');
  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
}, 30_000);

/** A one-pool nutcracker.yml over the env's nodes (plus `extra` server lines), listening on `port`. */
function poolYaml(port: number, servers: string[]): string {
  return ['alpha:', `  listen: 127.0.0.1:${port}`, '  hash: fnv1a_64', '  distribution: ketama', '  redis: true', '  servers:', ...servers.map((s) => `   - ${s}`), ''].join('\n');
}

test('under load, beside a real nutcracker: USR1, USR2, PIPE, TTIN, TTOU, and HUP after a logrotate rename; no write lost in either, levels stepped, every signal named in the same words, the new -o file written; then SEGV ends both, said first', async () => {
  const [ncPort, spPort, ncStats] = await freePorts(3);
  const servers = env.nodes().addresses.map((a, i) => `${a}:1 s${i}`);
  const ncLog = path.join(env.dir(), 'load-nc.log');
  const spLog = path.join(env.dir(), 'load-sp.log');
  const nc = await env.startNutcracker(['-c', env.write('load-nc.yml', poolYaml(ncPort, servers)), '-o', ncLog], [ncPort], ncStats);
  const sp = ProxyProcess.run(['nutcracker', '-c', env.write('load-sp.yml', poolYaml(spPort, servers)), '-o', spLog]);
  await waitForPing(spPort, () => sp.running, () => sp.log, 30_000);
  const both = [
    { kill: (s: NodeJS.Signals) => nc.child.kill(s), running: () => nc.running, log: ncLog, load: WriteLoad.start(ncPort, 'load-nc') },
    { kill: (s: NodeJS.Signals) => sp.kill(s), running: () => sp.running, log: spLog, load: WriteLoad.start(spPort, 'load-sp') },
  ];
  loads.push(...both.map((p) => p.load));
  const [ncSide, spSide] = both;
  // Each signal lands while writes are in flight; both go on acknowledging writes after it.
  const send = async (signal: NodeJS.Signals): Promise<void> => {
    await Promise.all(both.map((p) => p.load.progress(50)));
    for (const p of both) p.kill(signal);
    await Promise.all(both.map((p) => p.load.progress(200)));
    for (const p of both) expect(p.running()).toBe(true);
  };

  for (const signal of ['SIGUSR1', 'SIGUSR2', 'SIGPIPE'] as const) await send(signal);
  await send('SIGTTIN');
  await waitForFile(ncSide.log, /up log level to 6/);
  await waitForFile(spSide.log, line(20, 'log level raised to debug'));
  await send('SIGTTOU');
  await waitForFile(ncSide.log, /down log level to 5/);
  await waitForFile(spSide.log, line(30, 'log level lowered to info'));
  // Each signal named in nutcracker's words in both logs (nutcracker reopens on HUP only, so its
  // USR1 line has no action; SIGPIPE is ignored by both, unlogged).
  const ncLines = fs.readFileSync(ncSide.log, 'utf8');
  const spLines = fs.readFileSync(spSide.log, 'utf8');
  for (const [signal, ncAction, spAction] of [
    ['SIGUSR1', undefined, 'reopening log file'],
    ['SIGUSR2', undefined, undefined],
    ['SIGTTIN', 'up logging level', 'up logging level'],
    ['SIGTTOU', 'down logging level', 'down logging level'],
  ] as const) {
    expect(ncLines).toContain(`] ${received(signal, ncAction)}\n`);
    expect(spLines).toMatch(line(30, received(signal, spAction)));
  }
  for (const lines of [ncLines, spLines]) expect(lines).not.toContain('SIGPIPE');

  // logrotate: the file renamed, then the signal (nutcracker reopens on SIGHUP); what follows goes to a new file.
  for (const p of both) fs.renameSync(p.log, `${p.log}.1`);
  await send('SIGHUP');
  await waitForFile(spSide.log, line(30, 'log file reopened'));
  // nutcracker says it before reopening (so in the renamed file), slotproxy first in the new one.
  await waitForFile(`${ncSide.log}.1`, /signal 1 \(SIGHUP\) received, reopening log file\n/);
  expect(fs.readFileSync(spSide.log, 'utf8')).toMatch(line(30, received('SIGHUP', 'reopening log file and reloading the configuration')));
  await send('SIGUSR2');
  await waitForFile(ncSide.log, /signal 12 \(SIGUSR2\) received/);
  await waitForFile(spSide.log, line(30, received('SIGUSR2')));
  expect(fs.readFileSync(`${ncSide.log}.1`, 'utf8')).toMatch(/up log level to 6/);
  expect(fs.readFileSync(`${spSide.log}.1`, 'utf8')).toMatch(/log level raised to debug/);

  for (const p of both) {
    const { written, errors, missing } = await p.load.stop();
    expect({ errors, missing }).toEqual({ errors: [], missing: [] });
    expect(written).toBeGreaterThan(1500);
  }
  // SIGSEGV: both die by it (nutcracker logs "core dumping" first; slotproxy has no handler, see real-fault.test.ts).
  const ended = [nc.exited, sp.exitCode()];
  for (const p of both) p.kill('SIGSEGV');
  await Promise.all(ended);
  expect([nc.describeExit(), sp.child.signalCode]).toEqual(['killed by SIGSEGV', 'SIGSEGV']);
  expect(fs.readFileSync(ncSide.log, 'utf8')).toContain(received('SIGSEGV', 'core dumping'));
}, 60_000);

test('a pool whose server is down, served by both: the same keys fail, each error naming "Connection refused"', async () => {
  const [ncPort, spPort, deadPort, ncStats] = await freePorts(4);
  const servers = [`${env.nodes().addresses[0]}:1 up`, `127.0.0.1:${deadPort}:1 down`];
  await env.startNutcracker(['-c', env.write('down-nc.yml', poolYaml(ncPort, servers))], [ncPort], ncStats);
  const sp = ProxyProcess.start(env.write('down-sp.yml', poolYaml(spPort, servers)));
  await waitForPing(spPort, () => sp.running, () => sp.log, 30_000);
  // All at once: each proxy fails a down node's requests when its connection attempt fails, and
  // tries the node again on the next request (ring-down-server.test.ts times it).
  const answers = (port: number): Promise<string[]> => {
    const c = env.keep(new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 5000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null }));
    return Promise.all(Array.from({ length: 40 }, (_, i) => c.get(`down:${i}`).then((v) => `value ${String(v)}`, (err: Error) => err.message)));
  };
  const fromNutcracker = await answers(ncPort);
  const fromSlotproxy = await answers(spPort);
  const failed = (answers: string[]): number[] => answers.flatMap((a, i) => (a.startsWith('value') ? [] : [i]));
  // Some keys on each server, and the same ones failing in both.
  expect(failed(fromNutcracker).length).toBeGreaterThan(5);
  expect(failed(fromNutcracker).length).toBeLessThan(35);
  expect(failed(fromSlotproxy)).toEqual(failed(fromNutcracker));
  for (const i of failed(fromNutcracker)) {
    expect(fromNutcracker[i]).toBe('ERR Connection refused');
    expect(fromSlotproxy[i]).toBe(`ERR slotproxy: node 127.0.0.1:${deadPort} unreachable (Connection refused)`);
  }
  sp.kill('SIGTERM');
  expect(await sp.exitCode()).toBe(0);
}, 60_000);

test("a pool's timeout: cuts off a request to a stopped server in both, each error saying \"timed out\"", async () => {
  const [ncPort, spPort, ncStats] = await freePorts(3);
  const node = env.nodes().nodes[1];
  const yaml = (port: number): string => poolYaml(port, [`${node.address}:1 s1`]).replace('  redis: true', '  redis: true\n  timeout: 300');
  await env.startNutcracker(['-c', env.write('timeout-nc.yml', yaml(ncPort))], [ncPort], ncStats);
  const sp = ProxyProcess.start(env.write('timeout-sp.yml', yaml(spPort)));
  await waitForPing(spPort, () => sp.running, () => sp.log, 30_000);
  const [nc, slot] = [client(ncPort), client(spPort)];
  // Both connected to the server before it stops answering.
  expect(await nc.set('timeout:a', '1')).toBe('OK');
  expect(await slot.get('timeout:a')).toBe('1');
  node.kill('SIGSTOP');
  try {
    const [fromNutcracker, fromSlotproxy] = await Promise.all([nc, slot].map((c) => c.get('timeout:a').then(String, (err: Error) => err.message)));
    expect(fromNutcracker).toBe('ERR Connection timed out');
    expect(fromSlotproxy).toBe(`ERR slotproxy: node ${node.address} timed out (no reply within 300 ms)`);
  } finally {
    node.kill('SIGCONT');
  }
  sp.kill('SIGTERM');
  expect(await sp.exitCode()).toBe(0);
}, 60_000);
