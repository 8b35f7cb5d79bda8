// How `migrate phase` speaks TLS to the proxies (proxy/migration/tools/proxy-tls.ts): what it
// trusts and presents from the listener's tls: section and the flags, and how failures read.
import fs from 'node:fs';
import { TestCerts, makeTestCerts } from '../helpers/certs';
import { proxyTls, tlsFailure } from '../../proxy/migration/tools/proxy-tls';

let certs: TestCerts;

beforeAll(() => {
  certs = makeTestCerts();
});

afterAll(() => {
  fs.rmSync(certs.dir, { recursive: true, force: true });
});

const failure = (code: string, message = code): NodeJS.ErrnoException => Object.assign(new Error(message), { code });

test('a plain listener: no TLS, and a --tls flag is refused', () => {
  expect(proxyTls(undefined, {})).toBeNull();
  expect(() => proxyTls(undefined, { tlsCa: certs.ca })).toThrow('the config has no tls: section');
});

test('the listener asks for client certificates (tls.ca): trusts tls.ca and presents the proxy\'s own certificate', () => {
  const t = proxyTls({ cert: certs.serverCert, key: certs.serverKey, ca: certs.ca, requireClientCert: true }, {})!;
  expect(t.trusts).toBe(`tls.ca (${certs.ca})`);
  expect(t.presents).toBe(`tls.cert (${certs.serverCert})`);
  expect(t.servername).toBeUndefined();
});

test('no tls.ca: built-in CAs, no client certificate; flags override each', () => {
  const plain = proxyTls({ cert: certs.serverCert, key: certs.serverKey, requireClientCert: false }, {})!;
  expect(plain.trusts).toContain("Node's built-in CAs");
  expect(plain.presents).toBeNull();
  const flagged = proxyTls({ cert: certs.serverCert, key: certs.serverKey, requireClientCert: false }, { tlsCa: certs.otherCa, tlsCert: certs.clientCert, tlsKey: certs.clientKey, tlsServername: 'proxy.internal' })!;
  expect([flagged.trusts, flagged.presents, flagged.servername]).toEqual([`--tls-ca (${certs.otherCa})`, `--tls-cert (${certs.clientCert})`, 'proxy.internal']);
});

test('--tls-cert without --tls-key, and a file that cannot be read, are refused', () => {
  const listener = { cert: certs.serverCert, key: certs.serverKey, requireClientCert: false };
  expect(() => proxyTls(listener, { tlsCert: certs.clientCert })).toThrow('--tls-cert and --tls-key go together');
  expect(() => proxyTls(listener, { tlsCa: `${certs.dir}/missing.crt` })).toThrow(`cannot read --tls-ca ${certs.dir}/missing.crt`);
});

test('failures say what to change', () => {
  const t = proxyTls({ cert: certs.serverCert, key: certs.serverKey, ca: certs.ca, requireClientCert: true }, {})!;
  expect(tlsFailure(failure('UNABLE_TO_VERIFY_LEAF_SIGNATURE'), t, '10.0.0.1')).toContain('--tls-ca FILE');
  expect(tlsFailure(failure('ERR_TLS_CERT_ALTNAME_INVALID', "Hostname/IP does not match certificate's altnames"), t, 'proxy-1')).toContain('its certificate is not for proxy-1');
  expect(tlsFailure(failure('ERR_SSL_TLSV1_ALERT_UNKNOWN_CA'), t, 'proxy-1')).toContain(`this tool presented tls.cert (${certs.serverCert}); give one with --tls-cert FILE --tls-key FILE`);
  expect(tlsFailure(failure('ERR_SSL_WRONG_VERSION_NUMBER'), t, 'proxy-1')).toContain('it does not answer TLS');
  expect(tlsFailure(failure('ECONNREFUSED'), t, 'proxy-1')).toBeNull();
});
