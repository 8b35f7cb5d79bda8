// Running redis-benchmark against one target and reading its --csv output.
//
// redis-benchmark 7.0 has no MGET test (`-t mget` silently runs nothing), so the 10-key MGET is
// given as a custom command whose keys share the hash tag {t}: one slot in cluster mode, one
// server under twemproxy's and the ring's `hash_tag: "{}"`, so every target can serve it.
// MGET10X and MSET10X are the cross-slot shape: 10 keys with 10 different prefixes, so 10 slots
// (and, with 3 shards, every shard): slotproxy splits them (`crossSlot: split`), twemproxy splits
// MGET and MSET across its servers natively, one redis-server holds every key.

import { ManagedProcess, findExecutable, findRedisExecutable } from './children';

export const ALL_TESTS = ['SET', 'GET', 'INCR', 'LPUSH', 'MGET10', 'MGET10X', 'MSET10X'] as const;
export type TestName = (typeof ALL_TESTS)[number];

/** The tests redis-benchmark runs with -t (the rest are custom commands). */
const BUILTIN_TESTS: readonly TestName[] = ['SET', 'GET', 'INCR', 'LPUSH'];

export const MGET_KEYS = 10;
/** The custom-command tests, each one redis-benchmark run of its own. */
const CUSTOM_TESTS: ReadonlyMap<TestName, readonly string[]> = new Map([
  ['MGET10', ['MGET', ...Array.from({ length: MGET_KEYS }, () => '{t}k:__rand_int__')]],
  ['MGET10X', ['MGET', ...Array.from({ length: MGET_KEYS }, (_, i) => `x${i}:__rand_int__`)]],
  ['MSET10X', ['MSET', ...Array.from({ length: MGET_KEYS }, (_, i) => [`x${i}:__rand_int__`, 'v'.repeat(VALUE_BYTES)]).flat()]],
]);

/** Keyspace of __rand_int__ (-r) and value size (-d), as the issue asks. */
export const KEYSPACE = 100_000;
export const VALUE_BYTES = 32;

export interface Shape {
  clients: number;
  pipeline: number;
}

export function shapeLabel(s: Shape): string {
  return `-c ${s.clients} -P ${s.pipeline}`;
}

/** Parses "50x1" or "c50P16" style shape specs given to --shapes. */
export function parseShape(spec: string): Shape {
  const m = /^c?(\d+)[xXP:,/-]+P?(\d+)$/.exec(spec.trim());
  if (m === null) throw new Error(`bad shape ${JSON.stringify(spec)}: expected CLIENTSxPIPELINE, e.g. 50x16`);
  const shape = { clients: Number(m[1]), pipeline: Number(m[2]) };
  if (shape.clients < 1 || shape.pipeline < 1) throw new Error(`bad shape ${JSON.stringify(spec)}: both numbers must be >= 1`);
  return shape;
}

export interface TestResult {
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

export type TestOutcome = { ok: true; result: TestResult } | { ok: false; error: string };

export function redisBenchmarkBin(): string {
  const bin = process.env.SLOTPROXY_REDIS_BENCHMARK === undefined
    ? findRedisExecutable('redis-benchmark')
    : findExecutable(process.env.SLOTPROXY_REDIS_BENCHMARK);
  if (bin === null) throw new Error('redis-benchmark not found; run "bash scripts/setup.sh" (Debian package redis-tools)');
  return bin;
}

/** An argument list as a shell command line, for the report. */
export function shellLine(bin: string, args: readonly string[]): string {
  return [bin, ...args].map((a) => (/^[\w.,:\/=-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/** The argument lists for one target and shape: one run for the -t tests, one for MGET. */
export function invocations(port: number | 'PORT', shape: Shape, tests: readonly TestName[], requests: number): { tests: TestName[]; args: string[] }[] {
  const common = ['-h', '127.0.0.1', '-p', String(port), '-n', String(requests), '-r', String(KEYSPACE), '-c', String(shape.clients), '-P', String(shape.pipeline), '--csv'];
  const out: { tests: TestName[]; args: string[] }[] = [];
  const builtin = tests.filter((t) => BUILTIN_TESTS.includes(t));
  if (builtin.length > 0) {
    out.push({ tests: builtin, args: [...common, '-d', String(VALUE_BYTES), '-t', builtin.map((t) => t.toLowerCase()).join(',')] });
  }
  for (const [test, args] of CUSTOM_TESTS) if (tests.includes(test)) out.push({ tests: [test], args: [...common, ...args] });
  return out;
}

/** Splits one CSV line of quoted fields (redis-benchmark quotes every field). */
function csvFields(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"]|"")*)"|([^,]+)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) {
    out.push(m[1] !== undefined ? m[1].replace(/""/g, '"') : m[2]);
  }
  return out;
}

/** Parses --csv output into rows keyed by redis-benchmark's test name (upper-cased). */
export function parseCsv(text: string): Map<string, TestResult> {
  const rows = new Map<string, TestResult>();
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  const header = lines.findIndex((l) => l.startsWith('"test"'));
  if (header < 0) return rows;
  const names = csvFields(lines[header]);
  const col = (name: string): number => names.indexOf(name);
  const [iRps, iP50, iP99] = [col('rps'), col('p50_latency_ms'), col('p99_latency_ms')];
  if (iRps < 0 || iP50 < 0 || iP99 < 0) return rows;
  for (const line of lines.slice(header + 1)) {
    const f = csvFields(line);
    if (f.length < names.length) continue;
    rows.set(f[0].toUpperCase(), { rps: Number(f[iRps]), p50Ms: Number(f[iP50]), p99Ms: Number(f[iP99]) });
  }
  return rows;
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join(' | ');
}

/** Runs one redis-benchmark invocation; every test it covers gets an outcome, never a throw. */
export async function runInvocation(
  bin: string,
  inv: { tests: TestName[]; args: string[] },
  timeoutMs: number,
): Promise<Map<TestName, TestOutcome>> {
  const proc = ManagedProcess.start(bin, inv.args, { keepAllStdout: true });
  let timedOut = false;
  // redis-benchmark waits forever for a target that accepts and never answers, so bound it.
  const timer = setTimeout(() => {
    timedOut = true;
    void proc.stop(1_000);
  }, timeoutMs);
  await proc.exited;
  clearTimeout(timer);
  const out = new Map<TestName, TestOutcome>();
  const fail = (error: string): Map<TestName, TestOutcome> => {
    for (const t of inv.tests) out.set(t, { ok: false, error });
    return out;
  };
  if (timedOut) return fail(`redis-benchmark timed out after ${Math.round(timeoutMs / 1000)}s`);
  // 7.0 exits 1 after "Error from server: ..." (an error reply would make its rate meaningless).
  const serverError = /Error from server:[^\n]*/.exec(proc.stderr);
  if (serverError !== null) return fail(serverError[0].trim());
  if (proc.describeExit() !== 'exited with code 0') {
    return fail(`redis-benchmark ${proc.describeExit()}: ${lastLines(proc.stderr + proc.stdout, 3)}`);
  }
  const rows = parseCsv(proc.stdout);
  // A custom command's CSV line is named after the command line: its run has no other line.
  const custom = CUSTOM_TESTS.has(inv.tests[0]) ? [...rows.values()][0] : undefined;
  for (const t of inv.tests) {
    const row = CUSTOM_TESTS.has(t) ? custom : rows.get(t);
    if (row === undefined) out.set(t, { ok: false, error: `no ${t} line in redis-benchmark's CSV` });
    else if (!(row.rps > 0)) out.set(t, { ok: false, error: `${t}: redis-benchmark reported ${row.rps} ops/s` });
    else out.set(t, { ok: true, result: row });
  }
  return out;
}
