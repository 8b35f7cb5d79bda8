/**
 * `slotproxy sandbox`: a local Redis Cluster (3 masters, 3 replicas, the OS's redis-server on
 * loopback) with the proxy in front, for trying slotproxy out. Everything it starts is stopped on
 * Ctrl-C or SIGTERM, and on a failed start.
 */
import { RedisCluster } from './redis-cluster';
import { parseConfig } from '../../config/load';
import { ProxyServer } from '../../proxy/server/server';
import { log } from '../../proxy/telemetry/log';

export async function runSandbox(opts: { basePort: number; listen: string }): Promise<void> {
  log.info({ basePort: opts.basePort }, 'starting a 3-master, 3-replica Redis Cluster');
  const cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 1, basePort: opts.basePort });
  let proxy: ProxyServer | null = null;
  let stopping = false;
  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    process.stderr.write('\nsandbox: stopping the proxy and the Redis nodes...\n');
    await proxy?.close(1000).catch(() => undefined);
    await cluster.stop().catch(() => undefined);
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  try {
    const config = parseConfig({ listen: opts.listen, mode: 'cluster', cluster: { seeds: cluster.seeds } });
    proxy = await ProxyServer.start(config);
  } catch (err) {
    process.stderr.write(`sandbox: the proxy did not start: ${(err as Error).message}\n`);
    await stop(1);
    return;
  }
  const { host, port } = proxy.address;
  const masters = cluster.nodes.slice(0, 3).map((n) => n.address).join(', ');
  process.stdout.write(
    [
      '',
      `slotproxy sandbox is up: a Redis Cluster (masters ${masters}; one replica each)`,
      `and slotproxy in front of it on ${host}:${port}.`,
      '',
      `  redis-cli -p ${port} set greeting hello`,
      `  redis-cli -p ${port} get greeting`,
      `  redis-cli -p ${port} cluster keyslot greeting`,
      `  redis-benchmark -p ${port} -t set,get -q`,
      '',
      'Press Ctrl-C to stop the proxy and remove the cluster.',
      '',
    ].join('\n'),
  );
}
