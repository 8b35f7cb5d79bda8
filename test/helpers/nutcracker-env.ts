// Jest helper for tests that run slotproxy and a real nutcracker side by side: two standalone
// redis-servers and a temp dir, made in beforeAll; every client, nutcracker and proxy process made
// through it stopped in afterAll, even when a test fails.
import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { ManagedProcess } from '../../bench/children';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { sendCommand } from '../../cmd/sandbox/resp-client';
import { Nutcracker } from '../integration/ring-nutcracker';
import { killAllProxies, tempDir } from './cli';

export interface NutcrackerEnv {
  nodes: () => StandaloneNodes;
  dir: () => string;
  /** Keeps `c` to disconnect it in afterAll; returns it. */
  keep: (c: Redis) => Redis;
  /** Keeps a nutcracker process to stop it in afterAll; returns it. */
  keepNutcracker: (p: ManagedProcess) => ManagedProcess;
  /** Writes `text` to `name` in the temp dir; returns its path. */
  write: (name: string, text: string) => string;
  /**
   * A real nutcracker with `args` (-c FILE and the rest but -s/-a; `-o` in the temp dir unless
   * given) and its stats on 127.0.0.1:`statsPort`, kept for afterAll; resolves once each of `ports`
   * answers PING.
   */
  startNutcracker: (args: string[], ports: number[], statsPort: number) => Promise<ManagedProcess>;
}

/** Resolves once something answers PING on `port`; rejects if `running()` turns false or after `ms`. */
export async function waitForPing(port: number, running: () => boolean, what: () => string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if ((await sendCommand(port, ['PING'], { timeoutMs: 500 })) === 'PONG') return;
    } catch {
      // Not listening yet.
    }
    if (!running() || Date.now() > deadline) throw new Error(`nothing answers PING on ${port}: ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves with `file`'s text once it matches `pattern`; rejects after `ms`. */
export async function waitForFile(file: string, pattern: RegExp, ms = 10_000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    if (pattern.test(text)) return text;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in ${file} within ${ms} ms; it holds:\n${text}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function useNutcrackerEnv(dirPrefix: string): NutcrackerEnv {
  let nodes: StandaloneNodes | undefined;
  let dir: string | undefined;
  const clients: Redis[] = [];
  const nutcrackers: ManagedProcess[] = [];
  beforeAll(async () => {
    dir = tempDir(dirPrefix);
    nodes = await StandaloneNodes.start(2);
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) if (c.status !== 'end') c.disconnect();
    killAllProxies();
    await Promise.all(nutcrackers.map((n) => n.stop()));
    await nodes?.stop();
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true });
  }, 30_000);
  const env: NutcrackerEnv = {
    nodes: () => {
      if (nodes === undefined) throw new Error('useNutcrackerEnv: the nodes did not start');
      return nodes;
    },
    dir: () => {
      if (dir === undefined) throw new Error('useNutcrackerEnv: no temp dir yet');
      return dir;
    },
    keep: (c) => (clients.push(c), c),
    keepNutcracker: (p) => (nutcrackers.push(p), p),
    write: (name, text) => {
      const file = path.join(env.dir(), name);
      fs.writeFileSync(file, text);
      return file;
    },
    startNutcracker: async (args, ports, statsPort) => {
      const logFile = args.includes('-o') ? args[args.indexOf('-o') + 1] : path.join(env.dir(), `nutcracker-${ports[0]}.log`);
      // Its stats port: the caller's, taken with its other ports (two on the default 22222 would collide).
      const stats = ['-s', String(statsPort), '-a', '127.0.0.1'];
      const nc = env.keepNutcracker(ManagedProcess.start(Nutcracker.bin(), [...args, ...(args.includes('-o') ? [] : ['-o', logFile]), ...stats]));
      const said = (): string => `${nc.describeExit()} ${nc.stderr}${fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : ''}`;
      for (const port of ports) await waitForPing(port, () => nc.running, said);
      return nc;
    },
  };
  return env;
}
