// Jest helper for tests that run slotproxy and a real nutcracker side by side: two standalone
// redis-servers and a temp dir, made in beforeAll; every client, nutcracker and proxy process made
// through it stopped in afterAll, even when a test fails.
import fs from 'node:fs';
import Redis from 'ioredis';
import { ManagedProcess } from '../../bench/children';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { killAllProxies, tempDir } from './cli';

export interface NutcrackerEnv {
  nodes: () => StandaloneNodes;
  dir: () => string;
  /** Keeps `c` to disconnect it in afterAll; returns it. */
  keep: (c: Redis) => Redis;
  /** Keeps a nutcracker process to stop it in afterAll; returns it. */
  keepNutcracker: (p: ManagedProcess) => ManagedProcess;
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
  return {
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
  };
}
