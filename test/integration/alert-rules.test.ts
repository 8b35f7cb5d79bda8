// config/alert-rules.yml, the Prometheus rules shipped beside the Grafana dashboard: valid for
// Prometheus (`promtool check rules`, Debian's prometheus package, installed by
// SLOTPROXY_NEED_PROMTOOL=1 bash scripts/setup.sh), firing as they say on series given to
// `promtool test rules`, and naming only metrics a real proxy's /metrics exports.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProxyServer } from '../../proxy/server/server';
import { parseConfig } from '../../config/load';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { findExecutable } from '../../cmd/sandbox/executables';

const RULES = path.resolve(__dirname, '..', '..', 'config', 'alert-rules.yml');

function promtool(args: string[], cwd: string): Promise<{ code: number; output: string }> {
  const bin = findExecutable('promtool');
  if (bin === null) throw new Error('promtool is not installed: run SLOTPROXY_NEED_PROMTOOL=1 bash scripts/setup.sh (Debian\'s prometheus package)');
  return new Promise((resolve) => {
    execFile(bin, args, { cwd, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, output: stdout + stderr });
    });
  });
}

let nodes: StandaloneNodes | undefined;
let proxy: ProxyServer | undefined;
let tmp = '';

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-alerts-'));
  nodes = await StandaloneNodes.start(2);
  const ring = (addrs: readonly string[]): { nodes: { name: string; addr: string }[] } => ({ nodes: addrs.map((addr, i) => ({ name: `n${i}`, addr })) });
  // A migration configured, so the migration metrics are registered with their real names.
  proxy = await ProxyServer.start(
    parseConfig({
      listen: '127.0.0.1:0',
      mode: 'ring',
      ring: ring(nodes.addresses.slice(0, 1)),
      migration: { phase: 'double-write', to: ring(nodes.addresses) },
      metrics: { listen: '127.0.0.1:0' },
      log: { level: 'silent' },
    }),
  );
}, 60_000);

afterAll(async () => {
  await proxy?.close(200);
  await nodes?.stop();
  if (tmp !== '') fs.rmSync(tmp, { recursive: true, force: true });
}, 30_000);

test('promtool check rules accepts config/alert-rules.yml', async () => {
  const { code, output } = await promtool(['check', 'rules', RULES], tmp);
  expect(output).toMatch(/SUCCESS: \d+ rules found/);
  expect(code).toBe(0);
});

test('every slotproxy_ metric the rules name is one a running proxy exports', async () => {
  const body = await (await fetch(`http://127.0.0.1:${proxy!.metricsPort!}/metrics`)).text();
  const exported = new Set<string>();
  for (const [, name, type] of body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) exported.add(name + s);
  }
  const used = new Set(fs.readFileSync(RULES, 'utf8').match(/slotproxy_[a-z0-9_]+/g) ?? []);
  expect(used.size).toBeGreaterThan(10);
  expect([...used].filter((m) => !exported.has(m))).toEqual([]);
});

test('promtool test rules: the rules fire on the series they describe, and not before their "for"', async () => {
  // Two proxies: one loses its back-end connections, both see one node down (one alert for it, not
  // one per proxy), and they disagree on the migration phase.
  const tests = `rule_files: [${JSON.stringify(RULES)}]
evaluation_interval: 30s
tests:
  - interval: 30s
    input_series:
      - series: 'slotproxy_backend_connections{job="slotproxy",instance="p1"}'
        values: '3 0 0 0 0 0 0 0'
      - series: 'slotproxy_backend_connections{job="slotproxy",instance="p2"}'
        values: '3 3 3 3 3 3 3 3'
      - series: 'slotproxy_backend_up{job="slotproxy",instance="p1",node="10.0.0.1:6379"}'
        values: '1 0 0 0 0 0 0 0'
      - series: 'slotproxy_backend_up{job="slotproxy",instance="p2",node="10.0.0.1:6379"}'
        values: '1 0 0 0 0 0 0 0'
      - series: 'slotproxy_migration_phase{job="slotproxy",instance="p1",phase="double-write"}'
        values: '1x20'
      - series: 'slotproxy_migration_phase{job="slotproxy",instance="p2",phase="read-new"}'
        values: '1x20'
      - series: 'slotproxy_migration_follow_spool_paused{job="slotproxy",instance="p1",node="10.0.0.2:6379"}'
        values: '0 1 1 1 1 1 1 1'
    alert_rule_test:
      - eval_time: 1m
        alertname: SlotproxyNoBackendConnections
        exp_alerts: []
      - eval_time: 3m
        alertname: SlotproxyNoBackendConnections
        exp_alerts:
          - exp_labels: { severity: page, job: slotproxy, instance: p1 }
            exp_annotations:
              summary: 'slotproxy p1 holds no connection to any Redis node'
              description: 'Every request fails: check that the nodes are up and that the back-end user can sign in (the proxy''s log names the node and the error).'
      - eval_time: 1m
        alertname: SlotproxyBackendNodeDown
        exp_alerts: []
      - eval_time: 2m
        alertname: SlotproxyBackendNodeDown
        exp_alerts:
          - exp_labels: { severity: page, node: '10.0.0.1:6379' }
            exp_annotations:
              summary: 'Redis node 10.0.0.1:6379 does not answer the proxies'' PING'
              description: 'Keys on that node fail (a ring server) or wait for a failover (a cluster master): GET /health/backends on a proxy names it and the slots without a master.'
      - eval_time: 6m
        alertname: SlotproxyMigrationPhaseSplit
        exp_alerts:
          - exp_labels: { severity: page }
            exp_annotations:
              summary: 'slotproxy proxies route by different migration phases'
              description: 'Some proxies are in one phase and some in another for 5 minutes: run \`slotproxy migrate status -c FILE\` and finish the switch with \`slotproxy migrate phase\` (docs/migration.md, Runbook).'
      - eval_time: 2m
        alertname: SlotproxyMigrationFollowSpoolFull
        exp_alerts: []
      - eval_time: 3m
        alertname: SlotproxyMigrationFollowSpoolFull
        exp_alerts:
          - exp_labels: { severity: warn, instance: p1, node: '10.0.0.2:6379' }
            exp_annotations:
              summary: 'slotproxy p1: the follow of 10.0.0.2:6379 stopped reading its link, its spool full'
              description: 'Side B takes the node''s stream slower than side A writes it and migration.spool.maxBytes is reached: A holds the rest in its output buffer for the follower, and past its client-output-buffer-limit for replicas cuts the link (a new full sync). Check side B''s nodes (paused, slow, out of memory) and give the spool more room (docs/migration.md, Following side A as a replica).'
`;
  const file = path.join(tmp, 'alert-rules.test.yml');
  fs.writeFileSync(file, tests);
  const { code, output } = await promtool(['test', 'rules', file], tmp);
  expect(output).toMatch(/SUCCESS/);
  expect(code).toBe(0);
});
