// How a migration's changes reach side B is chosen before double-write (migration/carry-choice.ts):
// with `migration.carry: auto`, the replication carry where every node of side A lets the back-end
// user follow it, else the change feeds, saying which node refused and why; `replication` and
// `feeds` force either; unset is auto, and says so. A reload cannot change the carry of a migration. The question
// is asked without starting a sync (replication/probe.ts): real redis-servers, real ACL users and a
// node with PSYNC renamed, as managed services do.
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { probeReplication } from '../../proxy/replication/probe';
import { freePort } from '../../cmd/sandbox/ports';
import { nopermText } from '../helpers/server-version';

const USER = 'mover';
const PASSWORD = 'mover-pw';
let nodes: StandaloneNodes | undefined;
/** A node whose PSYNC is renamed away. */
let renamed: StandaloneNodes | undefined;
const proxies: ProxyServer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  [nodes, renamed] = await Promise.all([StandaloneNodes.start(3), StandaloneNodes.start(1, { extraArgs: ['--rename-command', 'PSYNC', ''] })]);
}, 60_000);

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(proxies.splice(0).map((p) => p.close(200)));
});

afterAll(async () => {
  await Promise.all([nodes?.stop(), renamed?.stop()]);
}, 30_000);

/** The back-end user on every node: every command and key, less `minus` on ring A's two nodes. */
async function grant(...minus: string[]): Promise<void> {
  await Promise.all(nodes!.nodes.map((n, i) => n.command('ACL', 'SETUSER', USER, 'reset', 'on', `>${PASSWORD}`, '+@all', '~*', ...(i < 2 ? minus : []))));
}

const ringNodes = (count: number): { name: string; addr: string }[] => nodes!.addresses.slice(0, count).map((addr, i) => ({ name: `n${i}`, addr }));

function config(carry?: 'feeds' | 'replication' | 'auto'): Record<string, unknown> {
  return {
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: ringNodes(2) },
    migration: { phase: 'double-write', ...(carry === undefined ? {} : { carry }), to: { nodes: ringNodes(3) } },
    backend: { username: USER, password: PASSWORD },
    log: { level: 'silent' },
  };
}

async function start(carry?: 'feeds' | 'replication' | 'auto'): Promise<Redis> {
  const proxy = await ProxyServer.start(parseConfig(config(carry)));
  proxies.push(proxy);
  const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  return c;
}

async function carryOf(c: Redis): Promise<{ carry: string; why: string }> {
  const info = String(await c.info('proxy'));
  return { carry: /migration_carry:(\S+)/.exec(info)?.[1] ?? '', why: /migration_carry_why:([^\r\n]*)/.exec(info)?.[1] ?? '' };
}

const auth = (): Buffer[] => [Buffer.from(`*3\r\n$4\r\nAUTH\r\n$${USER.length}\r\n${USER}\r\n$${PASSWORD.length}\r\n${PASSWORD}\r\n`)];

async function syncsOn(address: string): Promise<string> {
  const [host, port] = address.split(':');
  const c = new Redis({ host, port: Number(port), lazyConnect: true });
  try {
    await c.connect();
    const stats = String(await c.info('stats'));
    const persistence = String(await c.info('persistence'));
    return `${/sync_full:(\d+)/.exec(stats)?.[1]} ${/rdb_bgsave_in_progress:(\d+)/.exec(persistence)?.[1]} ${/connected_slaves:(\d+)/.exec(String(await c.info('replication')))?.[1]}`;
  } finally {
    c.disconnect();
  }
}

describe('the probe', () => {
  test('tells allowed, NOPERM and a renamed PSYNC apart without starting a sync on the node', async () => {
    await grant();
    const address = nodes!.addresses[0];
    const probe = (addr: string, handshake: Buffer[] = auth()) => probeReplication(addr, { tls: null, handshake, timeoutMs: 2000 });
    expect(await probe(address)).toEqual({ kind: 'allowed' });
    await grant('-psync');
    expect(await probe(address)).toEqual({ kind: 'refused', why: `${address} refuses PSYNC: ${nopermText('command', USER, 'psync')}` });
    await grant('-replconf');
    expect(await probe(address)).toEqual({ kind: 'refused', why: `${address} refuses REPLCONF: ${nopermText('command', USER, 'replconf')}` });
    const other = renamed!.addresses[0];
    const unknown = await probe(other, []);
    expect(unknown.kind).toBe('refused');
    expect(unknown.kind === 'refused' && unknown.why).toMatch(new RegExp(`^${other} refuses PSYNC: ERR unknown command 'PSYNC'`));
    const down = `127.0.0.1:${await freePort()}`;
    expect((await probe(down)).kind).toBe('unknown');
    // Asked four times: no full sync, no snapshot being written, no replica left behind.
    expect(await syncsOn(address)).toBe('0 0 0');
    expect(await syncsOn(other)).toBe('0 0 0');
  });
});

describe('the carry of a migration', () => {
  test('unset: auto, saying so: the replication carry where every node of A allows it', async () => {
    await grant();
    const c = await start();
    expect(await carryOf(c)).toEqual({ carry: 'replication', why: 'auto (migration.carry unset): every node of side A can be followed as a replica' });
  });

  test('unset, a user without +psync: the change feeds, as auto, naming the node and the refusal', async () => {
    await grant('-psync');
    const c = await start();
    expect(await carryOf(c)).toEqual({ carry: 'feeds', why: `auto (migration.carry unset): ${nodes!.addresses[0]} refuses PSYNC: ${nopermText('command', USER, 'psync')}; the change feeds carry instead (migration.carry: feeds)` });
  });

  test('auto: the replication carry where every node of A allows it', async () => {
    await grant();
    const c = await start('auto');
    expect(await carryOf(c)).toEqual({ carry: 'replication', why: 'every node of side A can be followed as a replica' });
  });

  test('auto, a user without +psync: the change feeds, naming the node and the refusal', async () => {
    await grant('-psync');
    const c = await start('auto');
    const { carry, why } = await carryOf(c);
    expect(carry).toBe('feeds');
    expect(why).toBe(`${nodes!.addresses[0]} refuses PSYNC: ${nopermText('command', USER, 'psync')}; the change feeds carry instead (migration.carry: feeds)`);
    // Writes still reach B, by the feeds.
    await c.set('carried', 'v');
    expect(await c.get('carried')).toBe('v');
  });

  test('forced replication, a user without +psync: the proxy does not start, saying why', async () => {
    await grant('-psync');
    await expect(start('replication')).rejects.toThrow(`migration.carry: replication refused: ${nodes!.addresses[0]} refuses PSYNC: `);
  });

  test('forced feeds: the change feeds even where replication is allowed', async () => {
    await grant();
    const c = await start('feeds');
    expect(await carryOf(c)).toEqual({ carry: 'feeds', why: 'migration.carry: feeds' });
  });
});

test('a reload naming the other carry of a migration under way is refused, and the migration goes on', async () => {
  await grant();
  const proxy = await ProxyServer.start(parseConfig(config('auto')));
  proxies.push(proxy);
  const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  clients.push(c);
  expect(() => proxy.reloadRing(parseConfig(config('feeds')))).toThrow(
    'migration.phase: migration.carry feeds: the migration under way is carried by replication (every node of side A can be followed as a replica); a carry cannot change during a migration',
  );
  expect((await carryOf(c)).carry).toBe('replication');
  proxy.reloadRing(parseConfig(config('auto')));
  expect((await carryOf(c)).carry).toBe('replication');
});
