// Ring mode over real standalone redis-servers: routing, CROSSSLOT, fan-outs, a node going down
// and coming back, PROXY MIGRATION STATUS, and the CLI's `slot -c` and `import-twemproxy`.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Redis from 'ioredis';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { Ring } from '../../sharding/ring';

const BIN = path.resolve(__dirname, '..', '..', 'dist', 'cmd', 'slotproxy.js');
const NAMES = ['a', 'b', 'c'];

let nodes: StandaloneNodes | undefined;
let proxy: ProxyServer | undefined;
let client: Redis | undefined;
let ring: Ring;
let dir: string;

function run(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  if (!fs.existsSync(BIN)) throw new Error(`${BIN} is missing: run \`npm run build\` (npm test does)`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-ring-'));
  nodes = await StandaloneNodes.start(3);
  const ringNodes = nodes.addresses.map((addr, i) => ({ name: NAMES[i], addr, weight: 1 }));
  ring = new Ring({ hash: 'md5', hashTag: '{}', nodes: ringNodes });
  proxy = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: 'md5', nodes: ringNodes }, log: { level: 'silent' } }));
  client = new Redis({ host: '127.0.0.1', port: proxy.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
}, 60_000);

afterAll(async () => {
  client?.disconnect();
  await proxy?.close(200);
  await nodes?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, 30_000);

const c = (): Redis => client!;

test('each key lands on its ring owner, and only there', async () => {
  for (let i = 0; i < 300; i++) await c().set(`k:${i}`, String(i));
  const owners = [0, 0, 0];
  for (let i = 0; i < 300; i++) owners[ring.indexOf(Buffer.from(`k:${i}`))]++;
  const sizes = await Promise.all(nodes!.nodes.map(async (n) => Number(await n.command('DBSIZE'))));
  expect(sizes).toEqual(owners);
  expect(await c().dbsize()).toBe(300);
  const idx = ring.indexOf(Buffer.from('k:7'));
  expect(await nodes!.nodes[idx].command('GET', 'k:7')).toBe('7');
});

test('hash tags keep keys together; keys on different nodes get CROSSSLOT', async () => {
  await c().mset('{u1}:a', '1', '{u1}:b', '2');
  expect(await c().mget('{u1}:a', '{u1}:b')).toEqual(['1', '2']);
  // Two plain keys on different nodes.
  let other = 0;
  while (ring.indexOf(Buffer.from(`x${other}`)) === ring.indexOf(Buffer.from('x0'))) other++;
  await expect(c().mget('x0', `x${other}`)).rejects.toThrow("CROSSSLOT Keys in request don't hash to the same slot");
});

test('INFO sums the keyspace of every node', async () => {
  const info = await c().info('keyspace');
  const m = /db0:keys=(\d+)/.exec(info);
  expect(Number(m?.[1])).toBe(await c().dbsize());
});

test('scripts, transactions, blocking commands and Pub/Sub follow the cluster rules, with node for slot', async () => {
  let other = 1;
  while (ring.indexOf(Buffer.from(`s${other}`)) === ring.indexOf(Buffer.from('s0'))) other++;
  expect(await c().eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, '{t}a', 'v')).toBe('OK');
  await expect(c().eval("return 1", 2, 's0', `s${other}`)).rejects.toThrow('CROSSSLOT');
  expect(await c().multi().set('{t}a', '1').incr('{t}a').exec()).toEqual([[null, 'OK'], [null, 2]]);
  const blocked = new Redis({ host: '127.0.0.1', port: proxy!.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  const sub = new Redis({ host: '127.0.0.1', port: proxy!.address.port, maxRetriesPerRequest: 0, disableClientInfo: true });
  try {
    const popped = blocked.blpop('{q}list', 5);
    // Parked on its node (polled, not slept); a push through another connection wakes it.
    const owner = nodes!.nodes[ring.indexOf(Buffer.from('{q}list'))];
    const deadline = Date.now() + 5000;
    while ((await owner.info('clients')).get('blocked_clients') !== '1') {
      if (Date.now() > deadline) throw new Error('BLPOP never blocked on its node');
      await new Promise((r) => setTimeout(r, 10));
    }
    await c().rpush('{q}list', 'x');
    expect(await popped).toEqual(['{q}list', 'x']);
    const got = new Promise<string>((resolve) => sub.on('message', (_ch: string, m: string) => resolve(m)));
    await sub.subscribe('news');
    expect(await c().publish('news', 'hello')).toBe(1);
    expect(await got).toBe('hello');
  } finally {
    blocked.disconnect();
    sub.disconnect();
  }
});

test('SCAN walks every node', async () => {
  const seen = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await c().scan(cursor, 'MATCH', 'k:*', 'COUNT', 100);
    keys.forEach((k) => seen.add(k));
    cursor = next;
  } while (cursor !== '0');
  expect(seen.size).toBe(300);
});

test('a node that is down: its keys get an error naming it, the others work, and it is used again when back', async () => {
  const down = nodes!.nodes[1];
  const keyOn = (idx: number): string => {
    for (let i = 0; ; i++) if (ring.indexOf(Buffer.from(`d${i}`)) === idx) return `d${i}`;
  };
  await c().set(keyOn(1), 'before');
  await down.stop();
  try {
    // The OS's reason, as twemproxy words it, in slotproxy's form.
    await expect(c().get(keyOn(1))).rejects.toThrow(`ERR slotproxy: node ${down.address} unreachable (Connection refused)`);
    expect(await c().set(keyOn(0), 'fine')).toBe('OK');
    expect(await c().get(keyOn(2))).toBeNull();
  } finally {
    await down.restart();
  }
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      expect(await c().set(keyOn(1), 'after')).toBe('OK');
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  expect(await down.command('GET', keyOn(1))).toBe('after');
}, 30_000);

test('PROXY MIGRATION STATUS reports the ring; PHASE needs a migration', async () => {
  const status = String(await c().call('PROXY', 'MIGRATION', 'STATUS'));
  expect(status).toContain('phase:none');
  expect(status).toContain(`a=${nodes!.addresses[0]}`);
  await expect(c().call('PROXY', 'MIGRATION', 'PHASE', 'read-new')).rejects.toThrow('no migration is configured');
  await expect(c().call('PROXY', 'NOPE')).rejects.toThrow('ERR syntax');
});

test('slotproxy slot KEY -c FILE prints the ring owner, in both rings during a migration', async () => {
  const [a, b, cc] = nodes!.addresses;
  const file = path.join(dir, 'm.yaml');
  fs.writeFileSync(file, [
    'mode: ring', 'ring:', '  nodes:', `    - { name: a, addr: "${a}" }`, `    - { name: b, addr: "${b}" }`,
    'migration:', '  phase: double-write', '  to:', '    nodes:', `      - { name: a, addr: "${a}" }`, `      - { name: b, addr: "${b}" }`, `      - { name: c, addr: "${cc}" }`, '',
  ].join('\n'));
  const r = await run(['slot', 'k:1', 'k:2', '-c', file]);
  expect(r.code).toBe(0);
  const ringA = new Ring({ hash: 'md5', hashTag: '{}', nodes: [{ name: 'a', addr: a, weight: 1 }, { name: 'b', addr: b, weight: 1 }] });
  const ringB = new Ring({ hash: 'md5', hashTag: '{}', nodes: [{ name: 'a', addr: a, weight: 1 }, { name: 'b', addr: b, weight: 1 }, { name: 'c', addr: cc, weight: 1 }] });
  const lines = r.stdout.trim().split('\n');
  ['k:1', 'k:2'].forEach((k, i) => {
    const na = ringA.nodeOf(Buffer.from(k));
    const nb = ringB.nodeOf(Buffer.from(k));
    expect(lines[i]).toContain(`node=${na.name}(${na.addr})`);
    expect(lines[i]).toContain(`new=${nb.name}(${nb.addr})`);
  });
});

test('slotproxy import-twemproxy converts every pool into a valid config', async () => {
  const [a, b] = nodes!.addresses;
  const file = path.join(dir, 'nutcracker.yml');
  fs.writeFileSync(file, [
    'alpha:', '  listen: 127.0.0.1:22121', '  hash: fnv1a_64', '  distribution: ketama', '  hash_tag: "{}"', '  redis: true', '  auto_eject_hosts: true',
    '  servers:', `   - ${a}:1 one`, `   - ${b}:2 two`,
    'beta:', '  listen: 127.0.0.1:22122', '  hash: murmur', '  redis: true', '  servers:', `   - ${a}:1`, '',
  ].join('\n'));
  const out = path.join(dir, 'converted');
  const r = await run(['import-twemproxy', file, '-o', out]);
  expect(r.code).toBe(0);
  expect(fs.readdirSync(out).sort()).toEqual(['alpha.yaml', 'beta.yaml']);
  const check = await run(['check-config', path.join(out, 'alpha.yaml')]);
  expect(check.code).toBe(0);
  const text = fs.readFileSync(path.join(out, 'alpha.yaml'), 'utf8');
  expect(text).toContain('autoEjectHosts: true');
  const beta = fs.readFileSync(path.join(out, 'beta.yaml'), 'utf8');
  expect(beta).toMatch(/hashTag: ""/);
  const printed = await run(['import-twemproxy', file]);
  expect(printed.stdout).toContain('hash: murmur');
  const bad = await run(['import-twemproxy', path.join(dir, 'nope.yml')]);
  expect(bad.code).not.toBe(0);
});
