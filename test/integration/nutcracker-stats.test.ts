// nutcracker's stats JSON on real processes (dist/, built by `npm test`): the same traffic (10 SET,
// 10 GET, MGET, DEL, UNLINK and TOUCH over keys on both servers, each split in two) through a real
// nutcracker and through `slotproxy nutcracker -s -a -i` over the same two nodes; the JSON's field
// names are nutcracker's (top level, pool, servers keyed by name or host:port) and what the traffic
// adds to every pool and server counter (requests, request and response bytes included) equals its.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Redis from 'ioredis';
import { freePorts } from '../../cmd/sandbox/ports';
import { sendCommand } from '../../cmd/sandbox/resp-client';
import { ProxyProcess } from '../helpers/cli';
import { eventually } from '../helpers/eventually';
import { useNutcrackerEnv, waitForPing } from '../helpers/nutcracker-env';

type Json = Record<string, unknown>;

const env = useNutcrackerEnv('slotproxy-nc-stats-');

function poolYaml(listenPort: number): string {
  const [a, b] = env.nodes().addresses;
  return ['alpha:', `  listen: 127.0.0.1:${listenPort}`, '  hash: md5', '  distribution: ketama', '  redis: true', '  servers:', `   - ${a}:1 first`, `   - ${b}:1`, ''].join('\n');
}

/** Everything the stats port writes before it closes. */
function readStats(port: number): Promise<Json> {
  return new Promise((resolve, reject) => {
    let text = '';
    net
      .connect(port, '127.0.0.1')
      .on('data', (d: Buffer) => (text += d.toString()))
      .on('end', () => resolve(JSON.parse(text) as Json))
      .on('error', reject);
  });
}

/**
 * 10 SET, 10 GET, then MGET, TOUCH, DEL and UNLINK over `pair` (a key of each node) and one key
 * that is not there, on one connection. No split MSET: nutcracker 0.5.0 counts the value of each of
 * its keys but the last twice in request_bytes (redis_copy_bulk adds it once itself and once
 * through msg_append), a miscount slotproxy does not copy. No EXISTS: nutcracker sends it whole.
 */
async function traffic(port: number, pair: [string, string]): Promise<void> {
  const c = new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 5000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null });
  env.keep(c);
  for (let i = 0; i < 10; i++) expect(await c.set(`k${i}`, `v${i}`)).toBe('OK');
  for (let i = 0; i < 10; i++) expect(await c.get(`k${i}`)).toBe(`v${i}`);
  expect(await c.mget(...pair)).toEqual(pair);
  expect(await c.touch(...pair)).toBe(2);
  expect(await c.del(pair[0], pair[1])).toBe(2);
  expect(await c.unlink(pair[0], pair[1])).toBe(0);
  // Put back for the other proxy's turn.
  for (const k of pair) expect(await c.set(k, k)).toBe('OK');
  c.disconnect();
}

/** Writes m0..m49 (value: the key) through `port`, then returns one stored on each node (asked of the nodes themselves). */
async function keysOnEachNode(port: number): Promise<[string, string]> {
  for (let i = 0; i < 50; i++) await sendCommand(port, ['SET', `m${i}`, `m${i}`]);
  const found: string[] = [];
  for (const node of env.nodes().addresses.map((addr) => Number(addr.split(':')[1]))) {
    for (let i = 0; i < 50; i++) {
      if ((await sendCommand(node, ['EXISTS', `m${i}`])) === 1) {
        found.push(`m${i}`);
        break;
      }
    }
  }
  if (found.length !== 2) throw new Error(`m0..m49 are not on both nodes: ${found.join(' ')} ${env.nodes().addresses.join(' ')} ${JSON.stringify(await Promise.all(env.nodes().addresses.map((a) => sendCommand(Number(a.split(':')[1]), ['DBSIZE']))))}`);
  return [found[0], found[1]];
}

function serverKeys(pool: Json): string[] {
  return Object.keys(pool).filter((k) => typeof pool[k] === 'object');
}

test('the same traffic gives the same stats JSON fields and adds the same to every pool and server counter (bytes included) as in nutcracker', async () => {
  const [ncPort, ncStats, spPort, spStats] = await freePorts(4);
  const ncFile = path.join(env.dir(), 'nc.yml');
  const spFile = path.join(env.dir(), 'sp.yml');
  fs.writeFileSync(ncFile, poolYaml(ncPort));
  fs.writeFileSync(spFile, poolYaml(spPort));
  await env.startNutcracker(['-c', ncFile, '-i', '100'], [ncPort], ncStats);
  const sp = ProxyProcess.run(['nutcracker', '-c', spFile, '-s', String(spStats), '-a', '127.0.0.1', '-i', '100', '-o', path.join(env.dir(), 'sp.log')]);
  await waitForPing(spPort, () => sp.running, () => sp.log, 30_000);

  // The counts before the traffic (the PINGs and these SETs) are subtracted below.
  const pair = await keysOnEachNode(ncPort);
  await new Promise((r) => setTimeout(r, 300));
  const [ncBefore, spBefore] = await Promise.all([readStats(ncStats), readStats(spStats)]);
  expect(spBefore.service).toBe('nutcracker');

  await traffic(ncPort, pair);
  await traffic(spPort, pair);
  await new Promise((r) => setTimeout(r, 400));
  const [ncAfter, spAfter] = await Promise.all([readStats(ncStats), readStats(spStats)]);

  // Field names: the same sets (and order) at the top, in the pool, in each server.
  expect(Object.keys(spAfter)).toEqual(Object.keys(ncAfter));
  const ncPool = ncAfter.alpha as Json;
  const spPool = spAfter.alpha as Json;
  expect(Object.keys(spPool)).toEqual(Object.keys(ncPool));
  const servers = serverKeys(ncPool);
  expect(servers).toEqual(['first', env.nodes().addresses[1]]);
  expect(serverKeys(spPool)).toEqual(servers);
  for (const s of servers) expect(Object.keys(spPool[s] as Json)).toEqual(Object.keys(ncPool[s] as Json));

  // What the traffic added to every counter, the same in both; server_connections is not a count.
  const added = (after: Json, before: Json, path: string[]): number => {
    const at = (j: Json): number => path.reduce((o: Json, k) => o[k] as Json, j.alpha as Json) as unknown as number;
    return at(after) - at(before);
  };
  const compared: string[] = [];
  for (const field of Object.keys(ncPool).filter((k) => typeof ncPool[k] === 'number')) compared.push(field);
  for (const s of servers) for (const field of Object.keys(ncPool[s] as Json)) if (field !== 'server_connections') compared.push(`${s}.${field}`);
  const differences = compared.flatMap((name) => {
    const path = name.split(/\.(?=[a-z_]+$)/);
    const theirs = added(ncAfter, ncBefore, path);
    const ours = added(spAfter, spBefore, path);
    return ours === theirs ? [] : [`${name}: nutcracker ${theirs}, slotproxy ${ours}`];
  });
  // Connections: the same but for the back-end ones. nutcracker keeps server_connections (default
  // 1) per server; slotproxy opens up to backend.connectionsPerNode per server as clients need them.
  const opened = (after: Json, before: Json): number => servers.reduce((n, s) => n + added(after, before, [s, 'server_connections']), 0);
  for (const field of ['total_connections', 'curr_connections']) {
    const theirs = (ncAfter[field] as number) - (ncBefore[field] as number) - opened(ncAfter, ncBefore);
    const ours = (spAfter[field] as number) - (spBefore[field] as number) - opened(spAfter, spBefore);
    if (ours !== theirs) differences.push(`${field} (less the servers' connections opened): nutcracker ${theirs}, slotproxy ${ours}`);
  }
  expect(differences).toEqual([]);
  // 10 SET + 10 GET + MGET, TOUCH, DEL, UNLINK as two fragments each, one per server + 2 SET.
  expect(servers.reduce((n, s) => n + added(spAfter, spBefore, [s, 'requests']), 0)).toBe(30);
  for (const s of servers) expect(added(spAfter, spBefore, [s, 'request_bytes'])).toBeGreaterThan(100);
  // One client connection opened and closed by each: one client_eof.
  expect(added(spAfter, spBefore, ['client_eof'])).toBe(1);
  // nutcracker 0.5.0 never counts fragments; neither does slotproxy.
  expect(spPool.fragments).toBe(ncPool.fragments);
  for (const s of servers) expect((spPool[s] as Json).server_connections).toBeGreaterThanOrEqual(1);

  sp.kill('SIGTERM');
  expect(await sp.exitCode()).toBe(0);
}, 60_000);

test('without -s/-a no stats port is opened (-i alone changes nothing)', async () => {
  const [listen] = await freePorts(1);
  const file = path.join(env.dir(), 'plain.yml');
  fs.writeFileSync(file, poolYaml(listen));
  const sp = ProxyProcess.run(['nutcracker', '-c', file, '-i', '100']);
  await waitForPing(listen, () => sp.running, () => sp.log, 30_000);
  for (let i = 0; i < 100 && !sp.out.includes('pool alpha'); i++) await new Promise((r) => setTimeout(r, 20));
  expect(sp.out).not.toContain('nutcracker stats at');
  expect(sp.log).not.toContain('warning');
  sp.kill('SIGTERM');
  expect(await sp.exitCode()).toBe(0);
}, 60_000);

test('--workers 2 with a nutcracker.yml: every worker serves the pool; the stats port (the primary\'s) counts both workers\' traffic as one', async () => {
  const [listen, statsPort] = await freePorts(2);
  const file = path.join(env.dir(), 'workers.yml');
  fs.writeFileSync(file, poolYaml(listen));
  const sp = ProxyProcess.run(['nutcracker', '-c', file, '--workers', '2', '-s', String(statsPort), '-a', '127.0.0.1', '-i', '100']);
  for (let i = 0; i < 1500 && !sp.out.includes('nutcracker stats at'); i++) {
    if (!sp.running) throw new Error(`exited: ${sp.log}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(sp.out).toBe(`nutcracker stats at 127.0.0.1:${statsPort}\n`);
  // Both workers said they serve (each logs it; its log is written asynchronously, so it may come
  // after the primary's line on stdout).
  await sp.waitForLog(/slotproxy is listening/, 10_000, 2);
  expect(sp.log.match(/slotproxy is listening/g)).toHaveLength(2);
  const pool = (j: Json): Json => j.alpha as Json;
  const requests = (j: Json): number => serverKeys(pool(j)).reduce((n, s) => n + ((pool(j)[s] as Json).requests as number), 0);
  const connections = (j: Json): number => pool(j).client_connections as number;
  // Nothing has been sent yet: every count here is the one before the traffic.
  const before = await readStats(statsPort);
  // Six connections, handed to the workers in turn, five SETs each.
  const clients = Array.from({ length: 6 }, () => env.keep(new Redis({ port: listen, maxRetriesPerRequest: 0, commandTimeout: 5000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null })));
  await Promise.all(clients.map(async (c, i) => {
    for (let j = 0; j < 5; j++) expect(await c.set(`w${i}:${j}`, 'x')).toBe('OK');
  }));
  // The JSON is rebuilt every -i, from the workers that answer within a second: the first one
  // holding all 30 SETs was built after them, from both workers (each served some).
  const built = (ready: (j: Json) => boolean): Promise<Json> => eventually(() => readStats(statsPort), ready, 15_000);
  const during = await built((j) => requests(j) - requests(before) >= 30);
  for (const c of clients) c.disconnect();
  // Once both workers have seen every client go (and the JSON says so, from both).
  const after = await built((j) => connections(j) === connections(before) && requests(j) - requests(before) >= 30);
  expect(requests(after) - requests(before)).toBe(30);
  expect(connections(during) - connections(before)).toBe(6);
  expect((pool(after).client_eof as number) - (pool(before).client_eof as number)).toBe(6);
  expect(Object.keys(after)).toEqual(['service', 'source', 'version', 'uptime', 'timestamp', 'total_connections', 'curr_connections', 'alpha']);
  sp.kill('SIGTERM');
  // The log beside the code: what the primary said if it did not exit cleanly.
  expect({ code: await sp.exitCode(), log: sp.log }).toEqual({ code: 0, log: expect.any(String) });
}, 60_000);
