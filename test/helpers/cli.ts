// Jest helper: the built slotproxy binary (dist/, made by `npm run build`, which `npm test` runs) as
// a child process with a config file, its stderr log kept for assertions; always killed in afterAll.

import { ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { NODE_FLAGS } from '../../cmd/node-flags';
import { freePort } from '../../cmd/sandbox/ports';

export const BIN = path.resolve(__dirname, '..', '..', 'dist', 'cmd', 'slotproxy.js');

export class ProxyProcess {
  log = '';
  /** What it printed on stdout (the start banner, `-D`...). */
  out = '';
  private readonly exited: Promise<number | null>;
  private readonly waiters = new Set<() => void>();

  private constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (d: Buffer) => {
      this.out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.log += d.toString();
      for (const w of this.waiters) w();
    });
    this.exited = new Promise((resolve) => child.on('exit', (code) => {
      for (const w of this.waiters) w();
      resolve(code);
    }));
  }

  /** Starts `slotproxy start -c file`; does not wait for it to listen (see waitForLog). */
  static start(file: string, extraArgs: string[] = []): ProxyProcess {
    return ProxyProcess.run(['start', '-c', file, ...extraArgs]);
  }

  /** Starts `slotproxy ARGS...` (any command); stopped by killAllProxies() too. */
  static run(args: string[]): ProxyProcess {
    if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` (npm test does)`);
    // The V8 flags of the bin's shebang, which spawning node directly would skip.
    const child = spawn(process.execPath, [...NODE_FLAGS, BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const p = new ProxyProcess(child);
    live.add(p);
    return p;
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error('slotproxy did not start');
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves once the log holds `pattern` `count` times; rejects after `ms` or if the process exits first. */
  waitForLog(pattern: RegExp, ms = 10_000, count = 1): Promise<void> {
    const global = new RegExp(pattern.source, pattern.flags.includes('g') ? pattern.flags : `${pattern.flags}g`);
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if ((this.log.match(global) ?? []).length >= count) {
          done();
          resolve();
        } else if (!this.running) {
          done();
          reject(new Error(`slotproxy exited before logging ${pattern}:\n${this.log}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} within ${ms} ms; log:\n${this.log}`));
      }, ms);
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  exitCode(): Promise<number | null> {
    return this.exited;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /** SIGKILL (a SIGSTOPped process is continued first), resolved once it exited or after `ms`. */
  async stop(ms = 5000): Promise<void> {
    this.kill('SIGCONT');
    this.kill('SIGKILL');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }
}

const live = new Set<ProxyProcess>();

/** Kills every proxy process still running, a SIGSTOPped one too (call from afterAll). */
export function killAllProxies(): void {
  for (const p of live) {
    p.kill('SIGCONT');
    p.kill('SIGKILL');
  }
  live.clear();
}

/** A temp dir for config files; remove with fs.rmSync(dir, { recursive: true }). */
export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * A proxy process started from `config` (written as JSON, which the YAML loader reads) on a free
 * port; resolves once it listens. Stop it with kill(), or killAllProxies() in afterAll.
 */
export async function startProxyProcess(config: Record<string, unknown>, dir: string): Promise<{ proxy: ProxyProcess; port: number; file: string }> {
  const port = await freePort();
  const file = path.join(dir, `proxy-${port}.json`);
  fs.writeFileSync(file, JSON.stringify({ ...config, listen: `127.0.0.1:${port}`, log: { level: 'info' } }));
  const proxy = ProxyProcess.start(file);
  await proxy.waitForLog(/slotproxy is listening/, 30_000);
  return { proxy, port, file };
}
