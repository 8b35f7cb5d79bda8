// The `tls` and `backend.tls` config sections: validation, and paths taken from the config file's folder.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadConfigFile, parseConfig } from '../../config/load';

const CLUSTER_MIN = { cluster: { seeds: ['127.0.0.1:7001'] } };

function problems(input: object): string[] {
  try {
    parseConfig(input);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

test.each([
  ['client tls without key', { tls: { cert: 'c.pem' } }, 'tls.key: required'],
  ['client certs required without a CA', { tls: { cert: 'c', key: 'k', requireClientCert: true } }, 'tls.ca: required when tls.requireClientCert is true'],
  ['unknown field', { tls: { cert: 'c', key: 'k', verify: true } }, 'tls.verify: unknown field'],
  ['backend cert without key', { backend: { tls: { cert: 'c' } } }, 'backend.tls.key: cert and key go together'],
  ['backend key without cert', { backend: { tls: { key: 'k' } } }, 'backend.tls.cert: cert and key go together'],
])('%s', (_, extra, problem) => {
  expect(problems({ ...CLUSTER_MIN, ...extra })).toEqual([problem]);
});

test('defaults: no TLS; `backend.tls: {}` verifies nodes with Node\'s CAs', () => {
  const plain = parseConfig(CLUSTER_MIN);
  expect(plain.tls).toBeUndefined();
  expect(plain.backend.tls).toBeUndefined();
  const on = parseConfig({ ...CLUSTER_MIN, tls: { cert: 'c', key: 'k' }, backend: { tls: {} } });
  expect(on.tls).toEqual({ cert: 'c', key: 'k', requireClientCert: false });
  expect(on.backend.tls).toEqual({ rejectUnauthorized: true });
});

test('relative certificate paths are taken from the config file\'s folder', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-tls-config-'));
  try {
    const file = path.join(dir, 'c.yaml');
    fs.writeFileSync(file, 'cluster:\n  seeds: [127.0.0.1:7001]\ntls:\n  cert: certs/p.crt\n  key: /abs/p.key\nbackend:\n  tls:\n    ca: ca.crt\n');
    const cfg = loadConfigFile(file);
    expect(cfg.tls?.cert).toBe(path.join(dir, 'certs', 'p.crt'));
    expect(cfg.tls?.key).toBe('/abs/p.key');
    expect(cfg.backend.tls?.ca).toBe(path.join(dir, 'ca.crt'));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
