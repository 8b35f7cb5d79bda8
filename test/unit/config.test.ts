import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { applyOverrides, ConfigError, loadConfigFile, parseConfig } from '../../config/load';
import { parseHostPort, type Config } from '../../config/schema';

const EXAMPLES = path.join(__dirname, '..', '..', 'config', 'examples');

const CLUSTER_MIN = { cluster: { seeds: ['127.0.0.1:7001'] } };
const RING_MIN = { mode: 'ring', ring: { nodes: [{ addr: '127.0.0.1:7101' }] } };

const DEFAULT_LIMITS = {
  maxClients: 10000,
  maxRequestBytes: 64 * 1024 * 1024,
  maxArgs: 1048576,
  maxInlineBytes: 65536,
  clientOutputHighWaterBytes: 8 * 1024 * 1024,
  idleClientTimeoutMs: 0,
  monitorOutputBytes: 32 * 1024 * 1024,
  scriptStoreBytes: 16 * 1024 * 1024,
  trackingTableMaxKeys: 1_000_000,
};
const DEFAULT_BACKEND = { connectionsPerNode: 1, connectTimeoutMs: 2000, commandTimeoutMs: 10000, timeoutBehindScripts: false, maxConnectsPerSecond: 100 };

/** The problems of the ConfigError `fn` throws; fails the test if it throws anything else. */
function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    expect(err.message).toBe(err.problems.join('\n'));
    return err.problems;
  }
  throw new Error('expected a ConfigError, but nothing was thrown');
}

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-config-'));
});
afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});
function writeTmp(name: string, text: string): string {
  const file = path.join(tmp, name);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
  return file;
}

describe('parseHostPort', () => {
  test.each([
    ['127.0.0.1:7777', '127.0.0.1', 7777],
    ['localhost:6379', 'localhost', 6379],
    ['redis-1.internal:0', 'redis-1.internal', 0],
    ['[::1]:7777', '::1', 7777],
    ['[fe80::1%eth0]:65535', 'fe80::1%eth0', 65535],
  ])('%s', (s, host, port) => {
    expect(parseHostPort(s)).toEqual({ host, port });
  });

  test.each([
    ['localhost', 'expected host:port, got "localhost"'],
    [':7777', 'expected host:port, got ":7777"'],
    ['host:', 'expected host:port, got "host:"'],
    ['host:77a', 'expected host:port, got "host:77a"'],
    ['host:-1', 'expected host:port, got "host:-1"'],
    ['host:65536', 'expected host:port with a port from 0 to 65535, got "host:65536"'],
    ['::1:7777', 'expected host:port (write IPv6 as [::1]:7777), got "::1:7777"'],
    ['[::1]7777', 'expected host:port, got "[::1]7777"'],
    ['[nope]:7777', 'expected [IPv6]:port, got "[nope]:7777"'],
    ['my host:1', 'expected host:port, got "my host:1"'],
  ])('%s is refused', (s, message) => {
    expect(() => parseHostPort(s)).toThrow(new Error(message));
  });
});

describe('defaults', () => {
  test('a cluster config holding only seeds gets every default', () => {
    expect(parseConfig(CLUSTER_MIN)).toStrictEqual({
      listen: '127.0.0.1:7777',
      mode: 'cluster',
      cluster: {
        seeds: ['127.0.0.1:7001'],
        readFrom: 'master',
        refreshIntervalMs: 10000,
        replicaCheckIntervalMs: 1000,
        replicaMaxLagSeconds: 2,
        maxRedirects: 16,
        retryWindowMs: 5000,
      },
      crossSlot: 'refuse',
      scripts: [],
      backend: DEFAULT_BACKEND,
      limits: DEFAULT_LIMITS,
      log: { level: 'info' },
      workers: 1,
    });
  });

  test('a ring config holding only node addresses gets every default', () => {
    expect(parseConfig(RING_MIN)).toStrictEqual({
      listen: '127.0.0.1:7777',
      mode: 'ring',
      ring: { hash: 'md5', distribution: 'ketama', hashTag: '{}', autoEjectHosts: false, serverFailureLimit: 2, serverRetryTimeoutMs: 30000, nodes: [{ addr: '127.0.0.1:7101', weight: 1 }] },
      crossSlot: 'refuse',
      scripts: [],
      backend: DEFAULT_BACKEND,
      limits: DEFAULT_LIMITS,
      log: { level: 'info' },
      workers: 1,
    });
  });

  test('a partly given section keeps the defaults of the rest', () => {
    const cfg = parseConfig({ ...CLUSTER_MIN, backend: { connectionsPerNode: 8 }, limits: { maxClients: 5 } });
    expect(cfg.backend).toStrictEqual({ ...DEFAULT_BACKEND, connectionsPerNode: 8 });
    expect(cfg.limits).toStrictEqual({ ...DEFAULT_LIMITS, maxClients: 5 });
  });

  test('backend.timeoutBehindScripts: false with the default timeout (written out or not), true once commandTimeoutMs is another value; kept through a re-parse', () => {
    const backend = (b: Record<string, unknown>): Config['backend'] => parseConfig({ ...CLUSTER_MIN, backend: b }).backend;
    expect(backend({})).toMatchObject({ commandTimeoutMs: 10000, timeoutBehindScripts: false });
    expect(backend({ commandTimeoutMs: 10000 })).toMatchObject({ commandTimeoutMs: 10000, timeoutBehindScripts: false });
    expect(backend({ commandTimeoutMs: 400 })).toMatchObject({ commandTimeoutMs: 400, timeoutBehindScripts: true });
    expect(backend({ commandTimeoutMs: 400, timeoutBehindScripts: false })).toMatchObject({ commandTimeoutMs: 400, timeoutBehindScripts: false });
    expect(backend({ timeoutBehindScripts: true })).toMatchObject({ commandTimeoutMs: 10000, timeoutBehindScripts: true });
    // The parsed config states it: parsed again (flags, workers) it stays what it was.
    expect(applyOverrides(parseConfig(CLUSTER_MIN), { logLevel: 'warn' }).backend.timeoutBehindScripts).toBe(false);
  });

  test("migration.to.hash defaults to the ring's hash, not to md5", () => {
    const cfg = parseConfig({
      mode: 'ring',
      ring: { hash: 'fnv1a_64', hashTag: '{}', nodes: [{ name: 'a', addr: 'h:1' }] },
      migration: { phase: 'read-new', to: { nodes: [{ name: 'a', addr: 'h:1' }, { name: 'b', addr: 'h:2', weight: 3 }] } },
    });
    expect(cfg.mode === 'ring' && cfg.migration).toStrictEqual({
      phase: 'read-new',
      to: {
        hash: 'fnv1a_64',
        nodes: [
          { name: 'a', addr: 'h:1', weight: 1 },
          { name: 'b', addr: 'h:2', weight: 3 },
        ],
      },
    });
  });

  test('ring.distribution: absent is ketama (filled in, as if written); modula and random are kept; migration.to keeps its own', () => {
    expect(parseConfig(RING_MIN).ring?.distribution).toBe('ketama');
    for (const distribution of ['ketama', 'modula', 'random'] as const) {
      expect(parseConfig({ ...RING_MIN, ring: { ...RING_MIN.ring, distribution } }).ring?.distribution).toBe(distribution);
    }
    const cfg = parseConfig({ ...RING_MIN, ring: { ...RING_MIN.ring, distribution: 'modula' }, migration: { phase: 'done', to: { distribution: 'ketama', nodes: [{ addr: 'h:2' }] } } });
    expect(cfg.mode === 'ring' && cfg.migration !== undefined && 'nodes' in cfg.migration.to && cfg.migration.to.distribution).toBe('ketama');
  });

  test('an explicit migration.to.hash is kept', () => {
    const cfg = parseConfig({
      ...RING_MIN,
      migration: { phase: 'done', to: { hash: 'murmur', nodes: [{ addr: 'h:2' }] } },
    });
    expect(cfg.mode === 'ring' && cfg.migration !== undefined && 'hash' in cfg.migration.to && cfg.migration.to.hash).toBe('murmur');
  });

  test('migration.to takes a Redis Cluster by its seeds, and exactly one of nodes and cluster', () => {
    const cfg = parseConfig({ ...RING_MIN, migration: { phase: 'double-write', to: { cluster: { seeds: ['127.0.0.1:7001'] } } } });
    expect(cfg.mode === 'ring' && cfg.migration?.to).toEqual({ cluster: { seeds: ['127.0.0.1:7001'] } });
    const both = { ...RING_MIN, migration: { phase: 'double-write', to: { nodes: [{ addr: 'h:2' }], cluster: { seeds: ['h:1'] } } } };
    expect(() => parseConfig(both)).toThrow('migration.to: give either nodes (a ring) or cluster (a Redis Cluster), not both');
    expect(() => parseConfig({ ...RING_MIN, migration: { phase: 'double-write', to: {} } })).toThrow(
      'migration.to: needs nodes (a ring) or cluster: { seeds: [...] } (a Redis Cluster)',
    );
    const hashed = { ...RING_MIN, migration: { phase: 'double-write', to: { hash: 'md5', cluster: { seeds: ['h:1'] } } } };
    expect(() => parseConfig(hashed)).toThrow('migration.to.hash: only for a ring (a Redis Cluster hashes keys to slots)');
    expect(() => parseConfig({ ...RING_MIN, migration: { phase: 'double-write', to: { cluster: { seeds: [] } } } })).toThrow('migration.to.cluster.seeds');
  });

  test('mode narrows the type to the section that mode requires', () => {
    const cfg: Config = parseConfig(CLUSTER_MIN);
    const seeds: string[] = cfg.mode === 'cluster' ? cfg.cluster.seeds : [];
    expect(seeds).toEqual(['127.0.0.1:7001']);
    expect(cfg.ring).toBeUndefined();
  });
});

describe('example files', () => {
  const files = fs.readdirSync(EXAMPLES).filter((f) => /\.(ya?ml|json)$/.test(f)).sort();

  test('are the five documented ones', () => {
    expect(files).toEqual(['cluster.yaml', 'migration-to-cluster.yaml', 'migration.yaml', 'production.yaml', 'ring.yaml']);
  });

  test('migration-to-cluster.yaml carries a ring into a Redis Cluster', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'migration-to-cluster.yaml'));
    expect(cfg.mode).toBe('ring');
    expect(cfg.migration).toEqual({ phase: 'double-write', to: { cluster: { seeds: ['127.0.0.1:7001', '127.0.0.1:7002'] } } });
  });

  test.each(files)('%s loads', (file) => {
    expect(() => loadConfigFile(path.join(EXAMPLES, file))).not.toThrow();
  });

  test('cluster.yaml is the SPEC cluster example', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'cluster.yaml'));
    expect(cfg.listen).toBe('127.0.0.1:7777');
    expect(cfg.cluster).toStrictEqual({
      seeds: ['127.0.0.1:7001', '127.0.0.1:7002'],
      readFrom: 'master',
      refreshIntervalMs: 10000,
      replicaCheckIntervalMs: 1000,
      replicaMaxLagSeconds: 2,
      maxRedirects: 16,
      retryWindowMs: 5000,
    });
    expect(cfg.crossSlot).toBe('refuse');
  });

  test('ring.yaml has a hash tag and three named nodes', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'ring.yaml'));
    expect(cfg.ring).toStrictEqual({
      hash: 'md5',
      hashTag: '{}',
      distribution: 'ketama',
      autoEjectHosts: false,
      serverFailureLimit: 2,
      serverRetryTimeoutMs: 30000,
      nodes: [
        { name: 'a', addr: '127.0.0.1:7101', weight: 1 },
        { name: 'b', addr: '127.0.0.1:7102', weight: 1 },
        { name: 'c', addr: '127.0.0.1:7103', weight: 1 },
      ],
    });
  });

  test('migration.yaml is the SPEC ring + migration example', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'migration.yaml'));
    expect(cfg.mode).toBe('ring');
    expect(cfg.listen).toBe('127.0.0.1:7778');
    expect(cfg.ring?.nodes.map((n) => n.name)).toEqual(['a', 'b']);
    expect(cfg.migration?.phase).toBe('double-write');
    const to = cfg.migration?.to;
    if (to === undefined || !('nodes' in to)) throw new Error('expected a ring target');
    expect(to.hash).toBe('md5');
    expect(to.nodes.map((n) => n.addr)).toEqual([
      '127.0.0.1:7101',
      '127.0.0.1:7102',
      '127.0.0.1:7103',
    ]);
  });

  test('production.yaml sets every section explicitly', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'production.yaml'));
    expect(cfg.listen).toBe('0.0.0.0:7777');
    expect(cfg.scripts).toEqual(['/etc/slotproxy/scripts']);
    expect(cfg.auth?.users?.map((u) => u.name)).toEqual(['app', 'ops']);
    expect(cfg.backend.username).toBe('slotproxy');
    expect(cfg.limits.idleClientTimeoutMs).toBe(300000);
    expect(cfg.metrics).toStrictEqual({ listen: '0.0.0.0:9121', console: true, auth: 'users', tls: { cert: '/etc/slotproxy/tls/proxy.crt', key: '/etc/slotproxy/tls/proxy.key', ca: undefined, requireClientCert: false } });
    expect(cfg.workers).toBe(4);
  });
});

describe('bad configs name the field and the reason', () => {
  const node = (addr: string, extra: object = {}) => ({ addr, ...extra });
  const ring = (r: object) => ({ mode: 'ring', ring: { nodes: [node('h:1')], ...r } });
  const cluster = (c: object) => ({ cluster: { seeds: ['h:1'], ...c } });

  test.each<[string, unknown, string]>([
    ['not a mapping', 'listen: 1', 'config: expected a mapping, got "listen: 1"'],
    ['a list', [1], 'config: expected a mapping, got a list'],
    ['unknown top-level field', { ...CLUSTER_MIN, lsiten: 'h:1' }, 'lsiten: unknown field (did you mean "listen"?)'],
    ['unknown field, no near name', { ...CLUSTER_MIN, banana: 1 }, 'banana: unknown field'],
    ['unknown nested field', cluster({ readfrom: 'replica' }), 'cluster.readfrom: unknown field (did you mean "readFrom"?)'],
    ['unknown field in a list entry', ring({ nodes: [node('h:1', { wieght: 2 })] }), 'ring.nodes[0].wieght: unknown field (did you mean "weight"?)'],
    ['listen not host:port', { ...CLUSTER_MIN, listen: 'localhost' }, 'listen: expected host:port, got "localhost"'],
    ['listen a number', { ...CLUSTER_MIN, listen: 7777 }, 'listen: expected host:port, got 7777'],
    ['listen port too big', { ...CLUSTER_MIN, listen: 'h:70000' }, 'listen: expected host:port with a port from 0 to 65535, got "h:70000"'],
    ['listen bare IPv6', { ...CLUSTER_MIN, listen: '::1:7777' }, 'listen: expected host:port (write IPv6 as [::1]:7777), got "::1:7777"'],
    ['mode unknown', { ...CLUSTER_MIN, mode: 'sentinel' }, 'mode: expected one of cluster | ring, got "sentinel"'],
    ['seed without port', { cluster: { seeds: ['h:1', 'localhost'] } }, 'cluster.seeds[1]: expected host:port, got "localhost"'],
    ['seed with port 0', { cluster: { seeds: ['h:0'] } }, 'cluster.seeds[0]: expected host:port with a port from 1 to 65535, got "h:0"'],
    ['seeds empty', { cluster: { seeds: [] } }, 'cluster.seeds: must not be empty'],
    ['seeds missing', { cluster: {} }, 'cluster.seeds: required'],
    ['seeds a string', { cluster: { seeds: 'h:1' } }, 'cluster.seeds: expected a list, got "h:1"'],
    ['readFrom unknown', cluster({ readFrom: 'slave' }), 'cluster.readFrom: expected one of master | replica | prefer-replica, got "slave"'],
    ['refreshIntervalMs too small', cluster({ refreshIntervalMs: 99 }), 'cluster.refreshIntervalMs: must be at least 100'],
    ['maxRedirects 0', cluster({ maxRedirects: 0 }), 'cluster.maxRedirects: must be at least 1'],
    ['maxRedirects 101', cluster({ maxRedirects: 101 }), 'cluster.maxRedirects: must be at most 100'],
    ['retryWindowMs negative', cluster({ retryWindowMs: -1 }), 'cluster.retryWindowMs: must be at least 0'],
    ['ring nodes empty', ring({ nodes: [] }), 'ring.nodes: must not be empty'],
    ['ring node without addr', ring({ nodes: [{ name: 'a' }] }), 'ring.nodes[0].addr: required (or master: the Sentinel master name of the node)'],
    ['ring node bad addr', ring({ nodes: [node('h')] }), 'ring.nodes[0].addr: expected host:port, got "h"'],
    ['ring node weight 0', ring({ nodes: [node('h:1', { weight: 0 })] }), 'ring.nodes[0].weight: must be at least 1'],
    ['ring node weight 1.5', ring({ nodes: [node('h:1', { weight: 1.5 })] }), 'ring.nodes[0].weight: expected an integer, got 1.5'],
    ['ring node weight string', ring({ nodes: [node('h:1', { weight: '2' })] }), 'ring.nodes[0].weight: expected an integer, got "2"'],
    ['ring node empty name', ring({ nodes: [node('h:1', { name: '' })] }), 'ring.nodes[0].name: must not be empty'],
    ['ring duplicate addr', ring({ nodes: [node('h:1'), node('h:2'), node('h:1')] }), 'ring.nodes[2].addr: duplicate addr "h:1" (already used by nodes[0])'],
    ['ring duplicate name', ring({ nodes: [node('h:1', { name: 'a' }), node('h:2', { name: 'a' })] }), 'ring.nodes[1].name: duplicate name "a" (already used by nodes[0])'],
    ['ring hash unknown', ring({ hash: 'sha1' }), 'ring.hash: expected one of one_at_a_time | md5 | crc16 | crc32 | crc32a | fnv1_64 | fnv1a_64 | fnv1_32 | fnv1a_32 | hsieh | murmur | jenkins, got "sha1"'],
    ['ring distribution unknown', ring({ distribution: 'consistent' }), 'ring.distribution: expected one of ketama | modula | random, got "consistent"'],
    ['migration from a random ring', { mode: 'ring', ring: { distribution: 'random', nodes: [node('h:1')] }, migration: { phase: 'double-write', to: { distribution: 'ketama', nodes: [node('h:2')] } } }, 'ring.distribution: a random ring cannot be migrated from: it places no key on a node of its own (use ketama or modula)'],
    ['migration to a random ring', { ...RING_MIN, migration: { phase: 'double-write', to: { distribution: 'random', nodes: [node('h:2')] } } }, 'migration.to.distribution: a migration cannot go to a random ring: it places no key on a node of its own (use ketama or modula)'],
    ['migration to a cluster with a distribution', { ...RING_MIN, migration: { phase: 'double-write', to: { distribution: 'modula', cluster: { seeds: ['h:1'] } } } }, 'migration.to.distribution: only for a ring (a Redis Cluster hashes keys to slots)'],
    ['hashTag one character', ring({ hashTag: '{' }), 'ring.hashTag: expected 2 ASCII characters like "{}", got "{"'],
    ['hashTag non-ASCII', ring({ hashTag: '«»' }), 'ring.hashTag: expected 2 ASCII characters like "{}", got "«»"'],
    ['hashTag a mapping (unquoted {} in YAML)', ring({ hashTag: {} }), 'ring.hashTag: expected 2 characters like "{}", got a mapping'],
    ['migration phase unknown', { ...RING_MIN, migration: { phase: 'copy', to: { nodes: [node('h:2')] } } }, 'migration.phase: expected one of double-write | read-new | done, got "copy"'],
    ['migration phase missing', { ...RING_MIN, migration: { to: { nodes: [node('h:2')] } } }, 'migration.phase: required'],
    ['migration to missing', { ...RING_MIN, migration: { phase: 'done' } }, 'migration.to: required'],
    ['migration to duplicate addr', { ...RING_MIN, migration: { phase: 'done', to: { nodes: [node('h:2'), node('h:2')] } } }, 'migration.to.nodes[1].addr: duplicate addr "h:2" (already used by nodes[0])'],
    ['migration unknown field', { ...RING_MIN, migration: { phase: 'done', from: {}, to: { nodes: [node('h:2')] } } }, 'migration.from: unknown field'],
    ['crossSlot unknown', { ...CLUSTER_MIN, crossSlot: 'allow' }, 'crossSlot: expected one of refuse | split, got "allow"'],
    ['scripts a string', { ...CLUSTER_MIN, scripts: './scripts' }, 'scripts: expected a list, got "./scripts"'],
    ['scripts with an empty path', { ...CLUSTER_MIN, scripts: [''] }, 'scripts[0]: must not be empty'],
    ['auth empty', { ...CLUSTER_MIN, auth: {} }, 'auth: set "password", "users" or both (remove "auth" to let clients in without AUTH)'],
    ['auth with no users', { ...CLUSTER_MIN, auth: { users: [] } }, 'auth: set "password", "users" or both (remove "auth" to let clients in without AUTH)'],
    ['auth empty password', { ...CLUSTER_MIN, auth: { password: '' } }, 'auth.password: must not be empty'],
    ['auth user without password', { ...CLUSTER_MIN, auth: { users: [{ name: 'app' }] } }, 'auth.users[0].password: required'],
    ['auth duplicate user', { ...CLUSTER_MIN, auth: { users: [{ name: 'a', password: 'x' }, { name: 'a', password: 'y' }] } }, 'auth.users[1].name: duplicate name "a" (already used by users[0])'],
    ['auth default user twice', { ...CLUSTER_MIN, auth: { password: 'p', users: [{ name: 'default', password: 'x' }] } }, 'auth.users[0].name: "default" is the user that auth.password sets; set only one of them'],
    ['connectionsPerNode 65', { ...CLUSTER_MIN, backend: { connectionsPerNode: 65 } }, 'backend.connectionsPerNode: must be at most 64'],
    ['connectionsPerNode 0', { ...CLUSTER_MIN, backend: { connectionsPerNode: 0 } }, 'backend.connectionsPerNode: must be at least 1'],
    ['backend username alone', { ...CLUSTER_MIN, backend: { username: 'u' } }, 'backend.password: required when backend.username is set (AUTH needs both)'],
    ['connectTimeoutMs 0', { ...CLUSTER_MIN, backend: { connectTimeoutMs: 0 } }, 'backend.connectTimeoutMs: must be at least 1'],
    ['commandTimeoutMs Infinity', { ...CLUSTER_MIN, backend: { commandTimeoutMs: Infinity } }, 'backend.commandTimeoutMs: expected an integer, got Infinity'],
    ['backend null', { ...CLUSTER_MIN, backend: null }, 'backend: expected a mapping, got null'],
    ['maxClients 0', { ...CLUSTER_MIN, limits: { maxClients: 0 } }, 'limits.maxClients: must be at least 1'],
    ['maxRequestBytes unsafe', { ...CLUSTER_MIN, limits: { maxRequestBytes: 2 ** 60 } }, `limits.maxRequestBytes: expected an integer, got ${2 ** 60}`],
    ['maxArgs a string', { ...CLUSTER_MIN, limits: { maxArgs: '1M' } }, 'limits.maxArgs: expected an integer, got "1M"'],
    ['maxInlineBytes 0', { ...CLUSTER_MIN, limits: { maxInlineBytes: 0 } }, 'limits.maxInlineBytes: must be at least 1'],
    ['clientOutputHighWaterBytes 0', { ...CLUSTER_MIN, limits: { clientOutputHighWaterBytes: 0 } }, 'limits.clientOutputHighWaterBytes: must be at least 1'],
    ['idleClientTimeoutMs negative', { ...CLUSTER_MIN, limits: { idleClientTimeoutMs: -5 } }, 'limits.idleClientTimeoutMs: must be at least 0'],
    ['metrics without listen', { ...CLUSTER_MIN, metrics: {} }, 'metrics.listen: required'],
    ['metrics bad listen', { ...CLUSTER_MIN, metrics: { listen: '9121' } }, 'metrics.listen: expected host:port, got "9121"'],
    ['log level unknown', { ...CLUSTER_MIN, log: { level: 'verbose' } }, 'log.level: expected one of fatal | error | warn | info | debug | trace | silent, got "verbose"'],
    ['log a string', { ...CLUSTER_MIN, log: 'debug' }, 'log: expected a mapping, got "debug"'],
    ['log file empty', { ...CLUSTER_MIN, log: { file: '' } }, 'log.file: must not be empty'],
    ['workers 0', { ...CLUSTER_MIN, workers: 0 }, 'workers: must be at least 1'],
    ['workers a boolean', { ...CLUSTER_MIN, workers: true }, 'workers: expected an integer, got true'],
    ['odd key rendered readably', { ...CLUSTER_MIN, 'my key': 1 }, '["my key"]: unknown field'],
  ])('%s', (_name, raw, expected) => {
    expect(problemsOf(() => parseConfig(raw))).toContain(expected);
  });

  test('every problem is reported at once, in field order', () => {
    const problems = problemsOf(() =>
      parseConfig({
        listen: 'nowhere',
        mode: 'ring',
        clustr: { seeds: ['h:1'] },
        ring: { nodes: [{ addr: 'h:1', weight: 0 }] },
        backend: { connectionsPerNode: 100 },
      }),
    );
    expect(problems).toEqual([
      'listen: expected host:port, got "nowhere"',
      'ring.nodes[0].weight: must be at least 1',
      'backend.connectionsPerNode: must be at most 64',
      'clustr: unknown field (did you mean "cluster"?)',
    ]);
  });

  test('ConfigError is an Error with a name and the problems', () => {
    let caught: unknown;
    try {
      parseConfig({ cluster: { seeds: [] }, workers: 0 });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(Error);
    expect(caught).toBeInstanceOf(ConfigError);
    const err = caught as ConfigError;
    expect(err.name).toBe('ConfigError');
    expect(err.problems).toEqual(['cluster.seeds: must not be empty', 'workers: must be at least 1']);
    expect(err.message).toBe('cluster.seeds: must not be empty\nworkers: must be at least 1');
    expect(err.file).toBeUndefined();
  });
});

describe('mode and sections must agree', () => {
  const clusterSection = { seeds: ['h:1'] };
  const ringSection = { nodes: [{ addr: 'h:2' }] };
  const migration = { phase: 'double-write', to: ringSection };

  test.each<[string, unknown, string[]]>([
    ['default mode without a cluster section', {}, ['mode: cluster mode needs a "cluster" section']],
    ['cluster mode without a cluster section', { mode: 'cluster' }, ['mode: cluster mode needs a "cluster" section']],
    ['ring mode without a ring section', { mode: 'ring' }, ['mode: ring mode needs a "ring" section']],
    [
      'a ring section with the default mode',
      { ring: ringSection },
      ['mode: cluster mode needs a "cluster" section', 'ring: only allowed in ring mode (mode is "cluster")'],
    ],
    [
      'a cluster section in ring mode',
      { mode: 'ring', ring: ringSection, cluster: clusterSection },
      ['cluster: only allowed in cluster mode (mode is "ring")'],
    ],
    [
      'a migration in cluster mode with a target that is neither a ring nor a cluster',
      { cluster: clusterSection, migration: { phase: 'double-write', to: {} } },
      ['migration.to: needs nodes (a ring) or cluster: { seeds: [...] } (a Redis Cluster)'],
    ],
    [
      'section problems alongside field problems',
      { mode: 'ring', listen: 'x', workers: 2.5 },
      ['listen: expected host:port, got "x"', 'workers: expected an integer, got 2.5', 'mode: ring mode needs a "ring" section'],
    ],
  ])('%s', (_name, raw, expected) => {
    expect(problemsOf(() => parseConfig(raw))).toEqual(expected);
  });

  test('a cluster-mode file may carry a migration into a ring or another cluster', () => {
    const intoRing = parseConfig({ cluster: clusterSection, migration });
    expect(intoRing.mode === 'cluster' && intoRing.migration?.phase).toBe(migration.phase);
    const intoCluster = parseConfig({ cluster: clusterSection, migration: { phase: 'read-new', to: { cluster: { seeds: ['127.0.0.1:7101'] } } } });
    expect(intoCluster.migration).toEqual({ phase: 'read-new', to: { cluster: { seeds: ['127.0.0.1:7101'] } } });
  });

  test('both sections given, each mode accepts its own only', () => {
    expect(problemsOf(() => parseConfig({ cluster: clusterSection, ring: ringSection }))).toEqual([
      'ring: only allowed in ring mode (mode is "cluster")',
    ]);
  });
});

describe('loadConfigFile', () => {
  test('a missing file is named', () => {
    const file = path.join(tmp, 'nope', 'slotproxy.yaml');
    const problems = problemsOf(() => loadConfigFile(file));
    expect(problems).toEqual([`${file}: no such file`]);
  });

  test('a folder is not a config file', () => {
    expect(problemsOf(() => loadConfigFile(tmp))).toEqual([`${tmp}: is a folder, not a config file`]);
  });

  test('a YAML syntax error names the file, line and column', () => {
    const file = writeTmp('syntax.yaml', 'listen: 127.0.0.1:7777\ncluster:\n  seeds: [a:1, b:2\nmode: cluster\n');
    const problems = problemsOf(() => loadConfigFile(file));
    expect(problems.length).toBeGreaterThanOrEqual(1);
    expect(problems[0]).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: YAML syntax error at line 4, column 1: `));
  });

  test('an unquoted [IPv6] address is a YAML error at its line', () => {
    const file = writeTmp('ipv6.yaml', 'cluster:\n  seeds: [h:1]\nlisten: [::1]:7777\n');
    expect(problemsOf(() => loadConfigFile(file))[0]).toContain(': YAML syntax error at line 3, column ');
  });

  test('a quoted [IPv6] address loads', () => {
    const file = writeTmp('ipv6-ok.yaml', 'cluster:\n  seeds: ["[::1]:7001"]\nlisten: "[::1]:7777"\n');
    const cfg = loadConfigFile(file);
    expect(cfg.listen).toBe('[::1]:7777');
    expect(parseHostPort(cfg.listen)).toEqual({ host: '::1', port: 7777 });
  });

  test('a duplicate YAML key is an error, not a silent overwrite', () => {
    const file = writeTmp('dup.yaml', 'cluster:\n  seeds: [h:1]\nworkers: 2\nworkers: 3\n');
    const problems = problemsOf(() => loadConfigFile(file));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/: YAML syntax error at line 4, column 1: Map keys must be unique$/);
  });

  test('validation problems carry the file on the error', () => {
    const file = writeTmp('bad.yaml', 'cluster:\n  seeds: [h:1, localhost]\n');
    let caught: unknown;
    try {
      loadConfigFile(file);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).file).toBe(file);
    expect((caught as ConfigError).problems).toEqual(['cluster.seeds[1]: expected host:port, got "localhost"']);
  });

  test('an empty file says so', () => {
    const file = writeTmp('empty.yaml', '# nothing here\n');
    expect(problemsOf(() => loadConfigFile(file))).toEqual([`${file}: the file is empty`]);
  });

  test('.json files are read as JSON', () => {
    const file = writeTmp('c.json', JSON.stringify({ mode: 'ring', ring: { hash: 'crc32', nodes: [{ addr: 'h:1' }] } }));
    const cfg = loadConfigFile(file);
    expect(cfg.mode).toBe('ring');
    expect(cfg.ring?.hash).toBe('crc32');
  });

  test('a .json file with a byte-order mark loads', () => {
    const file = writeTmp('bom.json', '\uFEFF{"cluster": {"seeds": ["h:1"]}}');
    expect(loadConfigFile(file).cluster?.seeds).toEqual(['h:1']);
  });

  test('a JSON syntax error names the file', () => {
    const file = writeTmp('broken.json', '{"cluster": }');
    const problems = problemsOf(() => loadConfigFile(file));
    expect(problems).toHaveLength(1);
    expect(problems[0].startsWith(`${file}: JSON syntax error: `)).toBe(true);
  });

  test('JSON in a .yaml file loads, YAML being a superset of JSON', () => {
    const file = writeTmp('json-in.yaml', '{"cluster": {"seeds": ["h:1"]}, "workers": 3}');
    expect(loadConfigFile(file).workers).toBe(3);
  });

  test('a file without a known extension is read as YAML', () => {
    const file = writeTmp('slotproxy.conf', 'cluster:\n  seeds: [h:1]\n');
    expect(loadConfigFile(file).cluster?.seeds).toEqual(['h:1']);
  });

  test("relative scripts are resolved against the config file's folder", () => {
    const file = writeTmp(path.join('etc', 'proxy.yaml'), 'cluster:\n  seeds: [h:1]\nscripts: [./lua, ../shared/x.lua, /abs/y.lua]\n');
    const dir = path.join(tmp, 'etc');
    expect(loadConfigFile(file).scripts).toEqual([
      path.join(dir, 'lua'),
      path.join(tmp, 'shared', 'x.lua'),
      '/abs/y.lua',
    ]);
  });

  test("a relative log.file is resolved against the config file's folder, an absolute one kept", () => {
    const file = writeTmp(path.join('etc', 'log.yaml'), 'cluster:\n  seeds: [h:1]\nlog:\n  file: ../log/slotproxy.log\n');
    expect(loadConfigFile(file).log).toStrictEqual({ level: 'info', file: path.join(tmp, 'log', 'slotproxy.log') });
    const abs = writeTmp(path.join('etc', 'abs.yaml'), 'cluster:\n  seeds: [h:1]\nlog:\n  level: debug\n  file: /var/log/slotproxy.log\n');
    expect(loadConfigFile(abs).log).toStrictEqual({ level: 'debug', file: '/var/log/slotproxy.log' });
  });

  test('parseConfig leaves relative scripts as given', () => {
    expect(parseConfig({ ...CLUSTER_MIN, scripts: ['./lua'] }).scripts).toEqual(['./lua']);
  });
});

describe('applyOverrides', () => {
  const base = () => parseConfig({ ...CLUSTER_MIN, listen: '127.0.0.1:7000', workers: 2 });

  test('flags win over the file', () => {
    const cfg = applyOverrides(base(), {
      listen: '0.0.0.0:7777',
      logLevel: 'debug',
      seeds: ['10.0.0.1:7001', '10.0.0.2:7001'],
      workers: 8,
    });
    expect(cfg.listen).toBe('0.0.0.0:7777');
    expect(cfg.log.level).toBe('debug');
    expect(cfg.cluster).toStrictEqual({
      seeds: ['10.0.0.1:7001', '10.0.0.2:7001'],
      readFrom: 'master',
      refreshIntervalMs: 10000,
      replicaCheckIntervalMs: 1000,
      replicaMaxLagSeconds: 2,
      maxRedirects: 16,
      retryWindowMs: 5000,
    });
    expect(cfg.workers).toBe(8);
  });

  test('--log-file and --log-level together set both, over the file', () => {
    const cfg = applyOverrides(parseConfig({ ...CLUSTER_MIN, log: { level: 'warn', file: '/a.log' } }), { logLevel: 'debug', logFile: '/b.log' });
    expect(cfg.log).toStrictEqual({ level: 'debug', file: '/b.log' });
    expect(applyOverrides(parseConfig(CLUSTER_MIN), { logFile: '/c.log' }).log).toStrictEqual({ level: 'info', file: '/c.log' });
  });

  test('absent flags leave the file alone, and the input is not changed', () => {
    const before = base();
    const after = applyOverrides(before, {});
    expect(after).toStrictEqual(before);
    applyOverrides(before, { listen: '0.0.0.0:1' });
    expect(before.listen).toBe('127.0.0.1:7000');
  });

  test('a ring config keeps its migration through overrides', () => {
    const ringCfg = loadConfigFile(path.join(EXAMPLES, 'migration.yaml'));
    const cfg = applyOverrides(ringCfg, { listen: '127.0.0.1:0' });
    expect(cfg.listen).toBe('127.0.0.1:0');
    expect(cfg.migration).toStrictEqual(ringCfg.migration);
  });

  test.each<[string, Parameters<typeof applyOverrides>[1], string]>([
    ['bad listen', { listen: 'nowhere' }, 'listen: expected host:port, got "nowhere"'],
    ['bad log level', { logLevel: 'verbose' }, 'log.level: expected one of fatal | error | warn | info | debug | trace | silent, got "verbose"'],
    ['bad seed', { seeds: ['h:1', 'h'] }, 'cluster.seeds[1]: expected host:port, got "h"'],
    ['no seeds', { seeds: [] }, 'cluster.seeds: must not be empty'],
    ['zero workers', { workers: 0 }, 'workers: must be at least 1'],
    ['NaN workers', { workers: NaN }, 'workers: expected an integer, got NaN'],
  ])('%s is re-validated', (_name, o, expected) => {
    expect(problemsOf(() => applyOverrides(base(), o))).toEqual([expected]);
  });

  test('seeds do not apply to a ring', () => {
    expect(problemsOf(() => applyOverrides(parseConfig(RING_MIN), { seeds: ['h:1'] }))).toEqual([
      'cluster.seeds: seeds only apply in cluster mode (mode is "ring")',
    ]);
  });

  test('the result is frozen too', () => {
    const cfg = applyOverrides(base(), { workers: 3 });
    expect(Object.isFrozen(cfg)).toBe(true);
    expect(Object.isFrozen(cfg.cluster?.seeds)).toBe(true);
  });
});

describe('the result is deeply frozen', () => {
  // ts-jest emits "use strict", so writes to frozen objects throw instead of being ignored.
  test.each<[string, (c: Config) => void]>([
    ['top level', (c) => { c.listen = '0.0.0.0:1'; }],
    ['nested object', (c) => { c.limits.maxClients = 1; }],
    ['nested array', (c) => { c.cluster?.seeds.push('h:2'); }],
    ['array element', (c) => { if (c.cluster) c.cluster.seeds[0] = 'h:2'; }],
    ['added field', (c) => { Object.assign(c.log, { extra: true }); }],
  ])('%s', (_name, mutate) => {
    const cfg = parseConfig({ ...CLUSTER_MIN, auth: { users: [{ name: 'a', password: 'b' }] } });
    expect(() => mutate(cfg)).toThrow(TypeError);
  });

  test('ring nodes and migration too', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'migration.yaml'));
    const nodes = cfg.ring?.nodes ?? [];
    expect(() => {
      nodes[0].weight = 5;
    }).toThrow(TypeError);
    const to = cfg.migration?.to;
    expect(to !== undefined && 'nodes' in to && Object.isFrozen(to.nodes[2])).toBe(true);
  });

  test('loadConfigFile freezes the resolved scripts', () => {
    const cfg = loadConfigFile(path.join(EXAMPLES, 'production.yaml'));
    expect(Object.isFrozen(cfg.scripts)).toBe(true);
    expect(Object.isFrozen(cfg.auth?.users?.[0])).toBe(true);
  });
});
