// SPEC sections 7 and 8: SIGHUP re-reads the config file and applies what can change safely (limits,
// auth, log level), refusing a bad file and keeping the running config; SIGTERM lets in-flight
// replies finish and exits 0. The real binary (dist/) with real signals.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { useCluster } from '../../helpers/cluster';
import { ProxyProcess, killAllProxies, tempDir } from '../../helpers/cli';
import { redisAtLeast } from '../../helpers/server-version';
import { freePort } from '../../../cmd/sandbox/ports';

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let dir: string;
const clients: Redis[] = [];

beforeAll(() => {
  dir = tempDir('slotproxy-signals-');
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  killAllProxies();
  fs.rmSync(dir, { recursive: true, force: true });
});

function writeConfig(file: string, port: number, extra: string): void {
  fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [${cluster().seeds.join(', ')}]\nlog:\n  level: info\n${extra}`);
}

function connect(port: number, options: { password?: string } = {}): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0, enableReadyCheck: false, retryStrategy: () => null, ...options });
  clients.push(c);
  return c;
}

/** What the proxy says to a new connection that sends PING, until it closes or answers. */
function firstWords(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let got = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`no answer; got ${JSON.stringify(got)}`));
    }, 5000);
    s.on('data', (d: Buffer) => {
      got += d.toString();
      if (got.endsWith('\r\n')) {
        clearTimeout(timer);
        s.destroy();
        resolve(got);
      }
    });
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(got);
    });
    s.write('PING\r\n');
  });
}

test('SIGHUP applies new limits and auth; a bad file is refused and the running config stays', async () => {
  const port = await freePort();
  const file = path.join(dir, 'reload.yaml');
  writeConfig(file, port, 'limits:\n  maxClients: 100\n');
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/);
  const a = connect(port);
  const b = connect(port);
  expect(await a.ping()).toBe('PONG');
  expect(await b.ping()).toBe('PONG');

  writeConfig(file, port, 'limits:\n  maxClients: 2\n');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/configuration reloaded/);
  expect(await firstWords(port)).toBe('-ERR max number of clients reached\r\n');

  fs.writeFileSync(file, 'mode: cluster\nlimits:\n  maxClients: -1\n');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/reload refused; the running configuration stays/);
  expect(proxy.log).toMatch(/limits\.maxClients: must be at least 1/);
  expect(await firstWords(port)).toBe('-ERR max number of clients reached\r\n');
  expect(await a.ping()).toBe('PONG');

  writeConfig(file, port, 'limits:\n  maxClients: 10\nauth:\n  password: rotated\n');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/configuration reloaded/, 10_000, 2);
  // New clients must AUTH with the new password; a client signed in before the reload stays in.
  expect(await firstWords(port)).toBe('-NOAUTH Authentication required.\r\n');
  expect(await connect(port, { password: 'rotated' }).set('signals:k', 'v')).toBe('OK');
  expect(await a.get('signals:k')).toBe('v');
  expect(proxy.running).toBe(true);
  // No secret reaches the log.
  expect(proxy.log).not.toContain('rotated');

  const exited = proxy.exitCode();
  proxy.kill('SIGTERM');
  expect(await exited).toBe(0);
});

test('SIGHUP reloads scripts and the log level; a script file that is missing refuses the reload', async () => {
  const port = await freePort();
  const file = path.join(dir, 'scripts.yaml');
  const luaDir = path.join(dir, 'lua');
  fs.mkdirSync(luaDir, { recursive: true });
  const first = "return 'first'";
  const second = "return 'second'";
  fs.writeFileSync(path.join(dir, 'first.lua'), first);
  fs.writeFileSync(path.join(luaDir, 'second.lua'), second);
  const sha = (body: string): string => createHash('sha1').update(body).digest('hex');
  writeConfig(file, port, 'scripts: [first.lua]\n');
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/);
  const c = connect(port);
  expect(await c.evalsha(sha(first), 0)).toBe('first');
  await expect(c.evalsha(sha(second), 0)).rejects.toThrow(/NOSCRIPT/);

  // A new folder of scripts: loaded on every master, so EVALSHA works with no SCRIPT LOAD.
  writeConfig(file, port, 'scripts: [first.lua, lua]\n');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/configuration reloaded/);
  await proxy.waitForLog(new RegExp(`"sha":"${sha(second)}"`));
  // Logged once the first master has it; the others are loaded right after.
  for (const m of cluster().masters) {
    for (let i = 0; i < 100 && String(await m.command('SCRIPT', 'EXISTS', sha(second))) !== '1'; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await m.command('SCRIPT', 'EXISTS', sha(second))).toEqual([1]);
  }
  expect(await c.evalsha(sha(second), 0)).toBe('second');

  // A file that is not there: refused, nothing changes.
  writeConfig(file, port, 'scripts: [first.lua, gone.lua]\n');
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/reload refused; the running configuration stays/);
  expect(proxy.log).toMatch(/gone\.lua/);
  expect(await c.evalsha(sha(second), 0)).toBe('second');

  // log.level: warn silences the info line of this accepted reload; the warning about a change that
  // needs a restart (crossSlot) still shows.
  writeConfig(file, port, 'scripts: [first.lua, lua]\ncrossSlot: split\n');
  fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('level: info', 'level: warn'));
  proxy.kill('SIGHUP');
  await proxy.waitForLog(/need a restart and were not applied/);
  expect(proxy.log.match(/configuration reloaded/g)).toHaveLength(1);

  const exited = proxy.exitCode();
  proxy.kill('SIGTERM');
  expect(await exited).toBe(0);
});

test('SIGTERM lets a command in flight finish, answers it, then exits 0', async () => {
  const port = await freePort();
  const file = path.join(dir, 'term.yaml');
  writeConfig(file, port, '');
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/);
  const c = connect(port);
  const watcher = connect(port);
  // Both connected first: what a client sends on connect (CLIENT SETINFO) must not count as the EVAL below.
  await Promise.all([c.ping(), watcher.ping()]);
  const commandsBefore = Number(/proxy_total_commands_processed:(\d+)/.exec(String(await watcher.call('INFO', 'proxy')))?.[1]);
  // A keyless script that keeps its node busy for 300 ms. From Redis 7.2 on (Valkey too) TIME stands
  // still inside a script until the node has been busy past busy-reply-threshold (5 s): os.clock()
  // (7.2's) measures the loop there.
  const spin = redisAtLeast(7, 2)
    ? "local s = os.clock() while os.clock() - s < 0.3 do end return 'finished'"
    : "local s = redis.call('TIME') while true do local n = redis.call('TIME') " +
      "if (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 300000 then return 'finished' end end";
  const reply = c.eval(spin, 0);
  // Wait until the proxy has taken the EVAL (it counts commands as it dispatches them).
  const deadline = Date.now() + 5000;
  for (;;) {
    const n = Number(/proxy_total_commands_processed:(\d+)/.exec(String(await watcher.call('INFO', 'proxy')))?.[1]);
    if (n >= commandsBefore + 2) break;
    if (Date.now() > deadline) throw new Error('the proxy never received the EVAL');
  }
  const exited = proxy.exitCode();
  const signalledAt = Date.now();
  proxy.kill('SIGTERM');
  expect(await reply).toBe('finished');
  expect(await exited).toBe(0);
  expect(Date.now() - signalledAt).toBeLessThan(5000);
  expect(proxy.log).toMatch(/shutting down: draining in-flight replies/);
});
