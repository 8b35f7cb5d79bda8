// Issue 7, faults at start: one seed down (the proxy starts from the others); every seed down (a clear
// error, retried with backoff, no crash; the proxy starts serving once a seed comes up).

import fs from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { useCluster } from '../../helpers/cluster';
import { startProxy } from '../../helpers/proxy';
import { ProxyProcess, killAllProxies, tempDir } from '../../helpers/cli';
import { ProxyServer } from '../../../proxy/server/server';
import { RedisNode } from '../../../cmd/sandbox/redis-node';
import { freeClusterPorts, freePort } from '../../../cmd/sandbox/ports';

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let dir: string;
const clients: Redis[] = [];

beforeAll(() => {
  dir = tempDir('slotproxy-seeds-');
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  killAllProxies();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a seed that is down at start is skipped; the proxy starts from the others', async () => {
  const dead = `127.0.0.1:${await freePort()}`;
  const proxy: ProxyServer = await startProxy([dead, ...cluster().seeds]);
  try {
    const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    expect(await c.set('seeds:k', 'v')).toBe('OK');
    expect(await c.get('seeds:k')).toBe('v');
  } finally {
    await proxy.close(500);
  }
});

test('every seed down at start: a clear error, retried, no crash; serving once a seed is up', async () => {
  const [seedPort] = await freeClusterPorts(1);
  const port = await freePort();
  const file = path.join(dir, 'down.yaml');
  fs.writeFileSync(file, `listen: 127.0.0.1:${port}\nmode: cluster\ncluster:\n  seeds: [127.0.0.1:${seedPort}]\nlog:\n  level: info\n`);
  const proxy = ProxyProcess.start(file);
  let node: RedisNode | undefined;
  try {
    // Retried with backoff (100 ms, 200 ms, ...), each attempt logged with the cause.
    await proxy.waitForLog(/cannot load the cluster topology from any seed; retrying/, 10_000, 3);
    expect(proxy.log).toContain(`127.0.0.1:${seedPort}`);
    expect(proxy.log).toContain(`node 127.0.0.1:${seedPort} unreachable (Connection refused)`);
    expect(proxy.running).toBe(true);

    node = await RedisNode.start({ port: seedPort, cluster: true });
    await node.command('CLUSTER', 'ADDSLOTSRANGE', 0, 16383);
    await proxy.waitForLog(/slotproxy is listening/, 20_000);
    const c = new Redis({ port, maxRetriesPerRequest: 0 });
    clients.push(c);
    // The lone node may take a moment to call its cluster state ok; the proxy retries CLUSTERDOWN.
    expect(await c.set('seeds:late', 'v')).toBe('OK');
    expect(await c.get('seeds:late')).toBe('v');
    const exited = proxy.exitCode();
    proxy.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    await node?.destroy();
  }
}, 60_000);
