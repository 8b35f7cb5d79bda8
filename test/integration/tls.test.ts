// SPEC section 7, security: TLS to clients (ioredis, redis-cli --tls, client certificates) and to
// the back ends (a real Redis Cluster node serving TLS only to the proxy, with client certificates
// required and an ACL user), with a CA and certificates made by openssl for this test.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import Redis from 'ioredis';
import { useCluster } from '../helpers/cluster';
import { startProxy } from '../helpers/proxy';
import { TestCerts, makeTestCerts } from '../helpers/certs';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { Config } from '../../config/schema';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { freeClusterPorts } from '../../cmd/sandbox/ports';
import { redisCliBin } from '../../cmd/sandbox/helpers';
import { BUILD_HAS_TLS } from '../helpers/server-version';

const cluster = useCluster({ masters: 3, replicasPerMaster: 0 });
let certs: TestCerts;
const clients: Redis[] = [];

beforeAll(() => {
  certs = makeTestCerts();
});

afterAll(() => {
  for (const c of clients) c.disconnect();
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

function tlsClient(port: number, extra: tls.ConnectionOptions = {}): Redis {
  const c = new Redis({ port, maxRetriesPerRequest: 0, retryStrategy: () => null, tls: { ca: fs.readFileSync(certs.ca), ...extra } });
  clients.push(c);
  return c;
}

/** Resolves with how a raw TLS handshake ended: 'ok' or the error's code/message. */
function handshake(port: number, options: tls.ConnectionOptions): Promise<string> {
  return new Promise((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(certs.ca), ...options });
    const done = (r: string): void => {
      s.destroy();
      resolve(r);
    };
    // With TLS 1.3 the server's verdict on a client certificate arrives after 'secureConnect':
    // send a PING and see whether PONG or an alert comes back.
    s.on('secureConnect', () => s.write('PING\r\n'));
    s.on('data', (d: Buffer) => done(d.toString() === '+PONG\r\n' ? 'ok' : `reply ${d.toString()}`));
    s.on('error', (e: NodeJS.ErrnoException) => done(e.code ?? e.message));
    s.on('close', () => done('closed'));
  });
}

describe('TLS for clients', () => {
  let proxy: ProxyServer | undefined;
  const port = (): number => {
    if (proxy === undefined) throw new Error('the TLS proxy did not start');
    return proxy.address.port;
  };

  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds, { tls: { cert: certs.serverCert, key: certs.serverKey } });
  }, 30_000);

  afterAll(async () => {
    await proxy?.close(500);
  });

  test('ioredis over TLS, verifying the proxy certificate against the test CA', async () => {
    const c = tlsClient(port());
    expect(await c.set('tls:k', 'v')).toBe('OK');
    expect(await c.get('tls:k')).toBe('v');
    expect(await c.mget('tls:k', 'tls:k')).toEqual(['v', 'v']);
  });

  // Needs a redis-cli built with TLS (Debian's is; the shared 7.4.1 and Valkey 8.0.1 builds are not).
  if (BUILD_HAS_TLS) test('redis-cli --tls --cacert', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(redisCliBin(), ['--tls', '--cacert', certs.ca, '-p', String(port()), 'GET', 'tls:k'], (err, stdout) =>
        err === null ? resolve(stdout) : reject(err),
      );
    });
    expect(out).toBe('v\n');
  });

  test('plain-text RESP on the TLS port gets no reply and is counted as a failed handshake', async () => {
    const before = proxy?.stats.tlsHandshakeErrors ?? 0;
    const s = net.connect({ host: '127.0.0.1', port: port() });
    let received = '';
    s.on('data', (d: Buffer) => (received += d.toString('latin1')));
    s.on('error', () => undefined);
    s.write('*1\r\n$4\r\nPING\r\n');
    await new Promise<void>((resolve) => s.on('close', () => resolve()));
    expect(received).not.toContain('PONG');
    expect(proxy?.stats.tlsHandshakeErrors).toBe(before + 1);
  });

  test('a client that does not trust the certificate refuses it', async () => {
    expect(await handshake(port(), { ca: fs.readFileSync(certs.strangerCert) })).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  test('a reload (SIGHUP) swaps the certificate for new connections; an unreadable one is refused, changing nothing', async () => {
    if (proxy === undefined) throw new Error('the TLS proxy did not start');
    const withTls = (cert: string, key: string): Config =>
      parseConfig({ listen: '127.0.0.1:0', cluster: { seeds: cluster().seeds }, tls: { cert, key }, log: { level: 'silent' } });
    expect(() => proxy?.prepareReload(withTls(certs.otherServerCert, `${certs.dir}/missing.key`))).toThrow(/ENOENT/);
    expect(await handshake(port(), {})).toBe('ok');
    proxy.prepareReload(withTls(certs.otherServerCert, certs.otherServerKey))();
    expect(await handshake(port(), {})).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    expect(await handshake(port(), { ca: fs.readFileSync(certs.otherCa) })).toBe('ok');
    proxy.prepareReload(withTls(certs.serverCert, certs.serverKey))();
    expect(await handshake(port(), {})).toBe('ok');
  });
});

describe('TLS for clients with client certificates required', () => {
  let proxy: ProxyServer | undefined;

  beforeAll(async () => {
    proxy = await startProxy(cluster().seeds, {
      tls: { cert: certs.serverCert, key: certs.serverKey, ca: certs.ca, requireClientCert: true },
    });
  }, 30_000);

  afterAll(async () => {
    await proxy?.close(500);
  });

  test('a certificate from the CA is let in; none, or one from another CA, is refused', async () => {
    const port = (proxy as ProxyServer).address.port;
    const key = (f: string): Buffer => fs.readFileSync(f);
    expect(await handshake(port, { cert: key(certs.clientCert), key: key(certs.clientKey) })).toBe('ok');
    expect(await handshake(port, {})).not.toBe('ok');
    expect(await handshake(port, { cert: key(certs.strangerCert), key: key(certs.strangerKey) })).not.toBe('ok');
    const c = tlsClient(port, { cert: key(certs.clientCert), key: key(certs.clientKey) });
    expect(await c.incr('tls:mutual')).toBeGreaterThan(0);
  });
});

// Needs a redis-server built with TLS (Debian's is; the shared 7.4.1 and Valkey 8.0.1 builds are not).
if (BUILD_HAS_TLS) describe('TLS to the back end', () => {
  // One cluster node that speaks TLS on its client port (tls-cluster yes makes CLUSTER SLOTS name
  // the TLS port to TLS clients), requires client certificates, and has an ACL user for the proxy.
  // Its plain port is only for this test's own setup.
  let node: RedisNode | undefined;
  let proxy: ProxyServer | undefined;
  let tlsPort = 0;

  beforeAll(async () => {
    const [plainPort, securePort] = await freeClusterPorts(2);
    tlsPort = securePort;
    node = await RedisNode.start({
      port: plainPort,
      cluster: true,
      extraArgs: [
        '--tls-port', String(tlsPort),
        '--tls-cert-file', certs.serverCert,
        '--tls-key-file', certs.serverKey,
        '--tls-ca-cert-file', certs.ca,
        '--tls-auth-clients', 'yes',
        '--tls-cluster', 'yes',
        '--user', 'proxy', 'on', '>node-secret', '~*', '&*', '+@all',
      ],
    });
    await node.command('CLUSTER', 'ADDSLOTSRANGE', 0, 16383);
    const deadline = Date.now() + 15_000;
    while (!String(await node.command('CLUSTER', 'INFO')).includes('cluster_state:ok')) {
      if (Date.now() > deadline) throw new Error('the TLS cluster node never reached cluster_state:ok');
      await new Promise((r) => setTimeout(r, 50));
    }
    proxy = await startProxy([`127.0.0.1:${tlsPort}`], {
      backend: {
        username: 'proxy',
        password: 'node-secret',
        tls: { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey },
      },
    });
  }, 30_000);

  afterAll(async () => {
    await proxy?.close(500);
    await node?.destroy();
  });

  test('commands reach the node over TLS, signed in as the ACL user', async () => {
    if (proxy === undefined || node === undefined) throw new Error('setup failed');
    const c = new Redis({ port: proxy.address.port, maxRetriesPerRequest: 0 });
    clients.push(c);
    expect(await c.set('tls:backend', 'secure')).toBe('OK');
    expect(await c.get('tls:backend')).toBe('secure');
    expect(await node.command('GET', 'tls:backend')).toBe('secure');
    // The proxy's connections are on the TLS port (laddr) and authenticated as `proxy`.
    const lines = String(await node.command('CLIENT', 'LIST')).split('\n').filter((l) => l.includes('user=proxy'));
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toContain(`laddr=127.0.0.1:${tlsPort}`);
  });
});
