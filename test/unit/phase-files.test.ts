// `migrate phase`'s list of the fleet's config files that may not say the new phase, for proxies on
// several hosts: a file on this host is read, one on another host is named as not read from here,
// proxies sharing one file are named once, and a registration without a file is said.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { filesNotSaying } from '../../proxy/migration/tools/phase-files';
import { ProxyRecord } from '../../proxy/migration/fleet';

let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-phase-files-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function record(addr: string, host: string, config: string): ProxyRecord {
  return { id: addr, addr, phase: 'read-new', pid: 1, version: '0', targetRefused: '-', feeds: '-', copies: '-', to: '-', host, config };
}

function file(name: string, phase: string): string {
  const f = path.join(dir, name);
  fs.writeFileSync(f, ['listen: 127.0.0.1:7000', 'mode: ring', 'ring:', '  nodes:', '    - { name: a, addr: "127.0.0.1:7001" }', 'migration:', `  phase: ${phase}`, '  to:', '    nodes:', '      - { name: a, addr: "127.0.0.1:7002" }', ''].join('\n'));
  return f;
}

test('proxies on three hosts: this host\'s stale file is read and named, the others are named as not read, a file that says the phase is not named', () => {
  const here = 'this-host';
  const stale = file('stale.yaml', 'double-write');
  const current = file('current.yaml', 'read-new');
  const lines = filesNotSaying(
    [
      record('10.0.0.1:7000', here, stale),
      record('10.0.0.1:7001', here, stale),
      record('10.0.0.1:7002', here, current),
      record('10.0.0.2:7000', 'host-b', '/etc/slotproxy/proxy.yaml'),
      record('10.0.0.3:7000', 'host-c', '/etc/slotproxy/proxy.yaml'),
      record('10.0.0.4:7000', 'host-d', '-'),
    ],
    'read-new',
    here,
  );
  expect(lines).toEqual([
    `this-host:${stale} (proxy 10.0.0.1:7000, 10.0.0.1:7001): still says phase: double-write`,
    'host-b:/etc/slotproxy/proxy.yaml (proxy 10.0.0.2:7000): on another host, not read from here',
    'host-c:/etc/slotproxy/proxy.yaml (proxy 10.0.0.3:7000): on another host, not read from here',
    'proxy 10.0.0.4:7000: its registration names no config file (a slotproxy older than this tool): make the file it runs from say phase: read-new',
  ]);
});

test('a file on this host that cannot be read is said, with the reason', () => {
  const missing = path.join(dir, 'gone.yaml');
  const [line] = filesNotSaying([record('10.0.0.1:7000', 'h', missing)], 'done', 'h');
  expect(line).toMatch(new RegExp(`^h:${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(proxy 10\\.0\\.0\\.1:7000\\): cannot be read here \\(`));
});
