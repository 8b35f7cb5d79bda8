// cmd/settle-heap.ts through the binary: an idle proxy hands back the young generation its
// start-up grew, and a proxy with a client connected is left alone. V8's own GC trace
// (--trace-gc, on stdout) shows each collection, the settling's marked "testing" (a gc() call).

import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { SETTLE_AFTER_MS } from '../../cmd/settle-heap';
import { freePort } from '../../cmd/sandbox/ports';
import { BIN } from '../helpers/cli';
import { useReferenceNode } from '../helpers/reference-node';

const ref = useReferenceNode();
const children: ChildProcess[] = [];
const sockets: net.Socket[] = [];
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-settle-'));
});

afterAll(() => {
  for (const s of sockets) s.destroy();
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Traced {
  port: number;
  /** V8's GC trace so far. */
  trace(): string;
  /** Resolves with the trace once `holds` it; rejects after `ms` or on exit. */
  waitFor(holds: (trace: string) => boolean, what: string, ms: number): Promise<string>;
}

/** The binary with its V8 flags plus --trace-gc, in front of the reference node; resolves once it serves. */
async function startTraced(): Promise<Traced> {
  const port = await freePort();
  const file = path.join(dir, `proxy-${port}.yaml`);
  fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [127.0.0.1:${ref.node().port}]\nlog:\n  level: warn\n`);
  const child = spawn(process.execPath, [...NODE_FLAGS, '--trace-gc', BIN, 'start', '-c', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
    for (const l of listeners) l();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  child.on('exit', () => {
    for (const l of listeners) l();
  });
  const waitFor = (holds: (trace: string) => boolean, what: string, ms: number): Promise<string> =>
    new Promise((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      const check = (): void => {
        if (holds(out)) {
          done();
          resolve(out);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          done();
          reject(new Error(`slotproxy exited before ${what}:\n${err}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${what} within ${ms} ms; stdout:\n${out}\nstderr:\n${err}`));
      }, ms);
      listeners.add(check);
      check();
    });
  await waitFor((t) => t.includes('listening on'), 'start banner', 30_000);
  return { port, trace: () => out, waitFor };
}

/** "Scavenge 10.0 (27.0) -> 9.9 (12.0) MB, ... testing;": committed MB before and after. */
const SETTLING = /Scavenge [\d.]+ \(([\d.]+)\) -> [\d.]+ \(([\d.]+)\) MB[^\n]*testing/g;

/** MB of heap the settling's scavenges gave back so far: the first one's committed before, the last one's after. */
function givenBack(trace: string): number {
  const settling = [...trace.matchAll(SETTLING)];
  return settling.length === 0 ? 0 : Number(settling[0][1]) - Number(settling[settling.length - 1][2]);
}

test('an idle proxy shrinks its young generation once, SETTLE_AFTER_MS after it serves', async () => {
  const proxy = await startTraced();
  // At least the 4 MiB semi-space pair start-up grew (8 MB committed), less the 1 MB it keeps, and a margin.
  await proxy.waitFor((t) => givenBack(t) >= 5, 'young generation given back', SETTLE_AFTER_MS + 20_000);
  const settling = [...proxy.trace().matchAll(SETTLING)];
  // A few scavenges at most, in one burst.
  expect(settling.length).toBeLessThanOrEqual(16);
}, 60_000);

test('a proxy with a client connected at that moment is not collected', async () => {
  const proxy = await startTraced();
  const client = net.connect(proxy.port, '127.0.0.1');
  sockets.push(client);
  await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
  // The answer to a PING shows the session is up before the settling's moment.
  client.write('PING\r\n');
  await new Promise<void>((resolve) => client.once('data', () => resolve()));
  // Nothing to await for an absence: past the settling's moment, with margin for a slow machine.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_AFTER_MS + 4_000));
  expect(proxy.trace()).not.toMatch(/testing/);
}, 60_000);
