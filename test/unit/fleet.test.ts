// The fleet as read from CLIENT LIST (proxy/migration/fleet.ts): names, idleness, phase order.
import { connectionName, isBehind, parseClientList } from '../../proxy/migration/fleet';

const line = (name: string, idle: number): string =>
  `id=7 addr=127.0.0.1:50000 laddr=127.0.0.1:7101 fd=9 name=${name} age=5 idle=${idle} flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1 events=r cmd=client|setname user=default redir=-1 resp=2`;

test('a proxy named by connectionName is read back from CLIENT LIST', () => {
  const record = { id: 'host-42-abcdef', addr: '127.0.0.1:7777', phase: 'read-new' as const, pid: 42, version: '0.1.0', targetRefused: 'mset=3,sunion=1', feeds: '127.0.0.1:7101=lost,127.0.0.1:7102=re-walking', copies: '127.0.0.1:7101,127.0.0.1:7102', to: 'r1a2b3c4d5e6f', host: 'proxy-1', config: '/etc/slot proxy/ring|a%b é.yaml' };
  const name = connectionName(record);
  // Redis refuses names with spaces or characters outside '!'..'~'.
  expect(name).toMatch(/^[!-~]+$/);
  expect(parseClientList(`${line(name, 1)}\n`)).toEqual([record]);
});

test('a proxy registered by a slotproxy that named no host or config file reads as unknown', () => {
  const [r] = parseClientList(line('slotproxy-fleet|old|double-write|127.0.0.1:1|1|0.1.0|-|live|-|-', 0));
  expect([r.host, r.config]).toEqual(['-', '-']);
});

test('a proxy registered by an older slotproxy (no refusal field) reads as having refused nothing', () => {
  expect(parseClientList(line('slotproxy-fleet|old|double-write|127.0.0.1:1|1|0.1.0', 0))[0].targetRefused).toBe('-');
});

test('a proxy registered by a slotproxy without change feeds reads as having none', () => {
  expect(parseClientList(line('slotproxy-fleet|old|double-write|127.0.0.1:1|1|0.1.0|-', 0))[0].feeds).toBe('-');
});

test('a proxy registered by a slotproxy without copier leases reads as holding none', () => {
  expect(parseClientList(line('slotproxy-fleet|old|double-write|127.0.0.1:1|1|0.1.0|-|live', 0))[0].copies).toBe('-');
});

test('other clients, stale proxies and malformed names are not in the fleet', () => {
  const text = [
    line('', 0),
    line('app-1', 0),
    line('slotproxy-fleet|a|done|127.0.0.1:1|1|0.1.0', 4), // idle past the heartbeat's bound
    line('slotproxy-fleet|b|sideways|127.0.0.1:2|2|0.1.0', 0), // unknown phase
    line('slotproxy-fleet|c', 0), // truncated
    line('slotproxy-fleet|d|none|127.0.0.1:4|4|0.1.0', 3),
  ].join('\n');
  expect(parseClientList(text).map((r) => r.id)).toEqual(['d']);
});

test.each([
  ['none', 'double-write', true],
  ['double-write', 'read-new', true],
  ['read-new', 'read-new', false],
  ['done', 'read-new', false],
  ['read-new', 'double-write', false],
] as const)('%s is behind %s: %s', (phase, other, behind) => {
  expect(isBehind(phase, other)).toBe(behind);
});
