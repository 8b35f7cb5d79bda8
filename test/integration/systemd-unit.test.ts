// config/examples/slotproxy.service, the systemd unit docs/production.md ships: its fields say what
// the proxy does (SIGHUP reloads, SIGTERM drains in up to 5 s, exit 2 is a bad config), its
// commands are real slotproxy command lines, and, where systemd-analyze exists, `systemd-analyze
// verify` accepts it (with the binary's path pointed at this build).

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findExecutable } from '../../cmd/sandbox/executables';
import { BIN } from '../helpers/cli';

const ROOT = path.resolve(__dirname, '..', '..');
const UNIT = path.join(ROOT, 'config', 'examples', 'slotproxy.service');
const INSTALLED_BIN = '/usr/local/bin/slotproxy';
const CONFIG = '/etc/slotproxy/slotproxy.yaml';

/** The unit's sections: each key's values in order (a key may repeat), comments and blank lines left out. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header !== null) {
      current = new Map();
      sections.set(header[1], current);
      continue;
    }
    const eq = line.indexOf('=');
    if (current === undefined || eq < 1) throw new Error(`not a unit-file line: ${line}`);
    const key = line.slice(0, eq);
    current.set(key, [...(current.get(key) ?? []), line.slice(eq + 1)]);
  }
  return sections;
}

function run(cmd: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, output: stdout + stderr });
    });
  });
}

const unit = parseUnit(fs.readFileSync(UNIT, 'utf8'));
const service = unit.get('Service') ?? new Map<string, string[]>();
const one = (key: string): string | undefined => service.get(key)?.at(-1);

let tmp = '';
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-unit-'));
});
afterAll(() => {
  if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
});

test('the unit starts, reloads and stops slotproxy as the proxy expects', () => {
  expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install']);
  expect(one('Type')).toBe('simple');
  expect(one('ExecStart')).toBe(`${INSTALLED_BIN} start -c ${CONFIG}`);
  expect(one('ExecStartPre')).toBe(`${INSTALLED_BIN} check-config ${CONFIG}`);
  expect(one('ExecReload')).toBe('/bin/kill -HUP $MAINPID');
  expect(one('KillSignal')).toBe('SIGTERM');
  // The drain takes up to 5 s; systemd must not SIGKILL before.
  expect(Number(one('TimeoutStopSec'))).toBeGreaterThan(5);
  expect(one('Restart')).toBe('on-failure');
  expect(one('RestartPreventExitStatus')).toBe('2');
  // limits.maxClients defaults to 10000, each client a descriptor, plus the back-end connections.
  expect(Number(one('LimitNOFILE'))).toBeGreaterThan(10_000);
  expect(one('User')).toBe('slotproxy');
  // V8 compiles code at run time: this hardening option would kill the proxy at start.
  expect(service.has('MemoryDenyWriteExecute')).toBe(false);
  expect(unit.get('Install')?.get('WantedBy')).toEqual(['multi-user.target']);
});

test("the unit's command lines are ones slotproxy takes: check-config of a valid file exits 0, of a bad one 2 (which the unit does not restart)", async () => {
  const argv = (line: string): string[] => line.replace(INSTALLED_BIN, '').trim().split(/\s+/).map((a) => (a === CONFIG ? path.join(tmp, 'slotproxy.yaml') : a));
  fs.writeFileSync(path.join(tmp, 'slotproxy.yaml'), fs.readFileSync(path.join(ROOT, 'config', 'examples', 'cluster.yaml')));
  const good = await run(process.execPath, [BIN, ...argv(one('ExecStartPre')!)]);
  expect(good).toMatchObject({ code: 0 });
  fs.writeFileSync(path.join(tmp, 'slotproxy.yaml'), 'mode: cluster\ncluster:\n  seeds: []\n');
  expect((await run(process.execPath, [BIN, ...argv(one('ExecStartPre')!)])).code).toBe(2);
  const help = await run(process.execPath, [BIN, argv(one('ExecStart')!)[0], '--help']);
  expect(help.output).toMatch(/-c, --config/);
});

/** Every setting the unit uses, per section: what a host without systemd-analyze checks instead. */
const KNOWN: Record<string, string[]> = {
  Unit: ['Description', 'Documentation', 'After', 'Wants'],
  Service: [
    'Type', 'User', 'Group', 'ExecStartPre', 'ExecStart', 'ExecReload', 'KillSignal', 'TimeoutStopSec', 'KillMode', 'Restart', 'RestartSec',
    'RestartPreventExitStatus', 'LimitNOFILE', 'Environment', 'NoNewPrivileges', 'ProtectSystem', 'ProtectHome', 'PrivateTmp', 'PrivateDevices',
    'ProtectKernelTunables', 'ProtectKernelModules', 'ProtectControlGroups', 'RestrictAddressFamilies', 'RestrictNamespaces', 'LockPersonality',
  ],
  Install: ['WantedBy'],
};

test('systemd-analyze verify accepts the unit and refuses a misspelt value (without systemd-analyze: every setting is a known one)', async () => {
  const analyze = findExecutable('systemd-analyze');
  if (analyze === null) {
    for (const [section, keys] of unit) expect([...keys.keys()].filter((k) => !(KNOWN[section] ?? []).includes(k))).toEqual([]);
    expect(one('TimeoutStopSec')).toMatch(/^\d+$/);
    return;
  }
  const wrapper = path.join(tmp, 'slotproxy');
  fs.writeFileSync(wrapper, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`, { mode: 0o755 });
  const text = fs.readFileSync(UNIT, 'utf8').replaceAll(INSTALLED_BIN, wrapper);
  const good = path.join(tmp, 'slotproxy.service');
  fs.writeFileSync(good, text);
  const ok = await run(analyze, ['verify', good]);
  expect(ok.output).toBe('');
  expect(ok.code).toBe(0);
  const bad = path.join(tmp, 'bad', 'slotproxy.service');
  fs.mkdirSync(path.dirname(bad));
  fs.writeFileSync(bad, text.replace('TimeoutStopSec=15', 'TimeoutStopSec=fifteen'));
  expect((await run(analyze, ['verify', bad])).output).toMatch(/slotproxy\.service:\d+: Failed to parse time value, ignoring: fifteen/);
});
