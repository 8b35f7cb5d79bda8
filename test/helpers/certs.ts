// Jest helper: a throw-away CA with a server certificate (for 127.0.0.1 and localhost) and a client
// certificate, made with openssl in a temp dir. EC keys, so it takes milliseconds.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestCerts {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** Signed by another CA: must be refused wherever `ca` is required. */
  strangerCert: string;
  strangerKey: string;
  /** The other CA, and a server certificate (127.0.0.1, localhost) it signed: for rotation tests. */
  otherCa: string;
  otherServerCert: string;
  otherServerKey: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(dir: string, name: string): void {
  openssl(dir, ['req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name}`]);
}

function makeLeaf(dir: string, ca: string, name: string, extensions: string): void {
  fs.writeFileSync(path.join(dir, `${name}.ext`), extensions);
  openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
  openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial',
    '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`]);
}

/** Makes the certificates; remove `dir` when done. */
export function makeTestCerts(): TestCerts {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-certs-'));
  makeCa(dir, 'test-ca');
  makeCa(dir, 'other-ca');
  makeLeaf(dir, 'test-ca', 'server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  makeLeaf(dir, 'test-ca', 'client', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'other-ca', 'stranger', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'other-ca', 'other-server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  const at = (f: string): string => path.join(dir, f);
  return {
    dir,
    ca: at('test-ca.crt'),
    serverCert: at('server.crt'),
    serverKey: at('server.key'),
    clientCert: at('client.crt'),
    clientKey: at('client.key'),
    strangerCert: at('stranger.crt'),
    strangerKey: at('stranger.key'),
    otherCa: at('other-ca.crt'),
    otherServerCert: at('other-server.crt'),
    otherServerKey: at('other-server.key'),
  };
}
