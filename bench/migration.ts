// The migration's own benchmark: `migrate copy` throughput over a large key space, and what
// double-write costs a client's write load (the same redis-benchmark load through one proxy with
// no migration, then in double-write). Run: `npm run build && node dist/bench/migration.js
// [--keys 1000000] [--requests 200000]`; it prints a Markdown section. `npm run bench` (not
// --quick) appends the same section to BENCHMARKS.md.

import { execFile } from 'node:child_process';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { parseConfig } from '../config/load';
import { RingModeConfig } from '../config/schema';
import { ProxyServer } from '../proxy/server/server';
import { Placement } from '../sharding/migration';
import { NodeClient } from '../proxy/migration/tools/node-client';
import { copyMoved } from '../proxy/migration/tools/copy';
import { findExecutable } from './children';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

function ringConfig(nodes: string[], to: string[] | null): RingModeConfig {
  const named = (addrs: string[]) => addrs.map((addr, i) => ({ name: `n${i}`, addr, weight: 1 }));
  const cfg = parseConfig({
    listen: '127.0.0.1:0',
    mode: 'ring',
    ring: { hash: 'md5', nodes: named(nodes) },
    ...(to === null ? {} : { migration: { phase: 'double-write', to: { nodes: named(to) } } }),
    log: { level: 'silent' },
  });
  if (cfg.mode !== 'ring') throw new Error('expected a ring config');
  return cfg;
}

/** requests/s of redis-benchmark's SET and INCR against `port`. */
function writeLoad(port: number, requests: number): Promise<{ set: number; incr: number }> {
  const bin = findExecutable('redis-benchmark');
  if (bin === null) throw new Error('redis-benchmark is not installed');
  const args = ['-p', String(port), '-t', 'set,incr', '-n', String(requests), '-r', '100000', '-c', '50', '-P', '16', '-d', '32', '--csv'];
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: 600_000 }, (err, stdout) => {
      if (err !== null) return reject(err);
      const rps = (name: string): number => Number(new RegExp(`"${name}","([\\d.]+)"`).exec(stdout)?.[1] ?? NaN);
      resolve({ set: rps('SET'), incr: rps('INCR') });
    });
  });
}

/** Runs both measurements on its own redis-servers and returns the Markdown section. */
export async function runMigrationBench(keys: number, requests: number): Promise<string> {
  // DEBUG POPULATE fills a node with a million keys in about a second.
  const nodes = await StandaloneNodes.start(3, { extraArgs: ['--enable-debug-command', 'yes'] });
  try {
    const [a, b, c] = nodes.addresses;
    // Copy: ring A = one node holding every key, ring B = two nodes, so about half the keys move.
    await nodes.nodes[0].command('DEBUG', 'POPULATE', keys, 'key', 16);
    const cfg = ringConfig([a], [a, b]);
    const direct = new NodeClient(cfg);
    let copy;
    try {
      copy = await copyMoved(direct, Placement.fromConfig(cfg.ring, cfg.migration), { rate: 0, batch: 1000, restart: true, progress: process.stderr.isTTY === true });
    } finally {
      direct.close();
    }
    await Promise.all(nodes.nodes.map((n) => n.command('FLUSHALL')));

    // Double-write cost: the same write load, without and with a migration to a third node.
    const results: { label: string; set: number; incr: number }[] = [];
    for (const [label, config] of [
      ['ring a, b (no migration)', ringConfig([a, b], null)],
      ['double-write a, b -> a, b, c', ringConfig([a, b], [a, b, c])],
    ] as const) {
      const proxy = await ProxyServer.start(config);
      try {
        results.push({ label, ...(await writeLoad(proxy.address.port, requests)) });
      } finally {
        await proxy.close(500);
      }
      await Promise.all(nodes.nodes.map((n) => n.command('FLUSHALL')));
    }
    const [base, dw] = results;
    const lines = [
      '## Migration',
      '',
      `\`migrate copy\`: ${copy.scanned.toLocaleString('en')} small keys scanned on the source node, ${copy.copied.toLocaleString('en')} copied to their new owner, in ${copy.seconds.toFixed(1)} s: **${Math.round(copy.scanned / copy.seconds).toLocaleString('en')} keys/s scanned, ${Math.round(copy.copied / copy.seconds).toLocaleString('en')} keys/s copied** (no --rate cap; batches of 1000; one snapshot and one apply script per moved key).`,
      '',
      `Double-write cost, redis-benchmark -c 50 -P 16 -r 100000 -d 32, ${requests.toLocaleString('en')} requests per test, one proxy:`,
      '',
      '| Target | SET ops/s | INCR ops/s |',
      '| --- | ---: | ---: |',
      ...results.map((r) => `| ${r.label} | ${Math.round(r.set).toLocaleString('en')} | ${Math.round(r.incr).toLocaleString('en')} |`),
      `| ratio | ${(dw.set / base.set).toFixed(2)} | ${(dw.incr / base.incr).toFixed(2)} |`,
      '',
      'In double-write a write to a key that moves runs as MULTI, write, snapshot script, EXEC on A, then an apply script on B before its reply (one more round trip, two small Lua scripts); about a third of the keys move from 2 to 3 nodes, the others are written as usual.',
      '',
    ];
    return lines.join('\n');
  } finally {
    await nodes.stop();
  }
}

if (require.main === module) {
  runMigrationBench(arg('--keys', 1_000_000), arg('--requests', 200_000)).then(
    (text) => {
      process.stdout.write(text);
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`bench/migration: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
