// CONFIG SET requirepass through slotproxy is the proxy's password, as on one Redis, and never
// reaches the nodes: the same sequence on the proxy and on one Redis (a single-node cluster), replies
// compared byte for byte; then every feature that opens back-end connections still works (the
// nodes took no password). Settings that would cut the proxy off its nodes are refused whole.
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { useReferenceNode } from '../helpers/reference-node';
import { startProxy } from '../helpers/proxy';
import { exchange, splitReplies } from '../helpers/raw-exchange';
import { errorOf } from '../helpers/reply-error';
import { collect } from '../helpers/subscriber';
import { useRingGrow } from '../helpers/ring-grow';
import { ProxyServer } from '../../proxy/server/server';
import { Placement } from '../../sharding/migration';
import { NodeClient } from '../../proxy/migration/tools/node-client';
import { eventually } from '../helpers/eventually';
import { NOAUTH_HELLO, withoutPipelinedWrongpass } from '../helpers/server-version';

const NOAUTH = 'NOAUTH Authentication required.';

const clients: Redis[] = [];
function open(port: number, options: { password?: string } = {}): Redis {
  // No ready check: its INFO would be refused NOAUTH before the test's own AUTH.
  const c = new Redis({ port, maxRetriesPerRequest: 0, enableReadyCheck: false, ...options });
  clients.push(c);
  return c;
}
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});


describe('cluster mode, compared with one Redis', () => {
  const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
  const reference = useReferenceNode();
  let proxy: ProxyServer | undefined;
  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds);
  }, 30_000);
  afterAll(async () => {
    await proxy?.close(500);
  });
  const ports = (): { proxy: number; redis: number } => ({ proxy: (proxy as ProxyServer).address.port, redis: reference.node().port });

  /** The nodes' own requirepass: the proxy's never reaches them. */
  async function nodePasswords(): Promise<string[]> {
    return Promise.all(cluster().masters.map(async (n) => String(((await n.command('CONFIG', 'GET', 'requirepass')) as string[])[1])));
  }

  test('CONFIG SET requirepass: new connections need AUTH, old ones stay signed in, then "" removes it; byte for byte', async () => {
    const seen: Record<string, string[]> = {};
    for (const [where, port] of Object.entries(ports())) {
      const old = open(port);
      expect(await old.set('pw:k', 'v')).toBe('OK');
      // The sequence in raw RESP on new connections, the same bytes from the proxy and from one Redis.
      const set = await exchange(port, [['CONFIG', 'SET', 'requirepass', 'temp_pass']]);
      const fresh = await exchange(port, [
        ['PING'], ['GET', 'pw:k'], ['HELLO', '3'], ['AUTH', 'wrong'], ['AUTH', 'default', 'wrong'], ['AUTH', 'a', 'b', 'c'],
        ['AUTH', 'temp_pass'], ['GET', 'pw:k'], ['CONFIG', 'GET', 'requirepass'], ['AUTH', 'default', 'temp_pass'],
      ]);
      // HELLO's own reply names the server (version, mode): only what follows it is compared.
      const hello = splitReplies((await exchange(port, [['HELLO', '2', 'AUTH', 'default', 'temp_pass', 'SETNAME', 'x'], ['CLIENT', 'GETNAME']])).replies);
      const stillIn = String(await old.get('pw:k'));
      const unset = await exchange(port, [['AUTH', 'temp_pass'], ['CONFIG', 'SET', 'requirepass', '']]);
      const after = await exchange(port, [['PING'], ['AUTH', 'x'], ['AUTH', 'default', 'x'], ['CONFIG', 'GET', 'requirepass']]);
      seen[where] = [set.replies, fresh.replies, hello[0].slice(0, 1), hello[1], stillIn, unset.replies, after.replies];
    }
    expect(seen.proxy.map((r) => (typeof r === 'string' ? withoutPipelinedWrongpass(r) : r))).toEqual(seen.redis);
    // Always answered (Redis 7.2 and later answer nothing to a failed AUTH pipelined behind replies not yet written).
    const wrongPass = '-WRONGPASS invalid username-password pair or user is disabled.\r\n'.repeat(2);
    expect(seen.proxy[1]).toBe(
      `-${NOAUTH}\r\n-${NOAUTH}\r\n-${NOAUTH_HELLO}\r\n${wrongPass}-ERR syntax error\r\n` +
        '+OK\r\n$1\r\nv\r\n*2\r\n$11\r\nrequirepass\r\n$9\r\ntemp_pass\r\n+OK\r\n',
    );
    expect(seen.proxy.slice(2, 5)).toEqual(['*', '$1\r\nx\r\n', 'v']);
    expect(seen.proxy[6]).toBe(
      '+PONG\r\n-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n+OK\r\n*2\r\n$11\r\nrequirepass\r\n$0\r\n\r\n',
    );
    expect(await nodePasswords()).toEqual(['', '', '']);
  });

  test('with a password set, every feature that opens back-end connections works: the nodes took none', async () => {
    const port = ports().proxy;
    expect(await open(port).config('SET', 'requirepass', 'temp_pass')).toBe('OK');
    try {
      expect(await nodePasswords()).toEqual(['', '', '']);
      // The pool's connections closed on every node: what follows opens new ones.
      await Promise.all(cluster().masters.map((n) => n.command('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')));
      const c = open(port, { password: 'temp_pass' });
      expect(await c.mset('{a}1', 'x', '{a}2', 'y')).toBe('OK');
      expect(await c.mget('{a}1', '{a}2')).toEqual(['x', 'y']);
      expect(await c.dbsize()).toBeGreaterThanOrEqual(2); // every master
      // A blocking command (a connection of its own), woken by another client's push.
      const blocked = open(port, { password: 'temp_pass' });
      const popped = blocked.blpop('pw:list', 10);
      await eventually(() => c.client('LIST'), (list) => / cmd=blpop /.test(String(list)));
      await c.rpush('pw:list', 'item');
      expect(await popped).toEqual(['pw:list', 'item']);
      // A subscription.
      const sub = open(port, { password: 'temp_pass' });
      const messages = collect(sub);
      await sub.subscribe('pw:chan');
      await c.publish('pw:chan', 'hello');
      await eventually(async () => messages.length, (n) => n >= 1);
      expect(messages[0]).toContain('hello');
      // A tracking client: invalidations redirected to a subscriber of __redis__:invalidate.
      const redirect = open(port, { password: 'temp_pass' });
      const invalidations: string[] = [];
      redirect.on('message', (_channel: string, keys: unknown) => invalidations.push(String(keys)));
      const redirectId = Number(await redirect.client('ID'));
      await redirect.subscribe('__redis__:invalidate');
      const tracker = open(port, { password: 'temp_pass' });
      expect(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', String(redirectId))).toBe('OK');
      await c.set('pw:tracked', '1');
      expect(await tracker.get('pw:tracked')).toBe('1');
      await c.set('pw:tracked', '2');
      await eventually(async () => invalidations.join(','), (s) => s.includes('pw:tracked'));
    } finally {
      expect(await open(port, { password: 'temp_pass' }).config('SET', 'requirepass', '')).toBe('OK');
    }
    expect(await open(port).ping()).toBe('PONG');
  });

  test('settings that would cut the proxy off its nodes are refused whole, nothing changed anywhere', async () => {
    const port = ports().proxy;
    const c = open(port);
    const maxclients = await Promise.all(cluster().masters.map((n) => n.command('CONFIG', 'GET', 'maxclients')));
    for (const args of [
      ['masterauth', 'x'], ['masteruser', 'x'], ['port', '1'], ['bind', '10.0.0.1'], ['tls-port', '6390'], ['protected-mode', 'yes'],
      ['aclfile', '/tmp/x'], ['maxclients', '2'], ['cluster-announce-ip', '10.0.0.1'], ['requirepass', 'p', 'maxclients', '2'],
      ['maxmemory', '0', 'MasterAuth', 'x'],
    ]) {
      const message = await errorOf(c.config('SET', ...(args as [string, string])));
      expect(message).toMatch(new RegExp(`^ERR slotproxy does not support CONFIG SET '${args.find((a) => a !== 'requirepass' && a !== 'p' && a !== 'maxmemory' && a !== '0')?.toLowerCase()}': .+; nothing was changed$`));
    }
    expect(await open(port).ping()).toBe('PONG'); // requirepass was not set
    expect(await Promise.all(cluster().masters.map((n) => n.command('CONFIG', 'GET', 'maxclients')))).toEqual(maxclients);
    // Redis's own refusal of a duplicate, byte for byte.
    const duplicate = ['CONFIG', 'SET', 'requirepass', 'a', 'requirepass', 'b'];
    expect((await exchange(ports().proxy, [duplicate])).replies).toBe((await exchange(ports().redis, [duplicate])).replies);
    // The nodes refuse the other parameter: the password is not taken either.
    expect(await errorOf(c.config('SET', 'requirepass', 'p', 'maxmemory', '1x'))).toMatch(/argument must be a memory value/);
    expect(await open(port).ping()).toBe('PONG');
    // Taken together with a parameter the nodes accept.
    expect(await c.config('SET', 'requirepass', 'p', 'maxmemory-samples', '6')).toBe('OK');
    expect(await errorOf(open(port).ping())).toBe(NOAUTH);
    expect(await Promise.all(cluster().masters.map(async (n) => ((await n.command('CONFIG', 'GET', 'maxmemory-samples')) as string[])[1]))).toEqual(['6', '6', '6']);
    expect(await nodePasswords()).toEqual(['', '', '']);
    expect(await c.config('SET', 'requirepass', '', 'maxmemory-samples', '5')).toBe('OK');
    // Inside MULTI: refused when queued, EXEC aborts.
    const m = await c.multi().config('SET', 'requirepass', 'p').exec().catch((e: Error) => e.message);
    expect(String(m)).toMatch(/EXECABORT/);
    expect(await open(port).ping()).toBe('PONG');
  });
  test('a reload keeps the password CONFIG SET gave unless the file\'s auth section changed', async () => {
    const server = proxy as ProxyServer;
    const port = ports().proxy;
    expect(await open(port).config('SET', 'requirepass', 'temp_pass')).toBe('OK');
    server.prepareReload(server.config)();
    expect(await errorOf(open(port).ping())).toBe(NOAUTH);
    expect(await open(port, { password: 'temp_pass' }).ping()).toBe('PONG');
    // The file now has a password of its own: it replaces the one CONFIG SET gave.
    server.prepareReload({ ...server.config, auth: { password: 'from_file' } })();
    expect(await errorOf(open(port, { password: 'temp_pass' }).ping())).toMatch(/^WRONGPASS/);
    const c = open(port, { password: 'from_file' });
    expect(await c.config('GET', 'requirepass')).toEqual(['requirepass', 'from_file']);
    server.prepareReload({ ...server.config, auth: undefined })();
    expect(await open(port).ping()).toBe('PONG');
  });
});

describe('ring mode during a migration: the change feeds keep working', () => {
  const grow = useRingGrow();
  let proxy: ProxyServer | undefined;
  let layout: NodeClient | undefined;
  let placement: Placement;
  beforeAll(async () => {
    layout = new NodeClient(grow.config());
    await layout.start();
    placement = layout.placement();
    proxy = await ProxyServer.start(grow.config());
  }, 30_000);
  afterAll(async () => {
    layout?.close();
    await proxy?.close(500);
  });

  test('a change feed reopened after CONFIG SET requirepass still signs in to its node', async () => {
    const port = (proxy as ProxyServer).address.port;
    expect(await open(port).config('SET', 'requirepass', 'temp_pass')).toBe('OK');
    const admin = open(port, { password: 'temp_pass' });
    let key = '';
    for (let i = 0; key === ''; i++) if (placement.copyTarget(Buffer.from(`pw${i}`)) !== null) key = `pw${i}`;
    const target = placement.copyTarget(Buffer.from(key));
    const [aHost, aPort] = (target?.from ?? '').split(':');
    const [bHost, bPort] = (target?.to ?? '').split(':');
    const a = new Redis({ host: aHost, port: Number(aPort), maxRetriesPerRequest: 0 });
    const b = new Redis({ host: bHost, port: Number(bPort), maxRetriesPerRequest: 0 });
    clients.push(a, b);
    expect(((await a.config('GET', 'requirepass')) as string[])[1]).toBe('');
    // Kill the proxy's feed on A (its BCAST tracking connection): the proxy opens another.
    const feedId = /id=(\d+) [^\n]*flags=tB/.exec(String(await a.client('LIST')))?.[1];
    expect(feedId).toBeDefined();
    await a.client('KILL', 'ID', feedId as string);
    await eventually(async () => String(await admin.call('PROXY', 'MIGRATION', 'STATUS')), (s) => !s.includes('uncovered:'));
    // A write made straight on A reaches B through the new feed.
    await a.set(key, 'straight on A');
    await eventually(() => b.get(key), (v) => v === 'straight on A');
    expect(await admin.get(key)).toBe('straight on A');
    expect(await admin.config('SET', 'requirepass', '')).toBe('OK');
  });
});
