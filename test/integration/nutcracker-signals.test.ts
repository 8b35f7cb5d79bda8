// nutcracker's signals on a real `slotproxy start` process (dist/, built by `npm test`): SIGTTIN and
// SIGTTOU step the log level, SIGUSR1 and SIGHUP reopen log.file after a logrotate-style rename,
// SIGUSR2 and SIGPIPE do nothing; none of them stops, freezes or kills the proxy, which answers PING
// after each and still drains on SIGTERM. A ring node that is down answers with the OS's reason.
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freePort, freePorts } from '../../cmd/sandbox/ports';
import { Ring } from '../../sharding/ring';
import { ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';

let nodes: StandaloneNodes | undefined;
let dir: string;
const clients: Redis[] = [];

beforeAll(async () => {
  dir = tempDir('slotproxy-nc-signals-');
  nodes = await StandaloneNodes.start(1);
}, 60_000);

afterAll(async () => {
  for (const c of clients) if (c.status !== 'end') c.disconnect();
  killAllProxies();
  await nodes?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

/**
 * A client that gives up on a command after 2 s: a stopped (SIGTTIN-frozen) proxy fails the test
 * instead of hanging it. No ready check: its INFO goes to every ring node, a down one included.
 */
function client(port: number): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 2000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null });
  clients.push(c);
  return c;
}

function writeConfig(name: string, config: Record<string, unknown>): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(config));
  return file;
}

/** A JSON log line at pino's numeric `level` with message `msg`. */
function line(level: number, msg: string): RegExp {
  return new RegExp(`"level":${level},[^\\n]*"msg":"${msg}"`);
}

/** Resolves once `file` holds `pattern`; rejects after `ms`. */
async function waitForFile(file: string, pattern: RegExp, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (pattern.test(text)) return text;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in ${file} within ${ms} ms; it holds:\n${text}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('TTIN/TTOU step the log level; USR1, USR2 and PIPE neither stop nor freeze the proxy; SIGTERM still drains', async () => {
  const port = await freePort();
  const file = writeConfig('stderr.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: nodes!.addresses[0] }] }, log: { level: 'info' } });
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  const c = client(port);
  expect(await c.ping()).toBe('PONG');
  expect(proxy.log).not.toMatch(/"level":20,/);

  // info -> debug: the change is the first debug line.
  proxy.kill('SIGTTIN');
  await proxy.waitForLog(line(20, 'log level raised to debug'));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGUSR1');
  await proxy.waitForLog(line(30, 'signal received; logs go to stderr, no log file to reopen'));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGUSR2');
  await proxy.waitForLog(line(30, 'signal received; nothing to do'));
  expect(await c.ping()).toBe('PONG');

  proxy.kill('SIGPIPE');
  expect(await c.ping()).toBe('PONG');
  expect(proxy.running).toBe(true);

  // debug -> info -> warn, each said at its new level.
  proxy.kill('SIGTTOU');
  await proxy.waitForLog(line(30, 'log level lowered to info'));
  proxy.kill('SIGTTOU');
  await proxy.waitForLog(line(40, 'log level lowered to warn'));
  expect(await c.ping()).toBe('PONG');
  // At warn, SIGUSR2's info line is not written; the SIGTTIN after it (handled after it) is, at info.
  proxy.kill('SIGUSR2');
  proxy.kill('SIGTTIN');
  await proxy.waitForLog(line(30, 'log level raised to info'));
  expect(proxy.log.match(/nothing to do/g)).toHaveLength(1);
  expect(await c.ping()).toBe('PONG');

  // SIGUSR1 has a handler, so Node did not open its inspector on it.
  expect(proxy.log).not.toContain('Debugger listening');
  proxy.kill('SIGTERM');
  expect(await proxy.exitCode()).toBe(0);
}, 60_000);

test('log.file: JSON lines in the file, none on stderr; reopened after a rename on SIGUSR1 and on SIGHUP, which still reloads', async () => {
  const port = await freePort();
  const log = path.join(dir, 'proxy.log');
  // Relative: resolved against the config file's folder.
  const file = writeConfig('file.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: nodes!.addresses[0] }] }, log: { level: 'info', file: 'proxy.log' } });
  const proxy = ProxyProcess.start(file);
  await waitForFile(log, /slotproxy is listening/, 30_000);
  const c = client(port);
  expect(await c.ping()).toBe('PONG');

  // logrotate: rename, then the signal; the new file gets what follows, the old one keeps what it had.
  fs.renameSync(log, `${log}.1`);
  proxy.kill('SIGUSR1');
  await waitForFile(log, line(30, 'log file reopened'));
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

test('a log file that cannot be opened: exit 1 naming it', async () => {
  const file = writeConfig('nodir.json', { listen: `127.0.0.1:${await freePort()}`, mode: 'ring', ring: { nodes: [{ addr: nodes!.addresses[0] }] }, log: { file: 'missing/proxy.log' } });
  const proxy = ProxyProcess.start(file);
  expect(await proxy.exitCode()).toBe(1);
  expect(proxy.log).toContain(`cannot open the log file ${path.join(dir, 'missing', 'proxy.log')}`);
}, 30_000);

test('--workers 2: the primary steps its level and passes TTIN on to each worker', async () => {
  const port = await freePort();
  const file = writeConfig('workers.json', { listen: `127.0.0.1:${port}`, mode: 'ring', ring: { nodes: [{ name: 'a', addr: nodes!.addresses[0] }] }, log: { level: 'info' } });
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
    { name: 'a', addr: nodes!.addresses[0], weight: 1 },
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
