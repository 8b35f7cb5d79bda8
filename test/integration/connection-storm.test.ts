// Connection storms against a real 3-master cluster: 2,000 clients arriving at once (as after a
// proxy restart) share the configured back-end connections, and a master that restarts under load
// is reconnected with backoff, not hammered.

import net from 'node:net';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { ProxyServer } from '../../proxy/server/server';
import { client, startProxy, useProxy } from '../helpers/proxy';

const CLIENTS = 2000;
const LANES = 1; // backend.connectionsPerNode's default

/** Client connections of a node, leaving out its replicas' links (flags=S) and our own query. */
async function clientsOf(node: RedisNode): Promise<number> {
  const list = String(await node.command('CLIENT', 'LIST'));
  return list.split('\n').filter((l) => l.includes('id=') && !l.includes('cmd=client|list') && !/ flags=S /.test(l)).length;
}

/** `n` raw clients connecting at once, each sending one GET; resolves with every reply line. */
function crowd(port: number, n: number): Promise<string[]> {
  return Promise.all(
    Array.from(
      { length: n },
      (_, i) =>
        new Promise<string>((resolve, reject) => {
          const socket = net.connect({ host: '127.0.0.1', port });
          let got = '';
          socket.on('connect', () => socket.write(`GET storm:${i}\r\n`));
          socket.on('data', (d) => {
            got += d.toString('latin1');
            if (got.endsWith('\r\n')) {
              socket.destroy();
              resolve(got);
            }
          });
          socket.on('error', reject);
        }),
    ),
  );
}

async function info(proxy: ProxyServer, field: string): Promise<number> {
  const c = client(proxy);
  try {
    const m = new RegExp(`${field}:(\\d+)`).exec(await c.info('proxy'));
    if (m === null) throw new Error(`INFO proxy has no ${field}`);
    return Number(m[1]);
  } finally {
    c.disconnect();
  }
}

describe('connection storms', () => {
  const env = useProxy();

  test('2,000 clients at once, twice (as after a proxy restart), use only the shared back-end connections', async () => {
    const cluster = env.cluster();
    const first = env.proxy();
    const port = first.address.port;
    const replies = await crowd(port, CLIENTS);
    expect(replies.every((r) => r === '$-1\r\n')).toBe(true);
    for (const m of cluster.masters) expect(await clientsOf(m)).toBeLessThanOrEqual(LANES);

    // A second proxy process on another port stands for the restarted one: everyone reconnects at once.
    const second = await startProxy(cluster.seeds);
    try {
      const again = await crowd(second.address.port, CLIENTS);
      expect(again.every((r) => r === '$-1\r\n')).toBe(true);
      expect(await info(second, 'backend_connects_started')).toBeLessThanOrEqual(cluster.masters.length * LANES + cluster.seeds.length);
    } finally {
      await second.close(500);
    }
    for (const m of cluster.masters) expect(await clientsOf(m)).toBeLessThanOrEqual(LANES);
  }, 60_000);

  test('a master that restarts under load is reconnected with backoff, not stormed', async () => {
    const cluster = env.cluster();
    const proxy = env.proxy();
    const victim = cluster.masters[0];
    const c = env.connect();
    let stop = false;
    const load = (async () => {
      let i = 0;
      while (!stop) await c.get(`restart:${i++}`).catch(() => null);
    })();
    const before = await info(proxy, 'backend_connects_started');
    victim.kill('SIGKILL');
    await victim.waitForExit();
    // Down for a while, with 50 parallel requests a tick waiting on it.
    const burst = Array.from({ length: 50 }, (_, i) => c.get(`{restart}:${i}`).catch(() => null));
    await new Promise((r) => setTimeout(r, 400));
    await victim.restart();
    await Promise.all(burst);
    await cluster.waitForClusterOk(20_000);
    const connects = (await info(proxy, 'backend_connects_started')) - before;
    stop = true;
    await load;
    // Its lane with exponential backoff (25 ms doubling, jitter) over ~0.5 s: a handful of tries each.
    expect(connects).toBeLessThanOrEqual(30);
    // Once it is back, the proxy holds its lanes to it and nothing more.
    expect(await clientsOf(victim)).toBeLessThanOrEqual(LANES);
  }, 60_000);
});
