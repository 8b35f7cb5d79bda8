// How a ring follows Sentinel masters, case by case, against real redis-servers and a scripted
// sentinel (test/helpers/fake-sentinel.ts) that moves masters exactly when a test says: a demoted
// master's READONLY, ROLE on connect, no failover within the wait, a sentinel behind the others,
// every sentinel down at start, sentinel AUTH, and twemproxy's Sentinel patch file served as it is.
// The failovers of real sentinels are in sentinel-failover.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { parseConfig } from '../../config/load';
import { loadServedFile } from '../../config/served-file';
import { ProxyServer } from '../../proxy/server/server';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { freePort } from '../../cmd/sandbox/ports';
import { FakeSentinel } from '../helpers/fake-sentinel';
import { Ring } from '../../sharding/ring';

let nodes: StandaloneNodes | undefined;
const fakes: FakeSentinel[] = [];
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  nodes = await StandaloneNodes.start(2);
  // A replica syncs at once (Redis 7 waits 5 s for more replicas by default).
  for (const n of nodes.nodes) await n.command('CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  for (const p of proxies) await p.close(200);
  for (const f of fakes) await f.stop();
  await nodes?.stop();
}, 30_000);

function node(i: number): RedisNode {
  if (nodes === undefined) throw new Error('the nodes did not start');
  return nodes.nodes[i];
}

async function fake(password?: string): Promise<FakeSentinel> {
  const f = await FakeSentinel.start({ password });
  fakes.push(f);
  return f;
}

async function start(ring: Record<string, unknown>, sentinels: string[]): Promise<ProxyServer> {
  const p = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { sentinels, ...ring }, log: { level: 'silent' } }));
  proxies.push(p);
  return p;
}

function connect(p: ProxyServer): Redis {
  // No ready check: its INFO fans out to every node, and a test may have one down on purpose.
  const c = new Redis({ port: p.address.port, maxRetriesPerRequest: 0, disableClientInfo: true, enableReadyCheck: false });
  clients.push(c);
  return c;
}

function readonlyErrors(info: Map<string, string>): number {
  const m = /count=(\d+)/.exec(info.get('errorstat_READONLY') ?? '');
  return m === null ? 0 : Number(m[1]);
}

/** `replica` replicates `master` now (and `master` is a master). */
async function makeReplica(replica: RedisNode, master: RedisNode): Promise<void> {
  await master.command('REPLICAOF', 'NO', 'ONE');
  await replica.command('REPLICAOF', master.host, master.port);
  for (const deadline = Date.now() + 10_000; ; ) {
    const role = await replica.command('ROLE');
    if (Array.isArray(role) && role[3] === 'connected') return;
    if (Date.now() > deadline) throw new Error(`${replica.address} did not sync with ${master.address}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

afterEach(async () => {
  // A test's proxies and sentinels go with it: a proxy left running (one still double-writing,
  // say, with change feeds on both nodes) would copy the next test's keys behind its back.
  await Promise.all(clients.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
  for (const p of proxies.splice(0)) await p.close(200);
  for (const f of fakes.splice(0)) await f.stop();
  // Every test starts with two masters.
  await node(0).command('REPLICAOF', 'NO', 'ONE');
  await node(1).command('REPLICAOF', 'NO', 'ONE');
  await node(0).command('FLUSHALL');
  await node(1).command('FLUSHALL');
  await node(0).command('CONFIG', 'RESETSTAT');
  await node(1).command('CONFIG', 'RESETSTAT');
});

test('a master demoted behind the proxy\'s back answers READONLY: the sentinels are asked, and the writes go to the new master, none refused', async () => {
  const [a, b] = [node(0), node(1)];
  await makeReplica(b, a);
  const s = await fake('sekret');
  s.masters.set('m1', { address: a.address, epoch: 1 });
  const p = await start({ nodes: [{ master: 'm1' }], sentinel: { password: 'sekret', failoverWaitMs: 5000 } }, [s.address]);
  const c = connect(p);
  expect(await c.set('before', '1')).toBe('OK');
  expect(await a.command('GET', 'before')).toBe('1');

  // The failover as Sentinel does it, with no +switch-master reaching the proxy.
  await makeReplica(a, b);
  s.masters.set('m1', { address: b.address, epoch: 2 });
  const asked = s.asked('m1');
  const writes = await Promise.all(Array.from({ length: 20 }, (_, i) => c.set(`after:${i}`, String(i))));
  expect(writes).toEqual(Array(20).fill('OK'));
  for (let i = 0; i < 20; i++) expect(await b.command('GET', `after:${i}`)).toBe(String(i));
  expect(s.asked('m1')).toBeGreaterThan(asked);
  // a refused what reached it before the proxy learnt the news; the proxy sent those again to b.
  expect(readonlyErrors(await a.info('errorstats'))).toBeGreaterThan(0);
  expect(s.commands).toContain('AUTH');
});

test('a node that reports ROLE replica when the proxy connects sends it to the sentinels', async () => {
  const [a, b] = [node(0), node(1)];
  await makeReplica(b, a);
  const s = await fake();
  // The sentinel is behind: it names the replica, then learns better without telling anyone.
  s.masters.set('m1', { address: b.address, epoch: 1 });
  const asked = s.asked('m1');
  const p = await start({ nodes: [{ master: 'm1' }] }, [s.address]);
  s.masters.set('m1', { address: a.address, epoch: 2 });
  // The proxy's first connection to b (its start) saw ROLE slave and asked again.
  for (const deadline = Date.now() + 5000; s.asked('m1') < asked + 2; ) {
    if (Date.now() > deadline) throw new Error('the sentinel was not asked again');
    await new Promise((r) => setTimeout(r, 20));
  }
  const c = connect(p);
  expect(await c.set('k', 'v')).toBe('OK');
  expect(await a.command('GET', 'k')).toBe('v');
});

test('a master down and no failover: requests wait ring.sentinel.failoverWaitMs, then a clear error; a failover during the wait serves them', async () => {
  const a = node(0);
  const dead = `127.0.0.1:${await freePort()}`;
  const s = await fake();
  s.masters.set('m2', { address: dead, epoch: 1 });
  const p = await start({ nodes: [{ master: 'm2' }], sentinel: { failoverWaitMs: 600 } }, [s.address]);
  const c = connect(p);
  const t0 = Date.now();
  const err = await c.set('k', 'v').then(() => null, (e: Error) => e.message);
  const waited = Date.now() - t0;
  expect(err).toMatch(new RegExp(`^ERR slotproxy: ring server m2 at ${dead.replace(/\./g, '\\.')} failed \\(node ${dead.replace(/\./g, '\\.')} unreachable \\(Connection refused\\)\\) and Sentinel named no new master within 600 ms$`));
  expect(waited).toBeGreaterThanOrEqual(600);
  expect(waited).toBeLessThan(2000);

  const pending = c.set('k', 'v');
  await new Promise((r) => setTimeout(r, 200));
  s.masters.set('m2', { address: a.address, epoch: 2 });
  const switchedAt = Date.now();
  s.publishSwitch('m2', dead, a.address);
  expect(await pending).toBe('OK');
  // Retried as soon as the move was heard, not at the next backoff step.
  expect(Date.now() - switchedAt).toBeLessThan(200);
  expect(await a.command('GET', 'k')).toBe('v');
});

test('a sentinel behind the others (an older config epoch) is not followed, even when it is the only one answering', async () => {
  const [a, b] = [node(0), node(1)];
  const ahead = await fake();
  const behind = await fake();
  ahead.masters.set('m3', { address: a.address, epoch: 5 });
  behind.masters.set('m3', { address: b.address, epoch: 3 });
  const p = await start({ nodes: [{ master: 'm3' }], sentinel: { refreshIntervalMs: 100 } }, [behind.address, ahead.address]);
  const c = connect(p);
  expect(await c.set('k', '1')).toBe('OK');
  expect(await a.command('GET', 'k')).toBe('1');
  await ahead.stop();
  fakes.splice(fakes.indexOf(ahead), 1);
  const asked = behind.asked('m3');
  for (const deadline = Date.now() + 5000; behind.asked('m3') < asked + 3; ) {
    if (Date.now() > deadline) throw new Error('the periodic refresh did not ask');
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await c.set('k', '2')).toBe('OK');
  expect(await a.command('GET', 'k')).toBe('2');
  expect(await b.command('GET', 'k')).toBe(null);
});

test('every sentinel down at start: a node\'s configured addr is used; with none, start fails naming the master', async () => {
  const a = node(0);
  const nowhere = `127.0.0.1:${await freePort()}`;
  const p = await start({ nodes: [{ master: 'm4', addr: a.address }] }, [nowhere]);
  const c = connect(p);
  expect(await c.set('k', 'v')).toBe('OK');
  expect(await a.command('GET', 'k')).toBe('v');
  await expect(start({ nodes: [{ master: 'm4' }] }, [nowhere])).rejects.toThrow('ring.sentinels: no sentinel said where master m4 is, and the config gives no addr for it');
  // A wrong sentinel password is no answer either.
  const s = await fake('right');
  s.masters.set('m4', { address: a.address, epoch: 1 });
  await expect(start({ nodes: [{ master: 'm4' }], sentinel: { password: 'wrong' } }, [s.address])).rejects.toThrow('no sentinel said where master m4 is');
});

test("twemproxy's Sentinel patch syntax served as it is: servers named by master, the sentinels' answer over the file's address", async () => {
  const [a, b] = [node(0), node(1)];
  const s = await fake();
  s.masters.set('server1', { address: a.address, epoch: 1 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-sentinel-'));
  try {
    const file = path.join(dir, 'nutcracker.yml');
    const [host, port] = [s.address.split(':')[0], s.address.split(':')[1]];
    fs.writeFileSync(
      file,
      ['sigma:', '  listen: 127.0.0.1:0', '  hash: fnv1a_64', '  distribution: ketama', '  redis: true', '  servers:', `   - ${b.address}:1 server1`, '  sentinels:', `   - ${host}:${port}:1`, ''].join('\n'),
    );
    const [served] = loadServedFile(file, { logLevel: 'silent' });
    const p = await ProxyServer.start(served.config);
    proxies.push(p);
    const c = connect(p);
    expect(await c.set('k', 'v')).toBe('OK');
    expect(await a.command('GET', 'k')).toBe('v');
    expect(await b.command('GET', 'k')).toBe(null);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a subscriber and a blocked BLPOP follow a failover: the subscription moves to the new master, the BLPOP is served there', async () => {
  const [a, b] = [node(0), node(1)];
  await makeReplica(b, a);
  const s = await fake();
  s.masters.set('m5', { address: a.address, epoch: 1 });
  const p = await start({ nodes: [{ master: 'm5' }], sentinel: { failoverWaitMs: 5000 } }, [s.address]);
  const sub = connect(p);
  const heard: string[] = [];
  sub.on('message', (_channel: string, message: string) => heard.push(message));
  await sub.subscribe('news');
  const blocked = connect(p).blpop('q', 0);
  for (const deadline = Date.now() + 5000; (await a.info('clients')).get('blocked_clients') !== '1'; ) {
    if (Date.now() > deadline) throw new Error('BLPOP did not block on the master');
    await new Promise((r) => setTimeout(r, 20));
  }

  // The demoted master unblocks its blocked clients (instance state changed); the proxy sends the BLPOP on.
  await makeReplica(a, b);
  s.masters.set('m5', { address: b.address, epoch: 2 });
  s.publishSwitch('m5', a.address, b.address);
  const pub = connect(p);
  for (const deadline = Date.now() + 5000; (await pub.publish('news', 'hello')) !== 1; ) {
    if (Date.now() > deadline) throw new Error('the subscription did not move to the new master');
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const deadline = Date.now() + 5000; (await b.info('clients')).get('blocked_clients') !== '1'; ) {
    if (Date.now() > deadline) throw new Error('BLPOP did not block on the new master');
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await pub.lpush('q', 'x')).toBe(1);
  expect(await blocked).toEqual(['q', 'x']);
  for (const deadline = Date.now() + 2000; !heard.includes('hello'); ) {
    if (Date.now() > deadline) throw new Error('the message did not reach the subscriber');
    await new Promise((r) => setTimeout(r, 20));
  }
});

test('autoEjectHosts over Sentinel nodes: a master down is ejected (its keys on the others), and back in the ring at its new address', async () => {
  const [a, b] = [node(0), node(1)];
  const dead = `127.0.0.1:${await freePort()}`;
  const s = await fake();
  s.masters.set('m6', { address: dead, epoch: 1 });
  s.masters.set('m7', { address: a.address, epoch: 1 });
  const p = await start(
    { nodes: [{ master: 'm6' }, { master: 'm7' }], autoEjectHosts: true, serverFailureLimit: 1, serverRetryTimeoutMs: 300, sentinel: { failoverWaitMs: 100 } },
    [s.address],
  );
  const c = connect(p);
  const ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: [{ name: 'm6', addr: 'x:1', weight: 1 }, { name: 'm7', addr: 'x:2', weight: 1 }] });
  const key = Array.from({ length: 50 }, (_, i) => `ej:${i}`).find((k) => ring.nodeOf(Buffer.from(k)).name === 'm6')!;
  const until = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
    for (const deadline = Date.now() + 5000; !(await ok()); ) {
      if (Date.now() > deadline) throw new Error(what);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await until('the down master was not ejected', async () => (await c.set(key, 'on-a').catch(() => null)) === 'OK');
  expect(await a.command('GET', key)).toBe('on-a');
  s.masters.set('m6', { address: b.address, epoch: 2 });
  s.publishSwitch('m6', dead, b.address);
  await until('m6 did not come back at its new address', async () => (await c.set(key, 'on-b')) === 'OK' && (await b.command('GET', key)) === 'on-b');
});

test('a reload growing the ring onto a Sentinel master it has not met asks the sentinels first, then double-writes there', async () => {
  const [a, b] = [node(0), node(1)];
  const s = await fake();
  s.masters.set('m1', { address: a.address, epoch: 1 });
  s.masters.set('m8', { address: b.address, epoch: 1 });
  const base = { listen: '127.0.0.1:0', mode: 'ring', ring: { sentinels: [s.address], nodes: [{ master: 'm1' }] }, log: { level: 'silent' } };
  const p = await ProxyServer.start(parseConfig(base));
  proxies.push(p);
  const asked = s.asked('m8');
  p.reloadRing(parseConfig({ ...base, migration: { phase: 'double-write', to: { nodes: [{ master: 'm1' }, { master: 'm8' }] } } }));
  const grown = new Ring({ hash: 'md5', hashTag: '{}', nodes: [{ name: 'm1', addr: 'x:1', weight: 1 }, { name: 'm8', addr: 'x:2', weight: 1 }] });
  const key = Array.from({ length: 50 }, (_, i) => `grown:${i}`).find((k) => grown.nodeOf(Buffer.from(k)).name === 'm8')!;
  const c = connect(p);
  for (const deadline = Date.now() + 5000; ; ) {
    expect(await c.set(key, 'v')).toBe('OK');
    if ((await b.command('GET', key)) === 'v') break;
    if (Date.now() > deadline) throw new Error('the reloaded migration did not double-write to m8');
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await a.command('GET', key)).toBe('v');
  expect(s.asked('m8')).toBeGreaterThan(asked);
  // Sentinel settings are read at start only.
  expect(() => p.reloadRing(parseConfig({ ...base, ring: { ...base.ring, sentinel: { failoverWaitMs: 1 } } }))).toThrow('ring.sentinels and ring.sentinel take effect at start: restart the proxy for that');
});

test('ring.sentinel.readFrom replica: reads go to a healthy replica the sentinels name, to the master when the sentinels call it down', async () => {
  const [a, b] = [node(0), node(1)];
  await makeReplica(b, a);
  const s = await fake();
  s.masters.set('m9', { address: a.address, epoch: 1, replicas: [{ address: b.address }] });
  const p = await start({ nodes: [{ master: 'm9' }], sentinel: { readFrom: 'replica', replicaCheckIntervalMs: 100 } }, [s.address]);
  const c = connect(p);
  expect(await c.set('r', 'v')).toBe('OK');
  const gets = async (n: RedisNode): Promise<number> => Number(/calls=(\d+)/.exec((await n.info('commandstats')).get('cmdstat_get') ?? '')?.[1] ?? 0);
  const until = async (what: string, ok: () => Promise<boolean>): Promise<void> => {
    for (const deadline = Date.now() + 5000; !(await ok()); ) {
      if (Date.now() > deadline) throw new Error(what);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  // The first check finds the replica in sync; from then on GETs go there.
  await until('no read reached the replica', async () => (await c.get('r')) === 'v' && (await gets(b)) > 0);
  const [onA, onB] = [await gets(a), await gets(b)];
  for (let i = 0; i < 20; i++) expect(await c.get('r')).toBe('v');
  expect(await gets(b)).toBe(onB + 20);
  expect(await gets(a)).toBe(onA);
  expect(await c.info('proxy')).toMatch(/read_from:replica\r\nhealthy_replicas:1\r\n/);

  s.masters.set('m9', { address: a.address, epoch: 1, replicas: [{ address: b.address, flags: 'slave,s_down' }] });
  await until('the replica the sentinels call down was still read from', async () => (await c.info('proxy')).includes('healthy_replicas:0'));
  const before = await gets(a);
  for (let i = 0; i < 5; i++) expect(await c.get('r')).toBe('v');
  expect(await gets(a)).toBe(before + 5);
});

test('while a sentinel promotes a replica, writes for its master wait: to the new master after the switch, to the old one if the promotion is given up', async () => {
  const [a, b] = [node(0), node(1)];
  const s = await fake();
  s.masters.set('m10', { address: a.address, epoch: 1 });
  const p = await start({ nodes: [{ master: 'm10' }], sentinel: { failoverWaitMs: 5000 } }, [s.address]);
  const c = connect(p);
  expect(await c.set('k', '0')).toBe('OK');
  const promoting = (): void => s.publish('+failover-state-send-slaveof-noone', `slave ${b.address} ${b.host} ${b.port} @ m10 ${a.host} ${a.port}`);
  const heldFor = async (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  promoting();
  await heldFor(50);
  const held = c.set('k', '1');
  await heldFor(200);
  // Reads go on (another client's: this one's replies come in order); the write has not reached the old master.
  expect(await connect(p).get('k')).toBe('0');
  expect(await a.command('GET', 'k')).toBe('0');
  s.masters.set('m10', { address: b.address, epoch: 2 });
  s.publishSwitch('m10', a.address, b.address);
  expect(await held).toBe('OK');
  expect(await b.command('GET', 'k')).toBe('1');
  expect(await a.command('GET', 'k')).toBe('0');

  // Given up: held writes go where the master still is.
  promoting();
  s.publish('+failover-state-send-slaveof-noone', `slave ${a.address} ${a.host} ${a.port} @ m10 ${b.host} ${b.port}`);
  await heldFor(50);
  const again = c.set('k', '2');
  await heldFor(200);
  expect(await b.command('GET', 'k')).toBe('1');
  s.publish('-failover-abort-slave-timeout', `master m10 ${b.host} ${b.port}`);
  expect(await again).toBe('OK');
  expect(await b.command('GET', 'k')).toBe('2');
});
