// Per-user permissions (auth.users[].commands, keys, channels) through slotproxy in front of 3
// masters, with real clients: each rule kind compared byte for byte with one Redis (a single-node
// Redis Cluster) given the same users by ACL SETUSER; a denied key inside MULTI and inside a
// cross-slot split never reaching a node; the counters in INFO proxy and /metrics; and a running
// `slotproxy start` reloading the rules on SIGHUP (a bad rule refused, the old rules kept).

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { freePort } from '../../cmd/sandbox/ports';
import { ruleTokens } from '../../config/acl-rules';
import { ProxyServer } from '../../proxy/server/server';
import { useCluster } from '../helpers/cluster';
import { startProxy } from '../helpers/proxy';
import { RawRequest, exchange, splitReplies } from '../helpers/raw-exchange';
import { errorOf } from '../helpers/reply-error';
import { BIN, ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { redisCliBin } from '../../cmd/sandbox/helpers';
import { nopermText } from '../helpers/server-version';

const NOPERM_KEY = nopermText('key');
const NOPERM_CHANNEL = nopermText('channel');

interface User {
  name: string;
  password: string;
  commands?: string | string[];
  keys?: string | string[];
  channels?: string | string[];
}

const USERS: User[] = [
  // Everything but administration, on some keys and channels.
  { name: 'app', password: 'app-pw', commands: '+@all -@admin -@dangerous', keys: ['~cache:*', '%R~ro:*', '%W~wo:*'], channels: '&news.*' },
  // Reads only, every key; SELECT 0 and nothing else.
  { name: 'reader', password: 'reader-pw', commands: ['-@all', '+@read', '+config|get', '+multi', '+exec', '+echo', '+ping', '+select|0'] },
  // No rules: everything, as before.
  { name: 'ops', password: 'ops-pw' },
];

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let reference: RedisCluster | undefined;
let proxy: ProxyServer | undefined;
let splitProxy: ProxyServer | undefined;
const clients: Redis[] = [];

beforeAll(async () => {
  reference = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
  // The same users on the reference: a new Redis user starts with -@all, no keys, no channels; a
  // field the config leaves out means everything.
  for (const u of USERS) {
    const rules = [
      ...(u.commands === undefined ? ['+@all'] : ruleTokens(u.commands)),
      ...(u.keys === undefined ? ['~*'] : ruleTokens(u.keys)),
      ...(u.channels === undefined ? ['&*'] : ruleTokens(u.channels)),
    ];
    await reference.masters[0].command('ACL', 'SETUSER', u.name, 'on', `>${u.password}`, ...rules);
  }
  const auth = { password: 'default-pw', users: USERS };
  proxy = await startProxy(cluster().seeds, { auth, metrics: { listen: '127.0.0.1:0' } });
  splitProxy = await startProxy(cluster().seeds, { auth, crossSlot: 'split' });
}, 90_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await proxy?.close(500);
  await splitProxy?.close(500);
  await reference?.stop();
}, 30_000);

function started(p: ProxyServer | undefined): ProxyServer {
  if (p === undefined) throw new Error('the proxy did not start');
  return p;
}

function referenceNode(): RedisNode {
  if (reference === undefined) throw new Error('the reference did not start');
  return reference.masters[0];
}

function connect(p: ProxyServer | undefined, username: string, password: string): Redis {
  const c = new Redis({ port: started(p).address.port, username, password, maxRetriesPerRequest: 0 });
  clients.push(c);
  return c;
}

const userOf = (name: string): User => USERS.find((u) => u.name === name) as User;

async function flushEverything(): Promise<void> {
  await Promise.all([...cluster().masters, referenceNode()].map((n) => n.command('FLUSHALL')));
}

/** Each case: a user, then one connection's requests (after its AUTH); the replies must be the reference's, byte for byte. */
const SAME_AS_REDIS: [string, string, RawRequest[]][] = [
  ['keys: patterns and the access each command needs', 'app', [
    ['GET', 'cache:1'], ['GET', 'other'], ['GET', 'ro:1'], ['GET', 'wo:1'],
    ['SET', 'ro:1', 'x'], ['SET', 'wo:1', 'x'], ['SET', 'wo:1', 'y', 'GET'], ['SET', 'cache:1', 'v', 'GET'], ['GET', 'cache:1'],
    ['LPUSH', 'wo:l', 'a'], ['LPUSH', 'ro:l', 'a'], ['GETDEL', 'wo:1'], ['DEL', 'ro:1'], ['DEL', 'wo:1'], ['EXISTS', 'wo:1'],
    ['BITFIELD', 'ro:b', 'GET', 'u8', '0'], ['BITFIELD', 'wo:b', 'SET', 'u8', '0', '1'], ['BITFIELD', 'cache:b', 'INCRBY', 'u8', '0', '1'],
  ]],
  ['keys: every key of a multi-key command, checked before CROSSSLOT', 'app', [
    ['MSET', 'cache:{a}1', 'x', 'wo:{a}2', 'y'], ['MSET', 'cache:{a}1', 'x', 'ro:{a}2', 'y'],
    ['MGET', 'cache:{a}1', 'ro:{a}2'], ['MGET', 'cache:{a}1', 'wo:{a}2'], ['MGET', 'cache:{a}1', 'other{a}'],
    ['MGET', 'cache:1', 'other'], ['MGET', 'cache:1', 'cache:2'], ['EXISTS', 'ro:1', 'wo:1'],
    ['COPY', 'ro:{c}1', 'wo:{c}2'], ['COPY', 'wo:{c}1', 'ro:{c}2'], ['ZUNIONSTORE', 'wo:{z}d', '2', 'cache:{z}a', 'ro:{z}b'], ['ZUNIONSTORE', 'wo:{z}d', '2', 'cache:{z}a', 'wo:{z}b'],
  ]],
  ['commands: categories and subcommands', 'app', [
    ['FLUSHALL'], ['FLUSHDB'], ['CONFIG', 'GET', 'maxmemory'], ['CONFIG', 'SET', 'maxmemory', '0'], ['KEYS', '*'], ['INFO'],
    ['CLIENT', 'KILL', 'ID', '1'], ['CLIENT', 'PAUSE', '10'], ['MONITOR'], ['PING'], ['NOSUCH', 'x'], ['GET'],
  ]],
  ['scripts: by their declared keys', 'app', [
    ['EVAL', 'return 1', '2', 'cache:{s}1', 'cache:{s}2', 'other'], ['EVAL', 'return 1', '2', 'cache:{s}1', 'other{s}'],
    ['EVAL', 'return 1', '1', 'ro:1'], ['EVAL_RO', 'return 1', '1', 'ro:1'], ['EVAL', 'return 1', '0'], ['EVAL', 'return 1', '5', 'a'],
  ]],
  ['SORT: STORE keys, BY and GET patterns', 'app', [
    ['RPUSH', 'cache:{l}', '3', '1', '2'], ['SORT', 'cache:{l}'], ['SORT', 'cache:{l}', 'BY', 'nosort'],
    ['SORT', 'cache:{l}', 'BY', '{l}w_*'], ['SORT', 'cache:{l}', 'GET', '{l}#'], ['SORT', 'cache:{l}', 'BY', 'w_*'], ['SORT', 'cache:{l}', 'GET', '#'],
    ['SORT', 'cache:{l}', 'STORE', 'ro:{l}x'], ['SORT', 'cache:{l}', 'STORE', 'wo:{l}x'], ['SORT', 'cache:{l}', 'LIMIT', 'x', '1', 'GET', '{l}y'],
  ]],
  ['channels', 'app', [
    ['PUBLISH', 'news.x', 'hi'], ['PUBLISH', 'other', 'hi'], ['SPUBLISH', 'other', 'hi'], ['SUBSCRIBE', 'news.x', 'other'], ['PSUBSCRIBE', 'news.x'], ['SSUBSCRIBE', 'other'],
  ]],
  ['MULTI: a denied key or command is refused when queued, and EXEC aborts', 'app', [
    ['MULTI'], ['SET', 'cache:{m}1', 'x'], ['GET', 'other{m}'], ['FLUSHALL'], ['EXEC'], ['GET', 'cache:{m}1'],
    ['MULTI'], ['SET', 'wo:{m}1', 'x'], ['GET', 'cache:{m}2'], ['EXEC'],
  ]],
  ['reader: commands only', 'reader', [
    ['GET', 'x'], ['SET', 'x', '1'], ['DBSIZE'], ['CONFIG', 'SET', 'maxmemory', '0'], ['FLUSHDB'], ['PUBLISH', 'a', 'b'],
    ['SELECT', '0'], ['SELECT', '1'], ['CLIENT', 'ID'], ['MULTI'], ['GET', 'x'], ['SET', 'x', '1'], ['EXEC'],
  ]],
  ['a user without rules', 'ops', [['SET', 'x', '1'], ['GET', 'x'], ['DEL', 'x'], ['PUBLISH', 'a', 'b']]],
];

describe('the same replies as one Redis with the same ACL users', () => {
  test.each(SAME_AS_REDIS)('%s (%s)', async (_what, name, requests) => {
    const u = userOf(name);
    const all: RawRequest[] = [['AUTH', u.name, u.password], ...requests];
    await flushEverything();
    const expected = await exchange(referenceNode().port, all);
    await flushEverything();
    const got = await exchange(started(proxy).address.port, all);
    expect(splitReplies(got.replies)).toEqual(splitReplies(expected.replies));
    expect(got.closed).toBe(expected.closed);
  });
});

/** Calls of `command` on the masters so far (INFO commandstats). */
async function callsOnMasters(command: string): Promise<number> {
  let n = 0;
  for (const m of cluster().masters) {
    const m1 = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(String(await m.command('INFO', 'commandstats')));
    n += m1 === null ? 0 : Number(m1[1]);
  }
  return n;
}

async function keysOnMasters(): Promise<number> {
  let n = 0;
  for (const m of cluster().masters) n += Number(await m.command('DBSIZE'));
  return n;
}

describe('with real clients', () => {
  beforeEach(flushEverything);

  test('ioredis: a denied key inside MULTI aborts the transaction; nothing reaches a node', async () => {
    const app = connect(proxy, 'app', 'app-pw');
    const execBefore = await callsOnMasters('exec');
    await expect(app.multi().set('cache:{t}1', 'x').get('other{t}').exec()).rejects.toThrow(/EXECABORT/);
    expect(await app.get('cache:{t}1')).toBeNull();
    expect(await callsOnMasters('exec')).toBe(execBefore);
    expect(await app.multi().set('cache:{t}1', 'x').set('wo:{t}2', 'y').exec()).toEqual([[null, 'OK'], [null, 'OK']]);
    expect(await app.get('cache:{t}1')).toBe('x');
  });

  test('crossSlot split: every key of the whole request is checked before it is cut; no part is sent', async () => {
    const app = connect(splitProxy, 'app', 'app-pw');
    expect(await app.mset('cache:1', 'a', 'cache:2', 'b', 'cache:3', 'c')).toBe('OK');
    expect(await app.mget('cache:1', 'cache:2', 'cache:3')).toEqual(['a', 'b', 'c']);
    const [mget, mset, del] = [await callsOnMasters('mget'), await callsOnMasters('mset'), await callsOnMasters('del')];
    expect(await errorOf(app.mget('cache:1', 'cache:2', 'other'))).toBe(NOPERM_KEY);
    expect(await errorOf(app.mset('cache:1', 'x', 'cache:2', 'y', 'ro:3', 'z'))).toBe(NOPERM_KEY);
    expect(await errorOf(app.del('wo:1', 'wo:2', 'cache:3', 'ro:4'))).toBe(NOPERM_KEY); // DEL writes: %R~ro:* is not enough
    expect([await callsOnMasters('mget'), await callsOnMasters('mset'), await callsOnMasters('del')]).toEqual([mget, mset, del]);
    expect(await app.mget('cache:1', 'cache:2', 'cache:3')).toEqual(['a', 'b', 'c']);
    expect(await app.del('wo:1', 'cache:1', 'cache:2')).toBe(2);
  });

  test('a denied FLUSHALL, CONFIG SET or PROXY never reaches a node', async () => {
    const app = connect(proxy, 'app', 'app-pw');
    await app.set('cache:keep', '1');
    expect(await errorOf(app.flushall())).toBe(nopermText('command', 'app', 'flushall'));
    expect(await errorOf(app.config('SET', 'maxmemory-policy', 'allkeys-lru'))).toBe(nopermText('command', 'app', 'config|set'));
    expect(await errorOf(app.call('PROXY', 'MIGRATION', 'STATUS'))).toBe(nopermText('command', 'app', 'proxy'));
    expect(await keysOnMasters()).toBe(1);
    for (const m of cluster().masters) expect(String(await m.command('CONFIG', 'GET', 'maxmemory-policy'))).toContain('noeviction');
  });

  test('the fan-out admin commands are @admin/@dangerous through the proxy (Redis files SCRIPT FLUSH under @scripting only)', async () => {
    const app = connect(proxy, 'app', 'app-pw');
    expect(await errorOf(app.script('FLUSH'))).toBe(nopermText('command', 'app', 'script|flush'));
    expect(await errorOf(app.call('FUNCTION', 'FLUSH'))).toBe(nopermText('command', 'app', 'function|flush'));
    expect(await app.script('LOAD', 'return 1')).toMatch(/^[0-9a-f]{40}$/);
    // The reference lets the same user flush its scripts: the one intended difference.
    const ref = new Redis({ port: referenceNode().port, username: 'app', password: 'app-pw', maxRetriesPerRequest: 0 });
    clients.push(ref);
    expect(await ref.script('FLUSH')).toBe('OK');
  });

  test('ioredis: channels, subscribed and published', async () => {
    const sub = connect(proxy, 'app', 'app-pw');
    const pub = connect(proxy, 'app', 'app-pw');
    await expect(sub.subscribe('other')).rejects.toThrow(NOPERM_CHANNEL);
    await expect(sub.psubscribe('news.?')).rejects.toThrow(NOPERM_CHANNEL);
    const got = new Promise<string>((resolve) => sub.on('message', (_channel: string, message: string) => resolve(message)));
    await sub.subscribe('news.x');
    expect(await pub.publish('news.x', 'hello')).toBe(1);
    expect(await got).toBe('hello');
    expect(await errorOf(pub.publish('other', 'x'))).toBe(NOPERM_CHANNEL);
  });

  test('redis-cli as each user', async () => {
    const cli = (user: string, password: string, ...args: string[]): Promise<string> =>
      new Promise((resolve, reject) => {
        execFile(redisCliBin(), ['-p', String(started(proxy).address.port), '--user', user, '--pass', password, '--no-auth-warning', ...args], (err, stdout) =>
          err === null ? resolve(stdout.trim()) : reject(err),
        );
      });
    expect(await cli('app', 'app-pw', 'SET', 'cache:cli', 'v')).toBe('OK');
    expect(await cli('app', 'app-pw', 'SET', 'ro:cli', 'v')).toBe(NOPERM_KEY);
    expect(await cli('app', 'app-pw', 'PUBLISH', 'other', 'v')).toBe(NOPERM_CHANNEL);
    expect(await cli('reader', 'reader-pw', 'GET', 'cache:cli')).toBe('v');
    expect(await cli('reader', 'reader-pw', 'DEL', 'cache:cli')).toBe(nopermText('command', 'reader', 'del'));
    expect(await cli('ops', 'ops-pw', 'DEL', 'cache:cli')).toBe('1');
  });

  test('signing in as another user changes the permissions on the same connection', async () => {
    const c = connect(proxy, 'reader', 'reader-pw');
    expect(await errorOf(c.set('cache:x', '1'))).toMatch(/^NOPERM/);
    expect(await c.call('AUTH', 'app', 'app-pw')).toBe('OK');
    expect(await c.set('cache:x', '1')).toBe('OK');
    expect(await c.call('AUTH', 'default', 'default-pw')).toBe('OK');
    expect(await c.set('other', '1')).toBe('OK');
  });
});

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

describe('counted in INFO proxy and /metrics', () => {
  test('each refusal once, by what was refused', async () => {
    const p = started(proxy);
    const app = connect(proxy, 'app', 'app-pw');
    const reader = connect(proxy, 'reader', 'reader-pw');
    // Signed in (ioredis's ready check, an INFO, is refused to both and counted too).
    await Promise.all([app.ping(), reader.ping()]);
    const before = { ...p.stats.aclDenied };
    await errorOf(app.flushall());
    await errorOf(app.get('other'));
    await errorOf(app.mget('cache:1', 'other'));
    await errorOf(app.publish('other', 'x'));
    await errorOf(reader.set('x', '1'));
    expect(p.stats.aclDenied).toEqual({ command: before.command + 2, key: before.key + 2, channel: before.channel + 1 });
    const info = String(await connect(proxy, 'ops', 'ops-pw').call('INFO', 'proxy'));
    const field = (name: string): number => Number(new RegExp(`\\r\\n${name}:(\\d+)\\r\\n`).exec(info)?.[1]);
    const { command, key, channel } = p.stats.aclDenied;
    expect([field('acl_denied'), field('acl_denied_cmd'), field('acl_denied_key'), field('acl_denied_channel')]).toEqual([command + key + channel, command, key, channel]);
    const metrics = await scrape(p.metricsPort as number);
    expect(metrics).toContain(`slotproxy_errors_total{kind="noperm"} ${command + key + channel}`);
    expect(metrics).toContain(`slotproxy_acl_denied_total{reason="command"} ${command}`);
    expect(metrics).toContain(`slotproxy_acl_denied_total{reason="key"} ${key}`);
    expect(metrics).toContain(`slotproxy_acl_denied_total{reason="channel"} ${channel}`);
  });
});

describe('reloaded by SIGHUP (the built binary)', () => {
  let dir: string;
  let file: string;
  let proc: ProxyProcess | undefined;
  let port: number;

  const write = (appRules: string): void => {
    fs.writeFileSync(
      file,
      [
        `listen: 127.0.0.1:${port}`,
        'mode: cluster',
        'cluster:',
        `  seeds: [${cluster().seeds[0]}]`,
        'log:',
        '  level: info',
        'auth:',
        '  users:',
        `    - { name: app, password: app-pw, ${appRules} }`,
        '',
      ].join('\n'),
    );
  };

  beforeAll(async () => {
    dir = tempDir('slotproxy-permissions-');
    file = path.join(dir, 'proxy.yaml');
    port = await freePort();
    write('commands: "+@all"');
    proc = ProxyProcess.start(file);
    await proc.waitForLog(/slotproxy is listening/, 20_000);
  }, 30_000);

  afterAll(() => {
    killAllProxies();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('new rules apply to signed-in clients at once; a bad rule is refused and the old rules stay', async () => {
    if (proc === undefined) throw new Error('slotproxy did not start');
    const c = new Redis({ port, username: 'app', password: 'app-pw', maxRetriesPerRequest: 0 });
    try {
      await reloads(proc, c);
    } finally {
      c.disconnect(); // before the process is killed
    }
  }, 40_000);

  test('check-config refuses a bad rule and a command Redis 7.0 does not have, naming the field', async () => {
    const check = (): Promise<{ code: number; stderr: string }> =>
      new Promise((resolve) => {
        execFile(process.execPath, [BIN, 'check-config', file], (err, _stdout, stderr) =>
          resolve({ code: err === null ? 0 : Number(err.code), stderr }),
        );
      });
    write('commands: "+@all -@admin +config|get", keys: "~a:* %R~b:*", channels: ["&news.*"]');
    expect(await check()).toEqual({ code: 0, stderr: '' });
    write('keys: "%X~a"');
    const bad = await check();
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('auth.users[0].keys: "%X~a": Syntax error');
    write('commands: "+@all -flushal"');
    const unknown = await check();
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain(`auth.users[0].commands: "-flushal": Unknown command or category name in ACL`);
    write('commands: "+@all"');
  });

  async function reloads(proc: ProxyProcess, c: Redis): Promise<void> {
    expect(await c.set('hup:1', 'v')).toBe('OK');
    const id = await c.client('ID');

    write('commands: "-@all +@read +client|id", keys: ["%R~hup:*"]');
    proc.kill('SIGHUP');
    await proc.waitForLog(/configuration reloaded/, 10_000);
    expect(await c.get('hup:1')).toBe('v');
    expect(await errorOf(c.set('hup:1', 'w'))).toBe(nopermText('command', 'app', 'set'));
    expect(await errorOf(c.get('other'))).toBe(NOPERM_KEY);

    write('commands: "+@all +@nosuch"');
    proc.kill('SIGHUP');
    await proc.waitForLog(/reload refused/, 10_000);
    expect(proc.log).toMatch(/auth\.users\[0\]\.commands: \\"\+@nosuch\\": Unknown command or category name in ACL/);
    expect(await errorOf(c.set('hup:1', 'w'))).toMatch(/^NOPERM/);

    // Valid syntax, but no such command in the back end's table: refused too.
    write('commands: "+@all -nosuchcmd"');
    proc.kill('SIGHUP');
    await proc.waitForLog(/reload refused/, 10_000, 2);
    expect(proc.log).toContain("no command 'nosuchcmd' in the back end's COMMAND table");
    expect(await errorOf(c.set('hup:1', 'w'))).toMatch(/^NOPERM/);
    expect(await c.client('ID')).toBe(id); // the same connection throughout
  }
});
