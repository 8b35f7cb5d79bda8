// ACL through slotproxy, answered over the proxy's own users as one Redis answers over its users:
// the same requests on the proxy and on one Redis (a single-node cluster), replies compared byte for
// byte (ACL LIST lines, GETUSER fields, error texts, DRYRUN, LOG's fields); then what the changes do
// to signed-in clients (new rules at once, DELUSER closes them, CLIENT KILL USER) and to a reload.
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { useReferenceNode } from '../helpers/reference-node';
import { startProxy } from '../helpers/proxy';
import { RawRequest, exchange, splitReplies } from '../helpers/raw-exchange';
import { errorOf } from '../helpers/reply-error';
import { ProxyServer } from '../../proxy/server/server';
import { nopermText, redisAtLeast } from '../helpers/server-version';

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
const reference = useReferenceNode();
let proxy: ProxyServer | undefined;
beforeAll(async () => {
  proxy = await startProxy(cluster().seeds);
}, 30_000);
afterAll(async () => {
  await proxy?.close(500);
});

const clients: Redis[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});
function open(port: number, options: { username?: string; password?: string } = {}): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0, enableReadyCheck: false, ...options });
  clients.push(c);
  return c;
}
const proxyPort = (): number => (proxy as ProxyServer).address.port;

/** The replies to `requests` from the proxy and from one Redis, one string per reply. */
async function both(requests: readonly RawRequest[]): Promise<{ proxy: string[]; redis: string[] }> {
  const [p, r] = await Promise.all([exchange(proxyPort(), requests), exchange(reference.node().port, requests)]);
  return { proxy: splitReplies(p.replies), redis: splitReplies(r.replies) };
}

/** `hello`: the index of a HELLO, whose reply names the server (id, mode): left out of the comparison. */
async function same(requests: readonly RawRequest[], hello = -1): Promise<string[]> {
  const got = await both(requests);
  expect(got.proxy.filter((_, i) => i !== hello)).toEqual(got.redis.filter((_, i) => i !== hello));
  return got.proxy;
}

describe('byte for byte with one Redis', () => {
  test('SETUSER, LIST, USERS, GETUSER: new users, flags, passwords, key and channel patterns, command rules', async () => {
    const replies = await same([
      ['ACL', 'SETUSER', 'alice'],
      ['ACL', 'SETUSER', 'bob', 'on', '>pw', '>pw2', '~k*', '%R~r*', '%W~w*', '%R~w*', '&ch', '+@all', '-@admin', '-get'],
      ['ACL', 'SETUSER', 'carol', 'reset'],
      ['ACL', 'SETUSER', 'dave', 'on', 'nopass', '+@read', '~*', 'allchannels'],
      ['ACL', 'SETUSER', 'erin', 'on', '#' + 'a'.repeat(64), '-@all', '+@hash', '+@string', '-hget', 'skip-sanitize-payload'],
      ['ACL', 'SETUSER', 'bob', '<pw2', 'resetkeys', '~b*'],
      ['ACL', 'SETUSER', 'frank', 'on', 'nopass', 'allcommands', 'nocommands', '+config|get'],
      ['ACL', 'LIST'],
      ['ACL', 'USERS'],
      ['ACL', 'GETUSER', 'bob'],
      ['ACL', 'GETUSER', 'alice'],
      ['ACL', 'GETUSER', 'default'],
      ['ACL', 'GETUSER', 'nosuch'],
      ['HELLO', '3'],
      ['ACL', 'GETUSER', 'dave'],
      ['ACL', 'GETUSER', 'nosuch'],
    ], 13);
    // Redis 7.2 shows every user's default payload flag.
    const sanitize = redisAtLeast(7, 2) ? ' sanitize-payload' : '';
    const bulk = (line: string): string => `$${line.length}\r\n${line}\r\n`;
    expect(replies[7]).toContain(bulk(`user bob on${sanitize} #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~b* resetchannels &ch +@all -@admin -get`));
    expect(replies[7]).toContain(bulk(`user dave on nopass${sanitize} ~* &* -@all +@read`));
  });

  test('SETUSER errors name the rule in Redis\'s words and change nothing', async () => {
    await same([
      ['ACL', 'SETUSER', 'grace', 'on', '>pw', '~g*'],
      ['ACL', 'SETUSER', 'grace', 'off', '+nosuch'],
      ['ACL', 'SETUSER', 'grace', '+@nosuch'],
      ['ACL', 'SETUSER', 'grace', 'bogus'],
      ['ACL', 'SETUSER', 'grace', ''],
      ['ACL', 'SETUSER', 'grace', 'allkeys', '~b'],
      ['ACL', 'SETUSER', 'grace', 'allchannels', '&b'],
      ['ACL', 'SETUSER', 'grace', '#abc'],
      ['ACL', 'SETUSER', 'grace', '!' + 'b'.repeat(64)],
      ['ACL', 'SETUSER', 'grace', '<nope'],
      ['ACL', 'SETUSER', 'grace', '%X~a'],
      ['ACL', 'SETUSER', 'grace', '-config|nosuch'],
      ['ACL', 'SETUSER', 'grace', '+config|get|x'],
      ['ACL', 'SETUSER', 'a b'],
      ['ACL', 'GETUSER', 'grace'],
      ['ACL', 'DELUSER', 'default', 'grace'],
      ['ACL', 'DELUSER', 'grace', 'nosuch'],
      ['ACL', 'DELUSER', 'grace'],
    ]);
  });

  test('DRYRUN', async () => {
    await same([
      ['ACL', 'SETUSER', 'henry', 'on', 'nopass', '~k*', '&c*', '+@all', '-flushall'],
      ['ACL', 'DRYRUN', 'henry', 'get', 'k1'],
      ['ACL', 'DRYRUN', 'henry', 'get', 'other'],
      ['ACL', 'DRYRUN', 'henry', 'mset', 'k1', 'v', 'x', 'v'],
      ['ACL', 'DRYRUN', 'henry', 'publish', 'x', 'm'],
      ['ACL', 'DRYRUN', 'henry', 'flushall'],
      ['ACL', 'DRYRUN', 'henry', 'config', 'get', 'x'],
      ['ACL', 'DRYRUN', 'henry', 'config', 'nosuch'],
      ['ACL', 'DRYRUN', 'henry', 'config'],
      ['ACL', 'DRYRUN', 'henry', 'nosuchcmd'],
      ['ACL', 'DRYRUN', 'henry', 'get'],
      ['ACL', 'DRYRUN', 'nosuch', 'get', 'k'],
    ]);
  });

  test('LOG: a refused command, key, channel and AUTH, counted together, then RESET', async () => {
    await same([['ACL', 'LOG', 'RESET'], ['ACL', 'SETUSER', 'ivy', 'on', '>pw', '~k*', '&c*', '+@all', '-flushall']]);
    const requests: RawRequest[] = [
      ['AUTH', 'ivy', 'wrong'], ['AUTH', 'ivy', 'pw'], ['FLUSHALL'], ['FLUSHALL'], ['GET', 'other'], ['PUBLISH', 'x', 'm'],
      ['MULTI'], ['GET', 'other2'], ['DISCARD'],
    ];
    const sent = await both(requests);
    expect(sent.proxy).toEqual(sent.redis);
    const log = await both([['ACL', 'LOG'], ['ACL', 'LOG', '2'], ['HELLO', '3'], ['ACL', 'LOG', '1']]);
    // Ages, times (Redis 7.2's timestamps) and the clients' lines differ: their values are replaced, their places kept.
    const normalize = (reply: string): string =>
      reply
        .replace(/age-seconds\r\n(\$\d+\r\n[0-9.]+|,[0-9.]+)\r\n/g, () => 'age-seconds\r\nAGE\r\n')
        .replace(/(timestamp-created|timestamp-last-updated)\r\n:\d+\r\n/g, (_m, field: string) => `${field}\r\n:TIME\r\n`)
        .replace(/client-info\r\n\$\d+\r\n[^\r]*\r\n/g, () => 'client-info\r\nINFO\r\n');
    const proxyLog = log.proxy.map(normalize);
    expect(proxyLog).toEqual(log.redis.map(normalize).map((r, i) => (i === 2 ? proxyLog[2] : r)));
    expect(proxyLog[0]).toMatch(new RegExp(String.raw`^\*5\r\n\*${redisAtLeast(7, 2) ? 20 : 14}\r\n\$5\r\ncount\r\n:1\r\n\$6\r\nreason\r\n\$3\r\nkey\r\n\$7\r\ncontext\r\n\$5\r\nmulti\r\n`));
    expect(proxyLog[0]).toContain('$6\r\nreason\r\n$7\r\ncommand\r\n$7\r\ncontext\r\n$8\r\ntoplevel\r\n$6\r\nobject\r\n$8\r\nflushall\r\n$8\r\nusername\r\n$3\r\nivy\r\n');
    expect(proxyLog[0]).toContain(':2\r\n$6\r\nreason\r\n$7\r\ncommand');
    // The client's line is its CLIENT LIST line, with its user and last command.
    expect(log.proxy[0]).toMatch(/client-info\r\n\$\d+\r\nid=\d+ addr=127\.0\.0\.1:\d+ [^\r]* cmd=get user=ivy/);
    await same([['ACL', 'LOG', 'RESET'], ['ACL', 'LOG'], ['ACL', 'LOG', 'x'], ['ACL', 'LOG', '1', '2'], ['ACL', 'LOG', '-1']]);
  });
});

describe('what the changes do', () => {
  test('new rules apply to signed-in clients at once; CLIENT KILL USER; DELUSER closes its clients', async () => {
    const port = proxyPort();
    const admin = open(port);
    expect(await admin.call('ACL', 'SETUSER', 'app', 'on', '>app-pw', '~app:*', '+@all')).toBe('OK');
    const app = open(port, { username: 'app', password: 'app-pw' });
    expect(await app.set('app:1', 'x')).toBe('OK');
    expect(await errorOf(app.set('other', 'x'))).toBe(nopermText('key'));
    expect(await app.call('ACL', 'WHOAMI')).toBe('app');
    expect(await admin.call('ACL', 'SETUSER', 'app', '-set')).toBe('OK');
    expect(await errorOf(app.set('app:1', 'y'))).toBe(nopermText('command', 'app', 'set'));
    expect(await app.get('app:1')).toBe('x');
    // Turned off: signed-in clients stay, new sign-ins are refused (as on Redis).
    expect(await admin.call('ACL', 'SETUSER', 'app', 'off')).toBe('OK');
    expect(await errorOf(open(port).call('AUTH', 'app', 'app-pw'))).toMatch(/^WRONGPASS/);
    expect(await app.get('app:1')).toBe('x');
    expect(await admin.call('ACL', 'SETUSER', 'app', 'on')).toBe('OK');
    // CLIENT KILL USER knows the user made with SETUSER.
    const closed = new Promise<void>((resolve) => app.once('close', () => resolve()));
    expect(await admin.client('KILL', 'USER', 'app')).toBe(1);
    await closed;
    // DELUSER closes the user's clients, and the user can no longer sign in.
    const again = new Redis({ port, maxRetriesPerRequest: 0, enableReadyCheck: false, username: 'app', password: 'app-pw', retryStrategy: () => null });
    clients.push(again);
    expect(await again.get('app:1')).toBe('x');
    const gone = new Promise<void>((resolve) => again.once('close', () => resolve()));
    expect(await admin.call('ACL', 'DELUSER', 'app')).toBe(1);
    await gone;
    expect(await errorOf(open(port).call('AUTH', 'app', 'app-pw'))).toMatch(/^WRONGPASS/);
    expect(await errorOf(admin.client('KILL', 'USER', 'app'))).toBe("ERR No such user 'app'");
    // The nodes never heard of it.
    expect(await cluster().masters[0].command('ACL', 'USERS')).toEqual(['default']);
  });

  test('SETUSER taking a channel away closes the user\'s clients subscribed to it, as Redis does', async () => {
    const port = proxyPort();
    const admin = open(port);
    expect(await admin.call('ACL', 'SETUSER', 'sub', 'on', '>s', '&news.*', '+@all')).toBe('OK');
    const channel = open(port, { username: 'sub', password: 's' });
    const pattern = open(port, { username: 'sub', password: 's' });
    await channel.subscribe('news.1');
    await pattern.psubscribe('news.*');
    const patternClosed = new Promise<void>((resolve) => pattern.once('close', () => resolve()));
    // news.1 is still allowed; the pattern news.* no longer is one of the user's.
    expect(await admin.call('ACL', 'SETUSER', 'sub', 'resetchannels', '&news.1')).toBe('OK');
    await patternClosed;
    const got = new Promise<string>((resolve) => channel.once('message', (_c: string, m: string) => resolve(m)));
    expect(await admin.publish('news.1', 'still here')).toBe(1);
    expect(await got).toBe('still here');
  });

  test('the default user: SETUSER default resetpass locks new connections out, as on Redis', async () => {
    const port = proxyPort();
    const admin = open(port);
    expect(await admin.call('ACL', 'SETUSER', 'default', 'resetpass', '>admin-pw')).toBe('OK');
    try {
      expect(await errorOf(open(port).ping())).toBe('NOAUTH Authentication required.');
      expect(await open(port, { password: 'admin-pw' }).ping()).toBe('PONG');
    } finally {
      expect(await admin.call('ACL', 'SETUSER', 'default', 'nopass')).toBe('OK');
    }
    expect(await open(port).ping()).toBe('PONG');
  });

  test('a reload keeps users made with SETUSER unless the file\'s auth section changed', async () => {
    const server = proxy as ProxyServer;
    const admin = open(proxyPort());
    expect(await admin.call('ACL', 'SETUSER', 'kept', 'on', '>k')).toBe('OK');
    server.prepareReload(server.config)();
    expect(await admin.call('ACL', 'USERS')).toContain('kept');
    server.prepareReload({ ...server.config, auth: { password: 'file-pw', users: [{ name: 'fromfile', password: 'f' }] } })();
    const signedIn = open(proxyPort(), { password: 'file-pw' });
    expect(await signedIn.call('ACL', 'USERS')).toEqual(['default', 'fromfile']);
    server.prepareReload({ ...server.config, auth: undefined })();
    expect(await open(proxyPort()).call('ACL', 'USERS')).toEqual(['default']);
  });

  test('ACL SAVE and LOAD are refused with the reason', async () => {
    const c = open(proxyPort());
    expect(await errorOf(c.call('ACL', 'SAVE'))).toMatch(/^ERR slotproxy does not support 'ACL': the proxy's users come from its config file/);
    expect(await errorOf(c.call('ACL', 'LOAD'))).toMatch(/^ERR slotproxy does not support 'ACL'/);
  });
});
