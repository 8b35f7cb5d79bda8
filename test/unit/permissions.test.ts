// Per-user permissions: the rule parser (config/acl-rules.ts), Redis's glob (proxy/security/glob.ts),
// the matcher (proxy/security/permissions.ts) over the command table recorded from Redis 7.0, and
// the config errors. Expected texts and verdicts were taken from a real redis-server 7.0.15 given the
// same rules with ACL SETUSER (test/integration/permissions.test.ts compares them live).

import { parseChannelRules, parseCommandRules, parseKeyRules, ruleTokens } from '../../config/acl-rules';
import { ConfigError, parseConfig } from '../../config/load';
import { CommandInfo, CommandTable } from '../../proxy/commands/table';
import { resolveSubcommand } from '../../proxy/commands/keys';
import { globMatch } from '../../proxy/security/glob';
import { PROXY_COMMAND, UserPermissions, UserRules, compilePermissions } from '../../proxy/security/permissions';
import { ClientAuth } from '../../proxy/security/auth';

const table = CommandTable.fallback();
const NOPERM_KEY = 'NOPERM this user has no permissions to access one of the keys used as arguments';
const NOPERM_CHANNEL = 'NOPERM this user has no permissions to access one of the channels used as arguments';
const nopermCommand = (name: string): string => `NOPERM this user has no permissions to run the '${name}' command`;

function user(rules: Omit<UserRules, 'name'>): UserPermissions {
  const p = compilePermissions({ name: 'u', ...rules }, 0, table);
  if (p === null) throw new Error('no rules');
  return p;
}

/** Splits on spaces; `''` stands for an empty argument. */
function words(line: string): Buffer[] {
  return line.split(' ').map((w) => Buffer.from(w === "''" ? '' : w));
}

/** The denial's text for `line`, or 'OK' when the request is allowed. */
function verdict(p: UserPermissions, line: string): string {
  const args = words(line);
  const top = table.lookup(args[0]);
  if (top === undefined) throw new Error(`no command ${line}`);
  const sub = top.subcommands !== null && args.length > 1 ? resolveSubcommand(top, args) : top;
  if (sub === null || Buffer.isBuffer(sub)) throw new Error(`no subcommand ${line}`);
  return p.check(sub, args)?.message ?? 'OK';
}

describe('the recorded table carries the ACL categories', () => {
  test('own categories, and a subcommand also has its container\'s', () => {
    expect([...(table.get('get') as CommandInfo).aclCategories].sort()).toEqual(['fast', 'read', 'string']);
    expect([...(table.get('flushall') as CommandInfo).aclCategories].sort()).toEqual(['dangerous', 'keyspace', 'slow', 'write']);
    const config = table.get('config') as CommandInfo;
    expect([...(config.subcommands?.get('set') as CommandInfo).aclCategories].sort()).toEqual(['admin', 'dangerous', 'slow']);
  });

  test('every command and subcommand has at least one category', () => {
    const none = [...table.all()].filter((c) => c.aclCategories.size === 0).map((c) => c.name);
    expect(none).toEqual([]);
  });

  test('key specs carry the access ACL checks for', () => {
    const acl = (name: string): number[] => (table.get(name) as CommandInfo).keySpecs.map((s) => s.acl);
    expect(acl('get')).toEqual([1]); // RO access
    expect(acl('lpush')).toEqual([2]); // RW insert
    expect(acl('getdel')).toEqual([3]); // RW access delete
    expect(acl('exists')).toEqual([0]); // RO, no logical flag: any pattern
    expect(acl('copy')).toEqual([1, 2]);
  });
});

describe('rule parser', () => {
  test('a string or a list, split on spaces', () => {
    expect(ruleTokens('+@all  -@admin')).toEqual(['+@all', '-@admin']);
    expect(ruleTokens(['+@read', '+set +get'])).toEqual(['+@read', '+set', '+get']);
  });

  test('command rules, in order', () => {
    expect(parseCommandRules('allcommands NoCommands +@ALL -@all +@Read -FlushAll +CONFIG|GET -config|set +select|Db0')).toEqual({
      problems: [],
      rules: [
        { kind: 'all', allow: true },
        { kind: 'all', allow: false },
        { kind: 'all', allow: true },
        { kind: 'all', allow: false },
        { kind: 'category', allow: true, category: 'read' },
        { kind: 'command', allow: false, name: 'flushall', sub: null, token: '-FlushAll' },
        { kind: 'command', allow: true, name: 'config', sub: 'GET', token: '+CONFIG|GET' },
        { kind: 'command', allow: false, name: 'config', sub: 'set', token: '-config|set' },
        { kind: 'command', allow: true, name: 'select', sub: 'Db0', token: '+select|Db0' },
      ],
    });
  });

  // The Redis texts are ACL SETUSER's for the same modifier.
  test.each([
    ['+@nosuch', 'Unknown command or category name in ACL'],
    ['+@', 'Unknown command or category name in ACL'],
    ['+', 'Unknown command or category name in ACL'],
    ['+|x', 'Unknown command or category name in ACL'],
    ['-config|get|x', 'Unknown command or category name in ACL'],
    ['-config|', 'Unknown command or category name in ACL'],
    ['+config|', 'Syntax error'],
    ['+config|get|x', 'Allowing first-arg of a subcommand is not supported'],
    ['on', 'Syntax error'],
    ['>secret', 'Syntax error'],
    ['~cache:*', 'a key rule; put it under "keys"'],
    ['&news', 'a channel rule; put it under "channels"'],
    ['(+get)', 'selectors are not supported'],
  ])('commands %j: %s', (rule, why) => {
    const { rules, problems } = parseCommandRules(rule);
    expect(rules).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`${JSON.stringify(rule)}: ${why}`);
  });

  test('key rules: ~ is read and write, %R/%W/%RW in any case and order, ~* is allkeys', () => {
    expect(parseKeyRules('~a %R~b %w~c %WR~d %R~ %R resetkeys ~* ').rules).toEqual([
      { kind: 'pattern', pattern: 'a', flags: 3 },
      { kind: 'pattern', pattern: 'b', flags: 1 },
      { kind: 'pattern', pattern: 'c', flags: 2 },
      { kind: 'pattern', pattern: 'd', flags: 3 },
      { kind: 'pattern', pattern: '', flags: 1 },
      { kind: 'pattern', pattern: '', flags: 1 },
      { kind: 'reset' },
      { kind: 'all' },
    ]);
    expect(parseKeyRules('%RW~*').rules).toEqual([{ kind: 'pattern', pattern: '*', flags: 3 }]); // a pattern, not allkeys
  });

  test.each([
    ['%~x', 'Syntax error'],
    ['%', 'Syntax error'],
    ['%RR~x', 'Syntax error'],
    ['%X~x', 'Syntax error'],
    ['+get', 'a command rule; put it under "commands"'],
    ['cache:*', 'Syntax error (expected ~pattern'],
  ])('keys %j: %s', (rule, why) => {
    expect(parseKeyRules(rule).problems[0]).toContain(`${JSON.stringify(rule)}: ${why}`);
  });

  test('a pattern after allkeys (or ~*) is refused until resetkeys, with Redis\'s text', () => {
    expect(parseKeyRules('allkeys ~x').problems).toEqual([
      `"~x": Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns`,
    ]);
    expect(parseKeyRules('~* %R~x').problems).toHaveLength(1);
    expect(parseKeyRules('allkeys resetkeys ~x').problems).toEqual([]);
  });

  test('channel rules', () => {
    expect(parseChannelRules('&news.* &a allchannels resetchannels &').rules).toEqual([
      { kind: 'pattern', pattern: 'news.*' },
      { kind: 'pattern', pattern: 'a' },
      { kind: 'all' },
      { kind: 'reset' },
      { kind: 'pattern', pattern: '' },
    ]);
    expect(parseChannelRules('&* &x').problems[0]).toContain("or the 'allchannels' flag");
    expect(parseChannelRules('~x').problems[0]).toContain('a key rule; put it under "keys"');
  });
});

describe('globMatch (Redis stringmatchlen)', () => {
  // Checked against a real redis-server 7.0.15: 3,949 random patterns over 215 keys built from
  // `ab*?[]^-\` and bytes 0x80/0xff gave the same KEYS answers (see the commit message).
  test.each([
    ['*', 'anything', true],
    ['*', '', false], // Redis: * does not match an empty string
    ['', '', true],
    ['cache:*', 'cache:1', true],
    ['cache:*', 'cach', false],
    ['h?llo', 'hello', true],
    ['h?llo', 'hllo', false],
    ['h[ae]llo', 'hallo', true],
    ['h[^e]llo', 'hello', false],
    ['h[a-b]llo', 'hbllo', true],
    ['h[b-a]llo', 'hbllo', true], // reversed range
    ['h\\*llo', 'h*llo', true],
    ['h\\*llo', 'hello', false],
    ['a\\', 'a\\', true], // a trailing backslash is a literal
    ['[abc', 'a', true], // an unterminated class ends with the pattern
    ['[abc', 'ab', false],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'aXbY', false],
    ['*a*a*a*a*a*a*a*a*b', 'a'.repeat(60), false], // polynomial, not exponential
  ])('%j ~ %j -> %j', (pattern, text, expected) => {
    expect(globMatch(Buffer.from(pattern), Buffer.from(text))).toBe(expected);
  });

  test('range bounds compare as signed char, as in C', () => {
    // [a-\xff] is [\xff-a] once swapped: bytes 0x00..0x61 and 0xff, not 0x80.
    const p = Buffer.from([0x5b, 0x61, 0x2d, 0xff, 0x5d]);
    expect(globMatch(p, Buffer.from([0x41]))).toBe(true);
    expect(globMatch(p, Buffer.from([0xff]))).toBe(true);
    expect(globMatch(p, Buffer.from([0x80]))).toBe(false);
    expect(globMatch(p, Buffer.from([0x62]))).toBe(false);
  });
});

describe('command rules', () => {
  test('categories, commands and subcommands, left to right', () => {
    const p = user({ commands: '-@all +@read +set +config|get -keys' });
    expect(verdict(p, 'GET k')).toBe('OK');
    expect(verdict(p, 'SET k v')).toBe('OK');
    expect(verdict(p, 'CONFIG GET maxmemory')).toBe('OK');
    expect(verdict(p, 'KEYS *')).toBe(nopermCommand('keys')); // @read, then -keys
    expect(verdict(p, 'DEL k')).toBe(nopermCommand('del'));
    expect(verdict(p, 'CONFIG SET maxmemory 0')).toBe(nopermCommand('config|set'));
    expect(verdict(p, 'FLUSHALL')).toBe(nopermCommand('flushall'));
  });

  test('+@all -@admin +config|get', () => {
    const p = user({ commands: ['+@all', '-@admin', '+config|get'] });
    expect(verdict(p, 'CONFIG GET x')).toBe('OK');
    expect(verdict(p, 'CONFIG SET x y')).toBe(nopermCommand('config|set'));
    expect(verdict(p, 'CLIENT PAUSE 10')).toBe(nopermCommand('client|pause'));
    expect(verdict(p, 'CLIENT ID')).toBe('OK');
    expect(verdict(p, 'GET k')).toBe('OK');
  });

  test('the fan-out admin commands are @admin and @dangerous on top of Redis\'s categories', () => {
    const noAdmin = user({ commands: '+@all -@admin' });
    const noDangerous = user({ commands: '+@all -@dangerous' });
    for (const line of ['FLUSHALL', 'FLUSHDB', 'SCRIPT FLUSH', 'FUNCTION FLUSH', 'FUNCTION DELETE lib', 'FUNCTION RESTORE x', 'CONFIG SET a b', 'CLIENT PAUSE 1']) {
      expect(verdict(noAdmin, line)).toMatch(/^NOPERM this user has no permissions to run/);
      expect(verdict(noDangerous, line)).toMatch(/^NOPERM this user has no permissions to run/);
    }
    expect(verdict(noAdmin, 'SCRIPT LOAD x')).toBe('OK');
    expect(verdict(noAdmin, 'FUNCTION LIST')).toBe('OK');
    // +@scripting lets SCRIPT FLUSH in, as on Redis, unless @admin is taken away after it.
    expect(verdict(user({ commands: '+@scripting' }), 'SCRIPT FLUSH')).toBe('OK');
    expect(verdict(user({ commands: '+@scripting -@admin' }), 'SCRIPT FLUSH')).toBe(nopermCommand('script|flush'));
  });

  test('the PROXY command is @admin @dangerous, and `proxy` in rules', () => {
    expect(user({ commands: '+@all -@admin' }).check(PROXY_COMMAND, words('PROXY MIGRATION STATUS'))?.message).toBe(nopermCommand('proxy'));
    expect(user({ commands: '+@all -@dangerous' }).check(PROXY_COMMAND, words('PROXY MIGRATION STATUS'))?.reason).toBe('command');
    expect(user({ commands: '-@all +proxy' }).check(PROXY_COMMAND, words('PROXY MIGRATION STATUS'))).toBeNull();
    expect(user({ commands: '+@read' }).check(PROXY_COMMAND, words('PROXY MIGRATION STATUS'))?.reason).toBe('command');
  });

  test('a container rule reaches all its subcommands; a subcommand rule only itself', () => {
    const p = user({ commands: '+config -config|set' });
    expect(verdict(p, 'CONFIG GET x')).toBe('OK');
    expect(verdict(p, 'CONFIG RESETSTAT')).toBe('OK');
    expect(verdict(p, 'CONFIG SET a b')).toBe(nopermCommand('config|set'));
    expect(verdict(user({ commands: '+@all -config' }), 'CONFIG GET x')).toBe(nopermCommand('config|get'));
  });

  test('a category matching a container reaches its subcommands (Redis sets them all)', () => {
    // CONFIG itself is @slow only; CONFIG SET is @admin @slow @dangerous.
    expect(verdict(user({ commands: '+@slow' }), 'CONFIG SET a b')).toBe('OK');
    expect(verdict(user({ commands: '+@all -@slow' }), 'CONFIG GET x')).toBe(nopermCommand('config|get'));
  });

  test('first-argument rules (+select|0) and what resets them', () => {
    expect(verdict(user({ commands: '+select|0' }), 'SELECT 0')).toBe('OK');
    expect(verdict(user({ commands: '+select|A' }), 'SELECT a')).toBe('OK');
    expect(verdict(user({ commands: '+select|0' }), 'SELECT 1')).toBe(nopermCommand('select'));
    expect(verdict(user({ commands: '+select|0 -select' }), 'SELECT 0')).toBe(nopermCommand('select'));
    expect(verdict(user({ commands: '+select|0 -@connection' }), 'SELECT 0')).toBe(nopermCommand('select'));
    expect(verdict(user({ commands: '+select|0 +@read' }), 'SELECT 0')).toBe('OK'); // select is not @read
    expect(verdict(user({ commands: '+select|0 nocommands' }), 'SELECT 0')).toBe(nopermCommand('select'));
  });

  test('AUTH, HELLO, QUIT and RESET (no_auth) are never refused', () => {
    const p = user({ commands: 'nocommands' });
    for (const line of ['AUTH a b', 'HELLO 2', 'QUIT', 'RESET']) expect(verdict(p, line)).toBe('OK');
    expect(verdict(p, 'PING')).toBe(nopermCommand('ping'));
  });

  test('unknown commands and subcommands refuse the config, naming the field', () => {
    const problems = (rules: string): string[] => {
      try {
        compilePermissions({ name: 'u', commands: rules }, 3, table);
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    expect(problems('+nosuch -flushall')).toEqual([
      `auth.users[3].commands: "+nosuch": Unknown command or category name in ACL (no command 'nosuch' in the back end's COMMAND table)`,
    ]);
    expect(problems('+config|nosuch')[0]).toContain("no command 'config|nosuch'");
    expect(problems('-select|0')[0]).toContain('Unknown command or category name in ACL'); // as ACL SETUSER
    expect(problems('+select|0 +config|get +proxy -proxy')).toEqual([]);
  });
});

describe('key rules', () => {
  const p = user({ commands: '+@all', keys: '~cache:* %R~ro:* %W~wo:*' });

  test.each([
    ['GET cache:1', 'OK'],
    ['GET other', NOPERM_KEY],
    ['GET ro:1', 'OK'],
    ['GET wo:1', NOPERM_KEY],
    ['SET ro:1 x', NOPERM_KEY],
    ['SET wo:1 x', 'OK'], // a plain SET only writes (OW update)
    ['SET wo:1 x GET', NOPERM_KEY], // ... with GET it reads too
    ['SET cache:1 x GET', 'OK'],
    ['LPUSH wo:1 x', 'OK'], // RW insert: write
    ['LPUSH ro:1 x', NOPERM_KEY],
    ['GETDEL wo:1', NOPERM_KEY], // reads and deletes
    ['EXISTS wo:1', 'OK'], // RO without access: any matching pattern
    ['EXISTS ro:1 wo:1', 'OK'],
    ['COPY ro:1 wo:1', 'OK'],
    ['COPY wo:1 ro:1', NOPERM_KEY],
    ['DEL ro:1', NOPERM_KEY],
    ['DEL wo:1', 'OK'],
    ['BITFIELD ro:1 GET u8 0', 'OK'],
    ['BITFIELD ro:1 SET u8 0 1', NOPERM_KEY],
    ['BITFIELD wo:1 GET u8 0', NOPERM_KEY],
    ['BITFIELD wo:1 SET u8 0 1', NOPERM_KEY], // SET reads the old value too
    ['BITFIELD cache:1 INCRBY u8 0 1', 'OK'],
  ])('%s -> %s', (line, expected) => {
    expect(verdict(p, line)).toBe(expected);
  });

  test('every key of a multi-key command is checked', () => {
    expect(verdict(p, 'MGET cache:1 ro:1 cache:2')).toBe('OK');
    expect(verdict(p, 'MGET cache:1 ro:1 other')).toBe(NOPERM_KEY);
    expect(verdict(p, 'MSET cache:1 a wo:1 b')).toBe('OK');
    expect(verdict(p, 'MSET cache:1 a ro:1 b')).toBe(NOPERM_KEY);
    expect(verdict(p, 'ZUNIONSTORE wo:d 2 cache:a ro:b')).toBe('OK');
    expect(verdict(p, 'ZUNIONSTORE wo:d 2 cache:a wo:b')).toBe(NOPERM_KEY);
  });

  test('scripts by their declared keys only', () => {
    expect(verdict(p, "EVAL return 2 cache:1 cache:2 other")).toBe('OK'); // `other` is an argument
    expect(verdict(p, 'EVAL return 2 cache:1 other')).toBe(NOPERM_KEY);
    expect(verdict(p, 'EVAL return 1 ro:1')).toBe(NOPERM_KEY); // EVAL's keys are read and written
    expect(verdict(p, 'EVAL_RO return 1 ro:1')).toBe('OK');
    expect(verdict(p, 'EVALSHA abc 1 wo:1')).toBe(NOPERM_KEY);
    expect(verdict(p, 'FCALL f 1 cache:1')).toBe('OK');
    expect(verdict(p, 'FCALL_RO f 1 ro:1')).toBe('OK');
    expect(verdict(p, 'EVAL return 0')).toBe('OK');
    expect(verdict(p, 'EVAL return 5 a')).toBe('OK'); // bad numkeys: no key; the node answers the error
  });

  test('keys only getkeys procedures find: SORT ... STORE, MIGRATE ... KEYS', () => {
    expect(verdict(p, 'SORT cache:1 STORE cache:2')).toBe('OK');
    expect(verdict(p, 'SORT cache:1 STORE ro:2')).toBe(NOPERM_KEY);
    expect(verdict(p, 'SORT cache:1 STORE wo:2')).toBe('OK');
    expect(verdict(p, 'SORT wo:1')).toBe(NOPERM_KEY);
    expect(verdict(p, 'SORT_RO ro:1')).toBe('OK');
    expect(verdict(p, "MIGRATE h 1 '' 0 10 KEYS cache:1 cache:2")).toBe('OK');
    expect(verdict(p, "MIGRATE h 1 '' 0 10 AUTH pw KEYS cache:1 ro:2")).toBe(NOPERM_KEY);
    expect(verdict(p, 'MIGRATE h 1 other 0 10')).toBe(NOPERM_KEY);
  });

  test('SORT BY <pattern>/GET need read access to every key, as Redis checks while parsing', () => {
    expect(verdict(p, 'SORT ro:1 BY x_*')).toBe('ERR BY option of SORT denied due to insufficient ACL permissions.');
    expect(verdict(p, 'SORT ro:1 GET #')).toBe('ERR GET option of SORT denied due to insufficient ACL permissions.');
    expect(verdict(p, 'SORT ro:1 BY nosort')).toBe('OK');
    expect(verdict(p, 'SORT ro:1 LIMIT x 1 GET y')).toBe('OK'); // the node's integer error comes first
    expect(verdict(p, 'SORT ro:1 BLAH GET y')).toBe('OK'); // ... and its syntax error
    const readAll = user({ keys: '%R~*' });
    expect(verdict(readAll, 'SORT k BY x_* GET #')).toBe('OK');
    expect(verdict(user({ keys: '%W~*' }), 'SORT k BY x_*')).toBe(NOPERM_KEY); // the key itself is read
  });

  test('in front of a Redis Cluster, a SORT pattern of another slot is left to the node, which refuses it first', () => {
    const cluster = compilePermissions({ name: 'u', keys: '~cache:*' }, 0, table, true) as UserPermissions;
    expect(verdict(cluster, 'SORT cache:1 BY x_*')).toBe('OK'); // the node: "BY option of SORT denied in Cluster mode ..."
    expect(verdict(cluster, 'SORT cache:{t} BY {t}x_*')).toBe('ERR BY option of SORT denied due to insufficient ACL permissions.');
    expect(verdict(cluster, 'SORT cache:{t} GET {t}x_*')).toBe('ERR GET option of SORT denied due to insufficient ACL permissions.');
  });

  test('resetkeys, allkeys, and merged patterns', () => {
    expect(verdict(user({ keys: '~a resetkeys ~b' }), 'GET a')).toBe(NOPERM_KEY);
    expect(verdict(user({ keys: '~a allkeys' }), 'GET zzz')).toBe('OK');
    expect(verdict(user({ keys: '%R~a %W~a' }), 'GETDEL a')).toBe('OK');
    expect(verdict(user({ keys: [] }), 'GET a')).toBe(NOPERM_KEY); // present and empty: no key
    expect(verdict(user({ keys: [] }), 'PING')).toBe('OK');
  });
});

describe('channel rules', () => {
  const p = user({ channels: '&news.* &chat' });

  test.each([
    ['PUBLISH news.x hi', 'OK'],
    ['PUBLISH other hi', NOPERM_CHANNEL],
    ['SPUBLISH chat hi', 'OK'],
    ['SUBSCRIBE news.x chat', 'OK'],
    ['SUBSCRIBE news.x other', NOPERM_CHANNEL],
    ['SSUBSCRIBE chat', 'OK'],
    ['PSUBSCRIBE news.*', 'OK'], // a pattern must be one of the user's patterns, as written
    ['PSUBSCRIBE news.x', NOPERM_CHANNEL],
    ['PSUBSCRIBE news.?', NOPERM_CHANNEL],
    ['UNSUBSCRIBE other', 'OK'],
    ['PUBSUB NUMSUB other', 'OK'],
  ])('%s -> %s', (line, expected) => {
    expect(verdict(p, line)).toBe(expected);
  });

  test('resetchannels, allchannels; keys and channels are separate', () => {
    expect(verdict(user({ channels: 'resetchannels' }), 'PUBLISH a b')).toBe(NOPERM_CHANNEL);
    expect(verdict(user({ channels: '&a allchannels' }), 'PUBLISH z b')).toBe('OK');
    expect(verdict(user({ keys: 'resetkeys' }), 'PUBLISH z b')).toBe('OK'); // SPUBLISH's channel is no key
    expect(verdict(user({ keys: 'resetkeys' }), 'SPUBLISH z b')).toBe('OK');
  });
});

describe('users', () => {
  test('a user without rules has no permissions object: one null check per command', () => {
    expect(compilePermissions({ name: 'app' }, 0, table)).toBeNull();
    const auth = new ClientAuth({ password: 'pw', users: [{ name: 'ro', password: 'x', commands: '+@read' }] }, { table, mode: 'cluster' });
    expect(auth.permissionsOf('default')).toBeNull();
    expect(auth.permissionsOf('ro')).toBeInstanceOf(UserPermissions);
  });

  test('the default user is restricted only when configured', () => {
    const auth = new ClientAuth({ users: [{ name: 'default', password: 'x', commands: '+@all -flushall' }] }, { table, mode: 'cluster' });
    expect(verdict(auth.permissionsOf('default') as UserPermissions, 'FLUSHALL')).toBe(nopermCommand('flushall'));
  });

  test('a user a reload removed may run nothing but AUTH, HELLO, QUIT, RESET', () => {
    const auth = new ClientAuth({ password: 'pw' }, { table, mode: 'cluster' });
    const gone = auth.permissionsOf('ops') as UserPermissions;
    expect(verdict(gone, 'GET k')).toBe(nopermCommand('get'));
    expect(verdict(gone, 'AUTH default pw')).toBe('OK');
  });
});

describe('config validation names the field', () => {
  function problemsOf(auth: unknown): string[] {
    try {
      parseConfig({ cluster: { seeds: ['127.0.0.1:7001'] }, auth });
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
    return [];
  }

  test('good rules pass, as a string or a list', () => {
    const users = [
      { name: 'app', password: 'p', commands: '+@all -@admin -@dangerous', keys: ['~cache:*', '%R~ro:*'], channels: '&news.*' },
      { name: 'ro', password: 'p', commands: ['-@all', '+@read', '+config|get'] },
    ];
    expect(problemsOf({ users })).toEqual([]);
    const cfg = parseConfig({ cluster: { seeds: ['127.0.0.1:7001'] }, auth: { users } });
    expect(cfg.auth?.users?.[0].keys).toEqual(['~cache:*', '%R~ro:*']);
  });

  test('each bad rule is one problem under its field', () => {
    expect(problemsOf({ users: [{ name: 'a', password: 'b', commands: '+@nosuch +get', keys: ['~a', '%X~b', 'allkeys', '~c'], channels: 5 }] })).toEqual([
      expect.stringMatching(/^auth\.users\[0\]\.commands: "\+@nosuch": Unknown command or category name in ACL/),
      'auth.users[0].keys: "%X~b": Syntax error (expected %R~pattern, %W~pattern or %RW~pattern)',
      expect.stringMatching(/^auth\.users\[0\]\.keys: "~c": Adding a pattern after the \* pattern/),
      'auth.users[0].channels: expected rules, as a string ("+@read -keys") or a list of strings, got 5',
    ]);
  });

  test('unknown fields of a user are still refused', () => {
    expect(problemsOf({ users: [{ name: 'a', password: 'b', command: '+get' }] })).toEqual(['auth.users[0].command: unknown field (did you mean "commands"?)']);
  });
});
