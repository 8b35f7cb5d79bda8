// Jest helper for a file whose tests start proxy processes in front of standalone nodes: a temp dir
// for their configs and spools, and clients of the nodes; the clients closed and every proxy killed
// after each test (before the nodes stop: a client whose node is gone waits 2 s to close), the dir
// removed after all.
import fs from 'node:fs';
import Redis from 'ioredis';
import { killAllProxies, tempDir } from './cli';
import { NodeClients } from './node-clients';

export interface ProxyProcesses {
  /** The suite's temp dir. */
  dir: () => string;
  /** A client of the node at `addr`, one per address, closed after each test. */
  open: (addr: string) => Redis;
  /** `client`, closed after each test with the others. */
  track: (client: Redis) => Redis;
}

export function useProxyProcesses(prefix: string): ProxyProcesses {
  const nodeClients = new NodeClients();
  let dir = '';
  beforeAll(() => {
    dir = tempDir(prefix);
  });
  afterEach(() => {
    nodeClients.closeAll();
    killAllProxies();
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir: () => dir, open: (addr) => nodeClients.open(addr), track: (client) => nodeClients.track(client) };
}
