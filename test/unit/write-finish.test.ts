// `slotproxy migrate finish`'s rewrite of a config file (config/write-finish.ts): side B becomes the
// back end, migration: goes, and every other setting (and comment) stays as written.
import { finishedConfigText } from '../../config/write-finish';
import { parseConfig } from '../../config/load';
import { parse } from 'yaml';

const RING_INTO_CLUSTER = `# the proxies of shop
listen: 0.0.0.0:6379
mode: ring
crossSlot: split # MGET across nodes
ring:
  hash: fnv1a_64
  hashTag: ""
  autoEjectHosts: false
  nodes:
    - { name: a, addr: "10.0.0.1:6379" }
    - { name: b, addr: "10.0.0.2:6379" }
migration:
  phase: done
  to:
    cluster:
      seeds: [10.0.1.1:7000, 10.0.1.2:7000] # the new cluster
auth:
  password: s3cret
  users:
    - { name: app, password: apppw, commands: ["+@all"], keys: ["~*"] }
backend:
  commandTimeoutMs: 400
limits:
  idleClientTimeoutMs: 60000
metrics:
  listen: 127.0.0.1:9121
`;

test('a ring into a cluster: mode cluster and cluster.seeds where ring: was; split, auth, users, timeouts, metrics and comments kept', () => {
  const { text, dropped } = finishedConfigText('shop.yaml', RING_INTO_CLUSTER);
  const before = parseConfig(parse(RING_INTO_CLUSTER));
  const after = parseConfig(parse(text));
  expect(after.mode).toBe('cluster');
  expect(after.mode === 'cluster' && after.cluster.seeds).toEqual(['10.0.1.1:7000', '10.0.1.2:7000']);
  expect(after.migration).toBeUndefined();
  for (const k of ['listen', 'crossSlot', 'auth', 'backend', 'limits', 'metrics', 'scripts', 'log', 'workers'] as const) expect(after[k]).toEqual(before[k]);
  expect(text).toContain('# the proxies of shop');
  expect(text).toContain('# MGET across nodes');
  expect(text).toContain('# the new cluster');
  // In ring:'s place, before auth:
  expect(text.indexOf('cluster:')).toBeLessThan(text.indexOf('auth:'));
  expect(text).not.toContain('ring:');
  expect(text).not.toContain('migration:');
  expect(dropped).toEqual(['ring.autoEjectHosts']);
});

test('a ring into a bigger ring: ring.nodes are B\'s, the hash A\'s when B names none, B\'s when it does', () => {
  const ringToRing = (bHash: string): string => `mode: ring\nring:\n  hash: murmur\n  nodes: [{ addr: "h:1" }, { addr: "h:2" }]\nmigration:\n  phase: done\n  to:${bHash}\n    nodes: [{ addr: "h:1" }, { addr: "h:2" }, { addr: "h:3" }]\ncrossSlot: split\n`;
  const same = parseConfig(parse(finishedConfigText('r.yaml', ringToRing('')).text));
  expect(same.mode === 'ring' && same.ring).toMatchObject({ hash: 'murmur', nodes: [{ addr: 'h:1' }, { addr: 'h:2' }, { addr: 'h:3' }] });
  expect(same.crossSlot).toBe('split');
  const other = parseConfig(parse(finishedConfigText('r.yaml', ringToRing('\n    hash: md5')).text));
  expect(other.mode === 'ring' && other.ring.hash).toBe('md5');
});

test('a cluster into a ring, and a cluster into another cluster (its other cluster settings kept)', () => {
  const base = 'listen: 127.0.0.1:1\ncluster:\n  seeds: ["a:1"]\n  maxRedirects: 3\n';
  const intoRing = finishedConfigText('c.yaml', `${base}migration:\n  phase: done\n  to:\n    hash: crc16\n    nodes: [{ addr: "h:1" }]\n`);
  const ring = parseConfig(parse(intoRing.text));
  expect(ring.mode === 'ring' && ring.ring).toMatchObject({ hash: 'crc16', nodes: [{ addr: 'h:1' }] });
  expect(intoRing.dropped).toEqual(['cluster.maxRedirects']);
  const intoCluster = parseConfig(parse(finishedConfigText('c.yaml', `${base}migration:\n  phase: done\n  to:\n    cluster:\n      seeds: ["b:1"]\n`).text));
  expect(intoCluster.mode === 'cluster' && intoCluster.cluster).toMatchObject({ seeds: ['b:1'], maxRedirects: 3 });
});

test('JSON stays JSON, keys in their order, side B in side A\'s place', () => {
  const json = JSON.stringify({ listen: '127.0.0.1:1', mode: 'ring', ring: { hash: 'md5', nodes: [{ addr: 'h:1' }] }, migration: { phase: 'done', to: { cluster: { seeds: ['c:1'] } } }, crossSlot: 'split' });
  const { text } = finishedConfigText('p.json', json);
  const out = JSON.parse(text) as Record<string, unknown>;
  expect(Object.keys(out)).toEqual(['listen', 'mode', 'cluster', 'crossSlot']);
  expect(out).toMatchObject({ mode: 'cluster', cluster: { seeds: ['c:1'] }, crossSlot: 'split' });
});

test('a config without migration.to is refused', () => {
  expect(() => finishedConfigText('x.yaml', 'mode: ring\nring:\n  nodes: [{ addr: "h:1" }]\n')).toThrow('no migration.to');
});
