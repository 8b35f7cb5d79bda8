// A ring server that is down (no Sentinel), served by slotproxy and by a real nutcracker side by
// side over the same two redis-servers: requests for it are answered at once with the OS's reason
// (no reconnect backoff, no retry), the other server's keys work, and the first request after the
// server is back reaches it. With auto_eject_hosts, both eject the server after the same number of
// failed requests, place its keys on the same live server, try it again after server_retry_timeout
// and take it back once it is up.
import Redis from 'ioredis';
import { freePorts } from '../../cmd/sandbox/ports';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Ring } from '../../sharding/ring';
import { useNutcrackerEnv, waitForPing } from '../helpers/nutcracker-env';
import { nutcrackerYaml } from './ring-nutcracker';

const env = useNutcrackerEnv('slotproxy-ring-down-');
const proxies: ProxyServer[] = [];

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close(200)));
});

const HASH = 'fnv1a_64';
/** Slower than any refused connection on loopback, even on a loaded machine; below the 1-2 s of a reconnect backoff. */
const AT_ONCE_MS = 500;

function client(port: number): Redis {
  return env.keep(new Redis({ port, maxRetriesPerRequest: 0, commandTimeout: 5000, disableClientInfo: true, enableReadyCheck: false, retryStrategy: () => null }));
}

interface Side {
  name: string;
  c: Redis;
}

/** nutcracker and slotproxy over the env's two nodes named up and down, auto_eject as given. */
async function bothProxies(autoEject?: { failureLimit: number; retryTimeoutMs: number }): Promise<{ sides: Side[]; ring: Ring }> {
  const [ncPort, ncStats] = await freePorts(2);
  const [up, down] = env.nodes().addresses;
  const servers = [`${up}:1 up`, `${down}:1 down`];
  const pool = { hash: HASH, servers, autoEject };
  await env.startNutcracker(['-c', env.write(`nc-${ncPort}.yml`, nutcrackerYaml(pool, `127.0.0.1:${ncPort}`))], [ncPort], ncStats);
  const nodes = [
    { name: 'up', addr: up, weight: 1 },
    { name: 'down', addr: down, weight: 1 },
  ];
  const eject = autoEject === undefined ? {} : { autoEjectHosts: true, serverFailureLimit: autoEject.failureLimit, serverRetryTimeoutMs: autoEject.retryTimeoutMs };
  const sp = await ProxyServer.start(parseConfig({ listen: '127.0.0.1:0', mode: 'ring', ring: { hash: HASH, hashTag: '{}', nodes, ...eject }, log: { level: 'silent' } }));
  proxies.push(sp);
  await waitForPing(sp.address.port, () => true, () => 'slotproxy');
  const ring = new Ring({ hash: HASH, hashTag: '{}', nodes });
  return { sides: [{ name: 'nutcracker', c: client(ncPort) }, { name: 'slotproxy', c: client(sp.address.port) }], ring };
}

/** The first `n` keys `prefix:<i>` the full ring places on node `index`. */
function keysOn(ring: Ring, index: number, prefix: string, n: number): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < n; i++) if (ring.indexOf(Buffer.from(`${prefix}:${i}`)) === index) keys.push(`${prefix}:${i}`);
  return keys;
}

/** `fn`'s outcome (the reply, or `error: <message>`) and how long it took. */
async function timed(fn: () => Promise<unknown>): Promise<{ answer: string; ms: number }> {
  const t0 = performance.now();
  const answer = await fn().then((v) => String(v), (err: Error) => `error: ${err.message}`);
  return { answer, ms: performance.now() - t0 };
}

async function restartDown(): Promise<void> {
  const down = env.nodes().nodes[1];
  if (!down.running) await down.restart();
  await waitForPing(down.port, () => true, () => 'the restarted node');
}

afterEach(async () => {
  await restartDown();
}, 30_000);

test('a down server: its keys get the OS reason at once, one by one and pipelined, as from nutcracker; the first request after it is back succeeds', async () => {
  const { sides, ring } = await bothProxies();
  const onDown = keysOn(ring, 1, 'dn', 20);
  const onUp = keysOn(ring, 0, 'up', 5);
  for (const { c } of sides) for (const k of [...onDown, ...onUp]) await c.set(k, 'v');
  const down = env.nodes().nodes[1];
  await down.stop();
  for (const { name, c } of sides) {
    // One at a time: every request is a connection attempt, refused within a round trip.
    for (const k of onDown) {
      const { answer, ms } = await timed(() => c.get(k));
      expect({ name, answer }).toEqual({ name, answer: name === 'nutcracker' ? 'error: ERR Connection refused' : `error: ERR slotproxy: node ${down.address} unreachable (Connection refused)` });
      expect(ms).toBeLessThan(AT_ONCE_MS);
    }
    for (const k of onUp) expect(await c.get(k)).toBe('v');
    // 500 at once: they share the attempts under way and fail with them.
    const t0 = performance.now();
    const p = c.pipeline();
    for (let i = 0; i < 500; i++) p.get(onDown[i % onDown.length]);
    const results = (await p.exec()) ?? [];
    expect(results.filter(([err]) => err !== null)).toHaveLength(500);
    expect(performance.now() - t0).toBeLessThan(1000);
  }
  await restartDown();
  // The restarted node is empty: the first request after it is back is a write, and it lands.
  for (const { name, c } of sides) {
    const { answer } = await timed(() => c.set(onDown[0], `back-${name}`));
    expect({ name, answer }).toEqual({ name, answer: 'OK' });
    expect(await down.command('GET', onDown[0])).toBe(`back-${name}`);
  }
}, 60_000);

/** What sequential SETs of `key` get until one succeeds (at most `max`): `ok`, or the error. */
async function untilServed(c: Redis, key: string, max = 20): Promise<string[]> {
  const seen: string[] = [];
  while (seen.length < max) {
    const answer = await c.set(key, 'x').then(() => 'ok', (err: Error) => (/Connection refused/.test(err.message) ? 'refused' : err.message));
    seen.push(answer);
    if (answer === 'ok') break;
  }
  return seen;
}

test('auto_eject_hosts beside nutcracker: ejected after server_failure_limit failures, keys re-placed, tried again after server_retry_timeout, taken back when up', async () => {
  const autoEject = { failureLimit: 3, retryTimeoutMs: 1500 };
  const { sides, ring } = await bothProxies(autoEject);
  const [key] = keysOn(ring, 1, 'ej', 1);
  // Connections to both servers open in each proxy.
  for (const { c } of sides) for (const k of [key, ...keysOn(ring, 0, 'ej-up', 3)]) await c.set(k, 'v');
  const [upNode, down] = env.nodes().nodes;
  await down.stop();
  // Each proxy's connection to the server is lost (one failure), then each request is one more.
  const first = await Promise.all(sides.map(async ({ c }) => untilServed(c, key)));
  expect(first[1]).toEqual(first[0]);
  expect(first[0].at(-1)).toBe('ok');
  // Served by the live server, where both place it.
  expect(await upNode.command('GET', key)).toBe('x');
  // Within the retry timeout it stays out: no error.
  for (const { c } of sides) expect(await untilServed(c, key)).toEqual(['ok']);

  // After the retry timeout, still down: it is tried again and ejected again, alike.
  await new Promise((r) => setTimeout(r, autoEject.retryTimeoutMs + 200));
  const again = await Promise.all(sides.map(async ({ c }) => untilServed(c, key)));
  expect(again[1]).toEqual(again[0]);
  expect(again[0].at(-1)).toBe('ok');

  // Back up: after the retry timeout, the next request for the key goes to it in both.
  await restartDown();
  await new Promise((r) => setTimeout(r, autoEject.retryTimeoutMs + 200));
  for (const { name, c } of sides) {
    expect(await c.set(key, `back-${name}`)).toBe('OK');
    expect({ name, value: await down.command('GET', key) }).toEqual({ name, value: `back-${name}` });
  }
}, 60_000);
