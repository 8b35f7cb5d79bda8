// SPEC section 7, security: client AUTH (password and ACL-style users, HELLO 2 AUTH), Redis's own
// error texts, and back-end credentials checked against a real ACL user on the Redis nodes.

import { execFile } from 'node:child_process';
import net from 'node:net';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { startProxy } from '../helpers/proxy';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { errorOf } from '../helpers/reply-error';
import { redisCliBin } from '../../cmd/sandbox/helpers';
import { HELLO_SERVER, NOAUTH_HELLO } from '../helpers/server-version';

const NOAUTH = 'NOAUTH Authentication required.';
const WRONGPASS = 'WRONGPASS invalid username-password pair or user is disabled.';

// Every node gets an extra ACL user for the back-end test; the default user stays open for the helpers.
const cluster = useCluster({
  masters: 3,
  replicasPerMaster: 0,
  extraArgs: ['--user', 'slotproxy', 'on', '>be-secret', '~*', '&*', '+@all', '-flushall'],
});

let proxy: ProxyServer | undefined;
const clients: Redis[] = [];
const sockets: net.Socket[] = [];

beforeAll(async () => {
  proxy = await startProxy(cluster().seeds, {
    auth: { password: 'client-secret', users: [{ name: 'app', password: 'app-secret' }] },
  });
}, 30_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  for (const s of sockets) s.destroy();
  await proxy?.close(500);
});

function port(): number {
  if (proxy === undefined) throw new Error('the proxy did not start');
  return proxy.address.port;
}

function connect(options: { username?: string; password?: string } = {}): Redis {
  // No ready check: ioredis's INFO would be refused with NOAUTH before the test's own AUTH.
  const c = new Redis({ port: port(), maxRetriesPerRequest: 0, enableReadyCheck: false, ...options });
  clients.push(c);
  return c;
}

/** Sends raw RESP and resolves with the first `n` bytes of the answer (ioredis would AUTH by itself). */
async function raw(request: string, expectedLength: number): Promise<string> {
  const socket = net.connect({ host: '127.0.0.1', port: port() });
  sockets.push(socket);
  let got = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out; got ${JSON.stringify(got)}`)), 5000);
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.length >= expectedLength) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got);
      }
    });
    socket.on('error', reject);
    socket.write(request);
  });
}

describe('client AUTH', () => {
  test('every command before AUTH is refused with NOAUTH; unknown commands and arity errors come first, as on Redis', async () => {
    const c = connect();
    expect(await errorOf(c.get('auth:k'))).toBe(NOAUTH);
    expect(await errorOf(c.ping())).toBe(NOAUTH);
    expect(await errorOf(c.call('DBSIZE'))).toBe(NOAUTH);
    expect(await errorOf(c.call('CLIENT', 'SETINFO', 'LIB-NAME', 'x'))).toBe(NOAUTH);
    expect(await errorOf(c.call('NOSUCHCMD'))).toMatch(/^ERR unknown command 'NOSUCHCMD'/);
    expect(await errorOf(c.call('GET'))).toBe("ERR wrong number of arguments for 'get' command");
    expect(await errorOf(c.call('HELLO', '2'))).toBe(NOAUTH_HELLO);
    expect(proxy?.stats.noauthErrors).toBeGreaterThanOrEqual(4);
  });

  test('a wrong password gets WRONGPASS and leaves the client signed out; the right one lets it in', async () => {
    const c = connect();
    const failuresBefore = proxy?.stats.authFailures ?? 0;
    expect(await errorOf(c.call('AUTH', 'nope'))).toBe(WRONGPASS);
    expect(await errorOf(c.call('AUTH', 'app', 'client-secret'))).toBe(WRONGPASS);
    expect(await errorOf(c.call('AUTH', 'ghost', 'app-secret'))).toBe(WRONGPASS);
    expect(await errorOf(c.call('AUTH', 'default', 'client-secret', 'extra'))).toBe('ERR syntax error');
    expect(await errorOf(c.get('auth:k'))).toBe(NOAUTH);
    expect(proxy?.stats.authFailures).toBe(failuresBefore + 3);
    expect(await c.call('AUTH', 'client-secret')).toBe('OK');
    expect(await c.set('auth:k', 'v')).toBe('OK');
    expect(await c.get('auth:k')).toBe('v');
    // A failed AUTH later does not sign an authenticated client out (Redis behaves the same).
    expect(await errorOf(c.call('AUTH', 'wrong'))).toBe(WRONGPASS);
    expect(await c.get('auth:k')).toBe('v');
  });

  test('AUTH default <password> and AUTH <user> <password>', async () => {
    const a = connect();
    expect(await a.call('AUTH', 'default', 'client-secret')).toBe('OK');
    expect(await a.dbsize()).toBeGreaterThanOrEqual(0);
    const b = connect();
    expect(await b.call('AUTH', 'app', 'app-secret')).toBe('OK');
    expect(await b.incr('auth:counter')).toBeGreaterThan(0);
  });

  test('HELLO 2 AUTH user pass signs in and answers HELLO; wrong credentials get WRONGPASS', async () => {
    const c = connect();
    expect(await errorOf(c.call('HELLO', '2', 'AUTH', 'app', 'bad'))).toBe(WRONGPASS);
    expect(await errorOf(c.get('auth:k'))).toBe(NOAUTH);
    const hello = (await c.call('HELLO', '2', 'AUTH', 'app', 'app-secret', 'SETNAME', 'auth-test')) as unknown[];
    expect(hello.slice(0, 2)).toEqual(['server', HELLO_SERVER.server]); // Valkey's HELLO says valkey
    expect(hello[hello.indexOf('proto') + 1]).toBe(2);
    expect(await c.call('CLIENT', 'GETNAME')).toBe('auth-test');
    expect(await c.get('auth:k')).toBe('v');
  });

  test('ioredis with password or username+password options works unchanged', async () => {
    const a = connect({ password: 'client-secret' });
    expect(await a.set('auth:io', '1')).toBe('OK');
    const b = connect({ username: 'app', password: 'app-secret' });
    expect(await b.get('auth:io')).toBe('1');
  });

  test('AUTH applies in pipeline order: commands before it are refused, after it served', async () => {
    const reply = await raw('GET auth:k\r\nAUTH client-secret\r\nGET auth:k\r\n', 34 + 5 + 7);
    expect(reply).toBe(`-${NOAUTH}\r\n+OK\r\n$1\r\nv\r\n`);
  });

  test('RESET signs the client out again', async () => {
    const c = connect({ password: 'client-secret' });
    expect(await c.get('auth:k')).toBe('v');
    expect(await c.call('RESET')).toBe('RESET');
    expect(await errorOf(c.get('auth:k'))).toBe(NOAUTH);
  });

  test('redis-cli -a works', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(redisCliBin(), ['-p', String(port()), '--no-auth-warning', '-a', 'client-secret', 'GET', 'auth:k'], (err, stdout) =>
        err === null ? resolve(stdout) : reject(err),
      );
    });
    expect(out).toBe('v\n');
  });

  test('INFO proxy reports the failed and refused attempts', async () => {
    const c = connect({ password: 'client-secret' });
    const info = (await c.call('INFO', 'proxy')) as string;
    expect(info).toMatch(/\r\nauth_failures:[1-9]\d*\r\n/);
    expect(info).toMatch(/\r\nnoauth_errors:[1-9]\d*\r\n/);
  });
});

describe('back-end credentials', () => {
  let backendProxy: ProxyServer | undefined;

  beforeAll(async () => {
    backendProxy = await startProxy(cluster().seeds, { backend: { username: 'slotproxy', password: 'be-secret' } });
  }, 30_000);

  afterAll(async () => {
    await backendProxy?.close(500);
  });

  test('every back-end connection is signed in as the configured ACL user, whose permissions then apply', async () => {
    if (backendProxy === undefined) throw new Error('the proxy did not start');
    const c = new Redis({ port: backendProxy.address.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    expect(await c.set('auth:be', 'x')).toBe('OK');
    expect(await c.get('auth:be')).toBe('x');
    // The user may not FLUSHALL: the node says so through the proxy.
    expect(await errorOf(c.call('FLUSHALL'))).toMatch(/NOPERM/);
    for (const node of cluster().masters) {
      const list = String(await node.command('CLIENT', 'LIST'));
      const proxyLines = list.split('\n').filter((l) => l.includes('user=slotproxy'));
      expect(proxyLines.length).toBeGreaterThan(0);
    }
  });

  test('a reload rotates the back-end password: connections opened afterwards use the new one', async () => {
    if (backendProxy === undefined) throw new Error('the proxy did not start');
    const masters = cluster().masters;
    // Redis ACL users may hold two passwords, so a rotation adds the new one, reloads, drops the old.
    for (const node of masters) await node.command('ACL', 'SETUSER', 'slotproxy', '>be-rotated');
    const next = parseConfig({
      listen: '127.0.0.1:0',
      cluster: { seeds: cluster().seeds },
      backend: { username: 'slotproxy', password: 'be-rotated' },
      log: { level: 'silent' },
    });
    backendProxy.prepareReload(next)();
    for (const node of masters) {
      await node.command('ACL', 'SETUSER', 'slotproxy', '<be-secret');
      await node.command('CLIENT', 'KILL', 'USER', 'slotproxy');
    }
    const c = new Redis({ port: backendProxy.address.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    // The first commands may meet a killed connection (may or may not have run); reads are retried.
    expect(await c.get('auth:be')).toBe('x');
    expect(await c.set('auth:be', 'rotated')).toBe('OK');
    expect(await c.get('auth:be')).toBe('rotated');
  });
});
