// Ring nodes given by their Sentinel master name: the config (slotproxy's format and twemproxy's
// Sentinel patch), where their masters are put (sharding/master-addresses.ts), and a failover
// moving a node's address without moving a key (Ring/Placement.readdressed).
import { parseConfig } from '../../config/load';
import { TwemproxyConfigError, convertTwemproxy, parseSentinelLine } from '../../config/twemproxy';
import { Placement } from '../../sharding/migration';
import { masterNames, migrationAt, ringAt } from '../../sharding/master-addresses';
import { Ring } from '../../sharding/ring';

const SENTINELS = ['127.0.0.1:26379', '127.0.0.1:26380'];

function problemsOf(raw: unknown): string[] {
  try {
    parseConfig(raw);
  } catch (err) {
    return (err as { problems?: string[] }).problems ?? [String(err)];
  }
  return [];
}

describe('ring.sentinels and nodes given by master name', () => {
  test('a node with master: gets the master name as its name; addr is optional; sentinel options get defaults', () => {
    const cfg = parseConfig({
      mode: 'ring',
      ring: { sentinels: SENTINELS, sentinel: {}, nodes: [{ master: 'shard1' }, { master: 'shard2', addr: '127.0.0.1:7002', weight: 2 }, { name: 'x', master: 'shard3' }] },
    });
    if (cfg.mode !== 'ring') throw new Error('expected ring');
    expect(cfg.ring.nodes).toEqual([
      { master: 'shard1', name: 'shard1', weight: 1 },
      { master: 'shard2', name: 'shard2', addr: '127.0.0.1:7002', weight: 2 },
      { master: 'shard3', name: 'x', weight: 1 },
    ]);
    expect(cfg.ring.sentinels).toEqual(SENTINELS);
    expect(cfg.ring.sentinel).toEqual({ failoverWaitMs: 10_000, refreshIntervalMs: 5_000, readFrom: 'master', replicaCheckIntervalMs: 1_000, replicaMaxLagSeconds: 2 });
  });

  test.each<[string, unknown, string]>([
    ['master without sentinels', { mode: 'ring', ring: { nodes: [{ master: 'm' }] } }, 'ring.nodes[0].master: needs ring.sentinels (the sentinels that know this master)'],
    ['sentinels and no master', { mode: 'ring', ring: { sentinels: SENTINELS, nodes: [{ addr: 'h:1' }] } }, 'ring.sentinels: no ring node is given by its Sentinel master name (master: NAME) in ring.nodes or migration.to.nodes'],
    ['neither addr nor master', { mode: 'ring', ring: { sentinels: SENTINELS, nodes: [{ master: 'm' }, { name: 'n' }] } }, 'ring.nodes[1].addr: required (or master: the Sentinel master name of the node)'],
    ['duplicate master', { mode: 'ring', ring: { sentinels: SENTINELS, nodes: [{ master: 'm' }, { master: 'm', name: 'other' }] } }, 'ring.nodes[1].master: duplicate master "m" (already used by nodes[0])'],
    ['sentinels empty', { mode: 'ring', ring: { sentinels: [], nodes: [{ master: 'm' }] } }, 'ring.sentinels: must not be empty'],
    ['sentinel not host:port', { mode: 'ring', ring: { sentinels: ['s1'], nodes: [{ master: 'm' }] } }, 'ring.sentinels[0]: expected host:port, got "s1"'],
    ['sentinel options without sentinels', { mode: 'ring', ring: { sentinel: {}, nodes: [{ addr: 'h:1' }] } }, 'ring.sentinel: only with ring.sentinels'],
    ['sentinel username alone', { mode: 'ring', ring: { sentinels: SENTINELS, sentinel: { username: 'u' }, nodes: [{ master: 'm' }] } }, 'ring.sentinel.password: required when ring.sentinel.username is set (AUTH needs both)'],
    ['sentinel tls a string', { mode: 'ring', ring: { sentinels: SENTINELS, sentinel: { tls: 'yes' }, nodes: [{ master: 'm' }] } }, 'ring.sentinel.tls: expected true or false, got "yes"'],
    ['failoverWaitMs negative', { mode: 'ring', ring: { sentinels: SENTINELS, sentinel: { failoverWaitMs: -1 }, nodes: [{ master: 'm' }] } }, 'ring.sentinel.failoverWaitMs: must be at least 0'],
    ['sentinel unknown field', { mode: 'ring', ring: { sentinels: SENTINELS, sentinel: { failoverWait: 1 }, nodes: [{ master: 'm' }] } }, 'ring.sentinel.failoverWait: unknown field (did you mean "failoverWaitMs"?)'],
    [
      'migration.to master without ring.sentinels',
      { mode: 'ring', ring: { nodes: [{ addr: 'h:1' }] }, migration: { phase: 'double-write', to: { nodes: [{ addr: 'h:1' }, { master: 'm' }] } } },
      'migration.to.nodes[1].master: needs ring.sentinels (the sentinels that know this master)',
    ],
  ])('%s', (_name, raw, expected) => {
    expect(problemsOf(raw)).toContain(expected);
  });

  test('ring.sentinels with masters only in migration.to (a plain ring grown onto Sentinel-managed nodes) is accepted', () => {
    expect(problemsOf({ mode: 'ring', ring: { sentinels: SENTINELS, nodes: [{ addr: 'h:1' }] }, migration: { phase: 'double-write', to: { nodes: [{ addr: 'h:1' }, { master: 'm' }] } } })).toEqual([]);
  });
});

describe('twemproxy Sentinel patch syntax', () => {
  const pool = (extra: string[]) =>
    convertTwemproxy(['sigma:', '  listen: 127.0.0.1:22125', '  hash: fnv1a_64', '  distribution: ketama', '  redis: true', ...extra].join('\n'));

  test('sentinels: host:port:weight lines; each server is the Sentinel master of its name, its address the starting guess', () => {
    const [p] = pool(['  servers:', '   - 127.0.0.1:6379:1 server1', '   - 127.0.0.1:6380:2 server2', '  sentinels:', '   - 127.0.0.1:26379:1', '   - 127.0.0.1:26380']);
    expect(p.config.ring).toEqual({
      hash: 'fnv1a_64',
      hashTag: '',
      nodes: [
        { master: 'server1', addr: '127.0.0.1:6379', weight: 1 },
        { master: 'server2', addr: '127.0.0.1:6380', weight: 2 },
      ],
      sentinels: ['127.0.0.1:26379', '127.0.0.1:26380'],
    });
    expect(p.notes.join('\n')).toContain('sentinels: each server follows its Sentinel master');
    const cfg = parseConfig(p.config);
    expect(cfg.ring?.nodes.map((n) => n.name)).toEqual(['server1', 'server2']);
  });

  test('a server without a name, or a bad sentinel line, names what is wrong', () => {
    expect(() => pool(['  servers:', '   - 127.0.0.1:6379:1', '  sentinels:', '   - 127.0.0.1:26379:1'])).toThrow(
      'pool sigma: server "127.0.0.1:6379": a pool with sentinels names each server by its Sentinel master name (host:port:weight NAME)',
    );
    expect(() => pool(['  servers:', '   - 127.0.0.1:6379:1 s', '  sentinels: []'])).toThrow('pool sigma: sentinels must be a non-empty list');
    expect(() => parseSentinelLine('sentinel-host')).toThrow(TwemproxyConfigError);
    expect(parseSentinelLine('10.0.0.1:26379')).toBe('10.0.0.1:26379');
  });
});

describe('following masters moves no key', () => {
  const cfg = parseConfig({
    mode: 'ring',
    ring: { hash: 'md5', sentinels: SENTINELS, nodes: [{ master: 's1' }, { master: 's2', addr: '127.0.0.1:7002' }, { name: 'plain', addr: '127.0.0.1:7009' }] },
    migration: { phase: 'double-write', to: { nodes: [{ master: 's1' }, { master: 's2' }, { master: 's3' }] } },
  });
  if (cfg.mode !== 'ring') throw new Error('expected ring');
  const at = new Map([
    ['s1', '127.0.0.1:7001'],
    ['s2', '127.0.0.1:7102'],
    ['s3', '127.0.0.1:7003'],
  ]);
  const lookup = (m: string): string | undefined => at.get(m);

  test('masters are placed at their addresses now; a plain node keeps its own', () => {
    expect(masterNames(cfg.ring, cfg.migration)).toEqual(['s1', 's2', 's3']);
    expect(ringAt(cfg.ring, lookup).nodes.map((n) => n.addr)).toEqual(['127.0.0.1:7001', '127.0.0.1:7102', '127.0.0.1:7009']);
    // Unknown yet: the configured addr is the guess; none at all is an error when a ring is built.
    expect(ringAt(cfg.ring, () => undefined).nodes.map((n) => n.addr)).toEqual([undefined, '127.0.0.1:7002', '127.0.0.1:7009']);
    expect(() => Placement.fromConfig(ringAt(cfg.ring, () => undefined), undefined)).toThrow('ring node s1: where Sentinel master s1 is is not known yet');
  });

  test('a failover readdresses the node on both rings of a migration, and every key keeps its node (by name)', () => {
    const before = Placement.fromConfig(ringAt(cfg.ring, lookup), migrationAt(cfg.migration, lookup));
    const after = before.readdressed('127.0.0.1:7001', '127.0.0.1:7201');
    expect(after.phase).toBe('double-write');
    const names = (p: Placement, side: 'from' | 'to') => (p[side] as Ring).nodes.map((n) => `${n.name}@${n.addr}`);
    expect(names(after, 'from')).toEqual(['s1@127.0.0.1:7201', 's2@127.0.0.1:7102', 'plain@127.0.0.1:7009']);
    expect(names(after, 'to')).toEqual(['s1@127.0.0.1:7201', 's2@127.0.0.1:7102', 's3@127.0.0.1:7003']);
    for (let i = 0; i < 2000; i++) {
      const key = Buffer.from(`key:${i}`);
      expect(after.shardOf(key)).toBe(before.shardOf(key));
      const was = before.writeAddress(before.shardOf(key));
      expect(after.writeAddress(after.shardOf(key))).toBe(was === '127.0.0.1:7001' ? '127.0.0.1:7201' : was);
    }
    expect(before.readdressed('127.0.0.1:9999', 'x:1')).not.toBe(before);
    const ring = before.from as Ring;
    expect(ring.readdressed('127.0.0.1:9999', 'x:1')).toBe(ring);
  });

  test('an ejected node stays ejected when another is readdressed', () => {
    const ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: [{ name: 'a', addr: 'h:1', weight: 1 }, { name: 'b', addr: 'h:2', weight: 1 }], ejected: new Set([1]) });
    const moved = ring.readdressed('h:1', 'h:3');
    expect(moved.masters()).toEqual(['h:3']);
    expect(moved.nodes.map((n) => n.points)).toEqual(ring.nodes.map((n) => n.points));
  });
});
