// twemproxy config -> slotproxy ring configs (config/twemproxy.ts).
import { TwemproxyConfigError, convertTwemproxy, parseServerLine } from '../../config/twemproxy';
import { parseConfig } from '../../config/load';

describe('import-twemproxy', () => {
  test('server lines: host:port:weight [name]', () => {
    expect(parseServerLine('127.0.0.1:6379:1')).toEqual({ addr: '127.0.0.1:6379', weight: 1 });
    expect(parseServerLine('10.0.0.2:6380:3 server-b')).toEqual({ addr: '10.0.0.2:6380', weight: 3, name: 'server-b' });
    expect(parseServerLine('cache.local:11211:1')).toEqual({ addr: 'cache.local:11211', weight: 1 });
    expect(() => parseServerLine('/tmp/redis.sock:1')).toThrow('unix socket');
    expect(() => parseServerLine('nope')).toThrow(TwemproxyConfigError);
  });

  test('one config per pool, with hash, hash_tag, names and weights carried over', () => {
    const pools = convertTwemproxy([
      'alpha:', '  listen: 127.0.0.1:22121', '  hash: murmur', '  hash_tag: "{}"', '  distribution: ketama', '  redis: true',
      '  redis_auth: pw', '  timeout: 400', '  server_connections: 4', '  auto_eject_hosts: true', '  server_retry_timeout: 2000', '  preconnect: true',
      '  servers:', '   - 127.0.0.1:6379:1 a', '   - 127.0.0.1:6380:2',
      'beta:', '  listen: 127.0.0.1:22122', '  redis: true', '  servers:', '   - 127.0.0.1:6381:1',
    ].join('\n'));
    expect(pools.map((p) => p.pool)).toEqual(['alpha', 'beta']);
    expect(pools[0].config).toEqual({
      listen: '127.0.0.1:22121',
      mode: 'ring',
      crossSlot: 'split',
      ring: { hash: 'murmur', hashTag: '{}', nodes: [{ addr: '127.0.0.1:6379', weight: 1, name: 'a' }, { addr: '127.0.0.1:6380', weight: 2 }], autoEjectHosts: true, serverRetryTimeoutMs: 2000 },
      backend: { password: 'pw', commandTimeoutMs: 400, timeoutBehindScripts: true, connectionsPerNode: 4 },
      auth: { password: 'pw' },
    });
    expect(pools[0].notes.join('\n')).toContain('preconnect: not carried over');
    // twemproxy's defaults: fnv1a_64, and no hash tag.
    expect(pools[1].config.ring).toEqual({ hash: 'fnv1a_64', hashTag: '', nodes: [{ addr: '127.0.0.1:6381', weight: 1 }] });
    for (const p of pools) expect(() => parseConfig(p.config)).not.toThrow();
    // A pool's timeout: is the operator's: it cuts off requests even behind a busy script, as nutcracker's does.
    expect(pools.map((p) => parseConfig(p.config).backend.timeoutBehindScripts)).toEqual([true, false]);
  });

  test('modula and random pools keep their distribution; ketama, the default, is not written', () => {
    const pool = (distribution: string) => convertTwemproxy(`p:\n  listen: 127.0.0.1:1\n  redis: true\n  distribution: ${distribution}\n  servers: ["127.0.0.1:2:1", "127.0.0.1:3:2"]\n`)[0];
    expect(pool('modula').config.ring).toEqual({ hash: 'fnv1a_64', hashTag: '', distribution: 'modula', nodes: [{ addr: '127.0.0.1:2', weight: 1 }, { addr: '127.0.0.1:3', weight: 2 }] });
    expect(pool('modula').notes).toEqual([]);
    const random = pool('random');
    expect(random.config.ring).toMatchObject({ distribution: 'random' });
    expect(random.notes.join('\n')).toContain('distribution random: every request goes to a live server picked at random');
    expect(pool('ketama').config.ring).not.toHaveProperty('distribution');
    for (const d of ['modula', 'random', 'ketama']) expect(parseConfig(pool(d).config).ring?.distribution).toBe(d);
  });

  test('redis_auth is read as text, as twemproxy reads it: 12345 and 0x10 are passwords, not numbers', () => {
    const pool = (auth: string) => convertTwemproxy(`p:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_auth: ${auth}\n  servers: ["127.0.0.1:2:1"]\n`)[0];
    for (const [auth, password] of [['12345', '12345'], ['0x10', '0x10'], ['true', 'true'], ['"quoted pw"', 'quoted pw']]) {
      const converted = pool(auth);
      expect(converted.config.auth).toEqual({ password });
      expect(converted.config.backend).toEqual({ password });
      expect(() => parseConfig(converted.config)).not.toThrow();
    }
  });

  test('an empty redis_auth is refused, as nutcracker refuses it', () => {
    expect(() => convertTwemproxy('p:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_auth: ""\n  servers: ["127.0.0.1:2:1"]\n')).toThrow(
      'pool p: redis_auth is empty (twemproxy refuses it too); remove it for no AUTH',
    );
  });

  test.each([
    ['a memcached pool', 'p:\n  listen: 127.0.0.1:1\n  servers: ["127.0.0.1:2:1"]\n', 'only redis pools'],
    ['an unknown distribution', 'p:\n  listen: 127.0.0.1:1\n  redis: true\n  distribution: vnode\n  servers: ["127.0.0.1:2:1"]\n', 'pool p: unknown distribution vnode (twemproxy has ketama, modula, random)'],
    ['an unknown hash', 'p:\n  listen: 127.0.0.1:1\n  redis: true\n  hash: sha1\n  servers: ["127.0.0.1:2:1"]\n', 'unknown hash'],
    ['another database', 'p:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_db: 2\n  servers: ["127.0.0.1:2:1"]\n', 'redis_db 2'],
    ['no servers', 'p:\n  listen: 127.0.0.1:1\n  redis: true\n', 'servers must be'],
    ['not a mapping', '- a\n- b\n', 'expected a mapping'],
  ])('refuses %s', (_what, text, message) => {
    expect(() => convertTwemproxy(text)).toThrow(message);
  });
});
