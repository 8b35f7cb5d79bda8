// `slotproxy migrate phase` where the proxies run: a proxy under --workers (every worker switches,
// seen through fresh client connections that land on each worker), two proxies started from
// different config files (both switched; the file the tool did not write is named), and a proxy
// whose client listener speaks TLS and requires client certificates (the tool connects with the
// config's CA and certificate; a CA or a certificate the proxy refuses is said plainly), and such a
// listener under --workers (every worker switched over TLS).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import Redis from 'ioredis';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { freePorts } from '../../cmd/sandbox/ports';
import { BIN, ProxyProcess, killAllProxies, tempDir } from '../helpers/cli';
import { TestCerts, makeTestCerts } from '../helpers/certs';

let nodes: StandaloneNodes | undefined;
let certs: TestCerts;
let dir = '';

/** A ring-migration config (ring A: 2 nodes, ring B: 3) for a proxy on `port`, in `phase`. */
function config(port: number, phase: string, extra = ''): string {
  const [a, b, c] = nodes!.addresses;
  return [
    `listen: 127.0.0.1:${port}`, 'mode: ring', 'log:', '  level: info', 'ring:', '  hash: murmur', '  nodes:',
    `    - { name: a, addr: "${a}" }`, `    - { name: b, addr: "${b}" }`,
    'migration:', `  phase: ${phase}`, '  to:', '    nodes:',
    `      - { name: a, addr: "${a}" }`, `      - { name: b, addr: "${b}" }`, `      - { name: c, addr: "${c}" }`, extra, '',
  ].join('\n');
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

/** `migrate status`'s proxies, as "port phase" (one line per registered proxy or worker). */
async function listed(file: string): Promise<string[]> {
  const r = await cli(['migrate', 'status', '-c', file]);
  if (r.code !== 0) throw new Error(`migrate status: ${r.stderr}`);
  return [...r.stdout.matchAll(/^ {2}\S+ 127\.0\.0\.1:(\d+) (\S+)$/gm)].map((m) => `${m[1]} ${m[2]}`).sort();
}

async function waitListed(file: string, want: string[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  let got: string[] = [];
  while (Date.now() < deadline) {
    got = await listed(file);
    if (JSON.stringify(got) === JSON.stringify([...want].sort())) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`migrate status listed ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}

/**
 * The phase each worker behind `port` reports, by its process id, read through `connections`
 * fresh client connections (the primary hands them to the workers in turn).
 */
async function phasesByWorker(port: number, connections: number, options: { tls?: tls.ConnectionOptions } = {}): Promise<Map<number, Set<string>>> {
  const seen = new Map<number, Set<string>>();
  for (let i = 0; i < connections; i++) {
    const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => null, disableClientInfo: true, ...options });
    let pid: number;
    let phase: string;
    try {
      pid = Number(/proxy_process_id:(\d+)/.exec(await c.info('proxy'))?.[1]);
      phase = /phase:(\S+)/.exec(String(await c.call('PROXY', 'MIGRATION', 'STATUS')))?.[1] ?? '?';
    } finally {
      c.disconnect();
    }
    if (!seen.has(pid)) seen.set(pid, new Set());
    seen.get(pid)!.add(phase);
  }
  return seen;
}

beforeAll(async () => {
  nodes = await StandaloneNodes.start(3);
  dir = tempDir('slotproxy-phase-tool-');
  certs = makeTestCerts();
}, 60_000);

afterAll(async () => {
  killAllProxies();
  await nodes?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(certs.dir, { recursive: true, force: true });
}, 30_000);

test('--workers 2: migrate phase switches every worker, and so does PROXY MIGRATION PHASE through any one of them', async () => {
  const [port] = await freePorts(1);
  const file = path.join(dir, 'workers.yaml');
  fs.writeFileSync(file, config(port, 'double-write'));
  const proxy = ProxyProcess.start(file, ['--workers', '2']);
  try {
    await proxy.waitForLog(/slotproxy is listening/, 30_000, 2);
    // Each worker is a proxy of the fleet with its own record.
    await waitListed(file, [`${port} double-write`, `${port} double-write`]);

    const r = await cli(['migrate', 'phase', 'read-new', '-c', file]);
    expect(r.stdout).toContain(`phase: all 2 proxies in read-new; ${file} says read-new`);
    expect(r.code).toBe(0);
    await waitListed(file, [`${port} read-new`, `${port} read-new`]);
    const after = await phasesByWorker(port, 8);
    expect(after.size).toBe(2);
    for (const phases of after.values()) expect([...phases]).toEqual(['read-new']);

    // One client's switch back reaches the other worker too.
    const admin = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => null, disableClientInfo: true });
    try {
      expect(await admin.call('PROXY', 'MIGRATION', 'PHASE', 'double-write')).toBe('OK');
    } finally {
      admin.disconnect();
    }
    const back = await phasesByWorker(port, 8);
    expect(back.size).toBe(2);
    for (const phases of back.values()) expect([...phases]).toEqual(['double-write']);
  } finally {
    proxy.kill('SIGTERM');
    await proxy.exitCode();
  }
}, 90_000);

test('two proxies from two config files: both switched, the file the tool did not write is named until it says the phase too', async () => {
  const ports = await freePorts(2);
  const files = ['a.yaml', 'b.yaml'].map((f) => path.join(dir, f));
  ports.forEach((port, i) => fs.writeFileSync(files[i], config(port, 'double-write')));
  const proxies = files.map((f) => ProxyProcess.start(f));
  try {
    await Promise.all(proxies.map((p) => p.waitForLog(/slotproxy is listening/, 30_000)));
    await waitListed(files[0], ports.map((p) => `${p} double-write`));
    const status = await cli(['migrate', 'status', '-c', files[0]]);
    expect(status.stdout).toContain(`    config file: ${os.hostname()}:${files[1]}`);

    const r = await cli(['migrate', 'phase', 'read-new', '-c', files[0]]);
    expect(r.stdout).toContain(`phase: all 2 proxies in read-new; ${files[0]} says read-new`);
    expect(r.stdout).toContain(`  ${os.hostname()}:${files[1]} (proxy 127.0.0.1:${ports[1]}): still says phase: double-write`);
    expect(r.stdout).not.toContain(`${os.hostname()}:${files[0]} `);
    expect(r.code).toBe(0);
    await waitListed(files[0], ports.map((p) => `${p} read-new`));
    expect(fs.readFileSync(files[1], 'utf8')).toContain('phase: double-write');

    // Run against the other file, the fleet is already switched: that file is written, and nothing is left.
    const again = await cli(['migrate', 'phase', 'read-new', '-c', files[1]]);
    expect(again.stdout).toContain(`phase: all 2 proxies in read-new; ${files[1]} says read-new`);
    expect(again.stdout).not.toContain('may not say');
    expect(again.code).toBe(0);
  } finally {
    for (const p of proxies) p.kill('SIGTERM');
    await Promise.all(proxies.map((p) => p.exitCode()));
  }
}, 90_000);

test('a TLS listener that requires client certificates: switched over TLS with the config\'s CA and certificate; a CA, name or certificate it refuses is said', async () => {
  const [port] = await freePorts(1);
  const file = path.join(dir, 'tls.yaml');
  const tlsSection = ['tls:', `  cert: ${certs.serverCert}`, `  key: ${certs.serverKey}`, `  ca: ${certs.ca}`, '  requireClientCert: true'].join('\n');
  fs.writeFileSync(file, config(port, 'double-write', tlsSection));
  const plainFile = path.join(dir, 'tls-missing.yaml');
  fs.writeFileSync(plainFile, config(port, 'double-write'));
  const proxy = ProxyProcess.start(file);
  try {
    await proxy.waitForLog(/slotproxy is listening/, 30_000);
    await waitListed(file, [`${port} double-write`]);
    const phase = (extra: string[], f = file): ReturnType<typeof cli> => cli(['migrate', 'phase', 'read-new', '-c', f, ...extra]);

    const untrusted = await phase(['--tls-ca', certs.otherCa]);
    expect(untrusted.stdout).toContain(`127.0.0.1:${port}: unreachable: TLS: its certificate is not signed by a CA this tool trusts (`);
    expect(untrusted.stdout).toContain(`); it trusts --tls-ca (${certs.otherCa}): name the CA that signed the proxies' certificates with --tls-ca FILE`);
    expect(untrusted.code).toBe(1);
    const misnamed = await phase(['--tls-servername', 'proxy.example']);
    expect(misnamed.stdout).toContain('TLS: its certificate is not for proxy.example');
    expect(misnamed.code).toBe(1);
    const stranger = await phase(['--tls-cert', certs.strangerCert, '--tls-key', certs.strangerKey]);
    expect(stranger.stdout).toMatch(/TLS: it refused this tool's client certificate \(|TLS: it closed the connection without a reply, as a listener that requires client certificates does when it refuses this tool's client certificate/);
    expect(stranger.stdout).toContain(`this tool presented --tls-cert (${certs.strangerCert})`);
    expect(stranger.code).toBe(1);
    const plain = await phase([], plainFile);
    expect(plain.stdout).toMatch(/unreachable: .*if its listener speaks TLS, the config lacks its tls: section/);
    expect(plain.code).toBe(1);
    expect(fs.readFileSync(file, 'utf8')).toContain('phase: double-write');

    const r = await phase(['--tls-servername', 'localhost']);
    expect(r.stdout).toContain(`phase: all 1 proxies in read-new; ${file} says read-new`);
    expect(r.code).toBe(0);
    const key = (f: string): Buffer => fs.readFileSync(f);
    const seen = await phasesByWorker(port, 1, { tls: { ca: key(certs.ca), cert: key(certs.clientCert), key: key(certs.clientKey) } });
    expect([...seen.values()].map((s) => [...s])).toEqual([['read-new']]);
  } finally {
    proxy.kill('SIGTERM');
    await proxy.exitCode();
  }
}, 90_000);

test('a TLS listener under --workers 2: migrate phase over TLS switches every worker', async () => {
  const [port] = await freePorts(1);
  const file = path.join(dir, 'tls-workers.yaml');
  const tlsSection = ['tls:', `  cert: ${certs.serverCert}`, `  key: ${certs.serverKey}`, `  ca: ${certs.ca}`, '  requireClientCert: true'].join('\n');
  fs.writeFileSync(file, config(port, 'double-write', tlsSection));
  const proxy = ProxyProcess.start(file, ['--workers', '2']);
  try {
    await proxy.waitForLog(/slotproxy is listening/, 30_000, 2);
    await waitListed(file, [`${port} double-write`, `${port} double-write`]);

    const r = await cli(['migrate', 'phase', 'read-new', '-c', file, '--tls-servername', 'localhost']);
    expect(r.stdout).toContain(`phase: all 2 proxies in read-new; ${file} says read-new`);
    expect(r.code).toBe(0);
    await waitListed(file, [`${port} read-new`, `${port} read-new`]);
    const key = (f: string): Buffer => fs.readFileSync(f);
    const seen = await phasesByWorker(port, 8, { tls: { ca: key(certs.ca), cert: key(certs.clientCert), key: key(certs.clientKey), servername: 'localhost' } });
    expect(seen.size).toBe(2);
    for (const phases of seen.values()) expect([...phases]).toEqual(['read-new']);
  } finally {
    proxy.kill('SIGTERM');
    await proxy.exitCode();
  }
}, 90_000);

test('proxies with auth.users and no auth.password: migrate phase AUTHs as --user; without it, or as a user not allowed PROXY, it says so', async () => {
  const [port] = await freePorts(1);
  const file = path.join(dir, 'users.yaml');
  const authSection = ['auth:', '  users:', '    - { name: ops, password: ops-secret }', '    - { name: app, password: app-secret, commands: "+get +set" }'].join('\n');
  fs.writeFileSync(file, config(port, 'double-write', authSection));
  const proxy = ProxyProcess.start(file);
  try {
    await proxy.waitForLog(/slotproxy is listening/, 30_000);
    await waitListed(file, [`${port} double-write`]);

    const unnamed = await cli(['migrate', 'phase', 'read-new', '-c', file]);
    expect(unnamed.stderr).toContain('the config has auth.users but no auth.password: name the user to AUTH as with --user NAME (one of ops, app)');
    expect(unnamed.code).toBe(1);
    const stranger = await cli(['migrate', 'phase', 'read-new', '-c', file, '--user', 'nobody']);
    expect(stranger.stderr).toContain("--user nobody: not a user of the config's auth.users (ops, app)");
    expect(stranger.code).toBe(1);
    const app = await cli(['migrate', 'phase', 'read-new', '-c', file, '--user', 'app']);
    expect(app.stdout).toMatch(new RegExp(`127\\.0\\.0\\.1:${port}: NOPERM`));
    expect(app.code).toBe(1);
    expect(fs.readFileSync(file, 'utf8')).toContain('phase: double-write');

    const ops = await cli(['migrate', 'phase', 'read-new', '-c', file, '--user', 'ops']);
    expect(ops.stdout).toContain(`phase: all 1 proxies in read-new; ${file} says read-new`);
    expect(ops.code).toBe(0);
    await waitListed(file, [`${port} read-new`]);
  } finally {
    proxy.kill('SIGTERM');
    await proxy.exitCode();
  }
}, 90_000);
