#!/usr/bin/env node
// `npm run bench`: starts its own redis-servers and proxies on loopback, runs redis-benchmark
// against each target (interleaved per round), and writes BENCHMARKS.md and BENCHMARKS.svg.
// Progress goes to stderr; the summary tables go to stdout. See bench/options.ts for the flags.
//
// Exit codes: 0 done, 1 something that should have worked did not (the report is still written
// when it can be), 2 bad usage, 130/143 interrupted.

import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { killAllChildrenSync } from './children';
import { machineInfo } from './machine';
import { unreadPipeline } from './memory-test';
import { BenchOptions, MANY_CLIENTS_SHAPE, USAGE, UsageError, parseOptions } from './options';
import { RssSampler, treeStats } from './process-stats';
import { MIB, renderConsole, renderMarkdown } from './report';
import { Shape, TestName, TestOutcome, invocations, redisBenchmarkBin, runInvocation, shapeLabel, shellLine } from './redis-benchmark';
import { BenchResults, MemoryRow, RunSample, TargetStatus, summarize } from './results';
import { renderChart } from './svg';
import { runMigrationBench } from './migration';
import { runClientCostBench } from './client-cost';
import { runClientMemoryBench } from './client-memory';
import { runTrackingMemoryBench } from './tracking-memory';
import {
  Backends,
  IDLE_SAMPLE_AFTER_MS,
  RunningTarget,
  TARGET_LABELS,
  TargetId,
  TargetLauncher,
  TargetUnavailable,
  flushBackends,
  preflightProblem,
  startBackends,
  stopBackends,
} from './targets';

/** dist/bench/run.js -> the repository root, where BENCHMARKS.md lives by default. */
const REPO_ROOT = path.resolve(__dirname, '..', '..');
const MARKDOWN_FILE = 'BENCHMARKS.md';
const SVG_FILE = 'BENCHMARKS.svg';

/**
 * What slotproxy promises about its memory: RSS stays below its idle RSS plus this. The unread
 * replies it holds for one client are capped by limits.clientOutputHighWaterBytes (8 MiB by
 * default) and 16384 outstanding replies; 500 clients cost their socket and session objects.
 * 96 MiB leaves room for those plus V8 heap growth and GC slack (the same bound abuse.test.ts
 * asserts; measured growth has been 48-73 MiB), and is still far below what an unbounded proxy
 * needs for 1,000,000 buffered requests (twemproxy passes 1 GiB).
 */
const SLOTPROXY_MEMORY_HEADROOM_BYTES = 96 * MIB;
const HEADROOM_NOTE =
  `Bound: slotproxy's RSS stays below its idle RSS + ${SLOTPROXY_MEMORY_HEADROOM_BYTES / MIB} MiB in both shapes. ` +
  "A client's unread replies are capped by `limits.clientOutputHighWaterBytes` (8 MiB by default) and by 16384 outstanding replies, " +
  'after which slotproxy stops reading that client; the rest is sockets, session objects and V8 heap slack. ' +
  'twemproxy has no such setting, so no bound is asserted for it; its figures are for comparison.';

function log(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Teardown steps, run last-in first-out, once, whether the run ends normally, fails or is interrupted. */
class Cleanup {
  private readonly steps: (() => Promise<unknown>)[] = [];
  private running: Promise<void> | null = null;

  push(step: () => Promise<unknown>): void {
    this.steps.push(step);
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
        try {
          await step();
        } catch (err) {
          log(`cleanup: ${errorMessage(err)}`);
        }
      }
    })();
    return this.running;
  }
}

/** Set by SIGINT/SIGTERM: the rounds stop starting new redis-benchmark runs. */
let interrupted = false;

class Interrupted extends Error {
  override name = 'Interrupted';
  constructor() {
    super('interrupted');
  }
}

function checkInterrupted(): void {
  if (interrupted) throw new Interrupted();
}

function installSignalHandlers(cleanup: Cleanup): void {
  const onSignal = (signal: NodeJS.Signals, code: number): void => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping every process this run started`);
    // redis-benchmark and the proxies first, so nothing is waited on; redis-servers in cleanup.
    killAllChildrenSync();
    const deadline = sleep(15_000);
    void Promise.race([cleanup.run(), deadline]).finally(() => process.exit(code));
  };
  process.once('SIGINT', () => onSignal('SIGINT', 130));
  process.once('SIGTERM', () => onSignal('SIGTERM', 143));
}

/** How long one redis-benchmark invocation may take before it is killed (a hung target). */
function invocationTimeoutMs(opts: BenchOptions, tests: number): number {
  return 60_000 + Math.ceil((opts.requests * tests) / 5_000) * 1_000;
}

async function runOne(bin: string, target: RunningTarget, shape: Shape, round: number, opts: BenchOptions): Promise<RunSample> {
  const pid = target.proc?.pid ?? null;
  const cpuBefore = pid === null ? null : treeStats(pid).cpuSeconds;
  const sampler = pid === null ? null : new RssSampler(pid);
  const outcomes = new Map<TestName, TestOutcome>();
  let peakRssBytes: number | null = null;
  try {
    for (const inv of invocations(target.port, shape, opts.tests, opts.requests)) {
      checkInterrupted();
      const result = await runInvocation(bin, inv, invocationTimeoutMs(opts, inv.tests.length));
      for (const [test, outcome] of result) outcomes.set(test, outcome);
    }
  } finally {
    if (sampler !== null) peakRssBytes = sampler.stop();
  }
  const cpuSeconds = pid === null || cpuBefore === null ? null : treeStats(pid).cpuSeconds - cpuBefore;
  const okTests = [...outcomes.values()].filter((o) => o.ok).length;
  return {
    round,
    shape,
    target: target.id,
    outcomes,
    cpuSeconds,
    requests: okTests * opts.requests,
    peakRssBytes,
    anyFailed: okTests < outcomes.size,
  };
}

function progressLine(s: RunSample, rounds: number): string {
  const parts = [...s.outcomes].map(([test, o]) => (o.ok ? `${test} ${o.result.rps.toFixed(0)}` : `${test} ERROR ${o.error}`));
  const cpu = s.cpuSeconds !== null && s.requests > 0 ? `  cpu ${((s.cpuSeconds * 1e6) / s.requests).toFixed(2)} µs/req` : '';
  return `[round ${s.round}/${rounds}] ${shapeLabel(s.shape).padEnd(14)} ${TARGET_LABELS[s.target].padEnd(30)} ${parts.join('  ')}${cpu}`;
}

interface Started {
  running: RunningTarget[];
  statuses: TargetStatus[];
  failures: string[];
}

/** Starts every target; the ones that cannot run here get a reason instead. */
async function startTargets(launcher: TargetLauncher, cleanup: Cleanup, ids: readonly TargetId[]): Promise<Started> {
  const out: Started = { running: [], statuses: [], failures: [] };
  for (const id of ids) {
    const status: TargetStatus = { id, label: TARGET_LABELS[id], unavailable: null, isProxy: id !== 'direct', idleRssBytes: null, hwmBytes: null, cpuSecondsTotal: null };
    out.statuses.push(status);
    let target: RunningTarget;
    try {
      target = await launcher.start(id);
    } catch (err) {
      if (err instanceof TargetUnavailable) {
        status.unavailable = err.message;
        log(`${status.label}: ${err.message}`);
      } else {
        status.unavailable = `failed to start: ${errorMessage(err).split('\n')[0]}`;
        out.failures.push(`${status.label} failed to start: ${errorMessage(err)}`);
        log(`${status.label} failed to start: ${errorMessage(err)}`);
      }
      continue;
    }
    cleanup.push(() => target.stop());
    const problem = await preflightProblem(target.port);
    if (problem !== null) {
      status.unavailable = `failed its preflight: ${problem}`;
      out.failures.push(`${status.label} failed its preflight (SET/GET/MGET): ${problem}`);
      log(`${status.label} failed its preflight: ${problem}`);
      await target.stop();
      continue;
    }
    log(`${status.label} ready on 127.0.0.1:${target.port}${target.proc === null ? '' : ` (pid ${target.proc.pid})`}`);
    out.running.push(target);
  }
  // RSS at start: sampled once the last proxy has had its start-up settling (cmd/settle-heap.ts),
  // no client connected; every target is sampled at the same moment.
  await sleep(IDLE_SAMPLE_AFTER_MS);
  for (const target of out.running) {
    const status = out.statuses.find((s) => s.id === target.id);
    if (status !== undefined && target.proc !== null) status.idleRssBytes = treeStats(target.proc.pid).rssBytes;
  }
  return out;
}

/** The memory test on a fresh instance of each proxy, so its idle RSS is not inflated by the rounds. */
async function memoryTest(launcher: TargetLauncher, statuses: readonly TargetStatus[], samples: readonly RunSample[], failures: string[]): Promise<MemoryRow[]> {
  const rows: MemoryRow[] = [];
  const many = shapeLabel(MANY_CLIENTS_SHAPE);
  for (const status of statuses) {
    if (!status.isProxy || status.unavailable !== null) continue;
    checkInterrupted();
    const peaks = samples.filter((s) => s.target === status.id && shapeLabel(s.shape) === many).flatMap((s) => (s.peakRssBytes === null ? [] : [s.peakRssBytes]));
    const row: MemoryRow = {
      target: status.id,
      label: status.label,
      manyClientsPeakBytes: peaks.length === 0 ? null : Math.max(...peaks),
      benchIdleBytes: status.idleRssBytes,
      unread: null,
      error: null,
      headroomBytes: status.id === 'twemproxy' ? null : SLOTPROXY_MEMORY_HEADROOM_BYTES,
    };
    rows.push(row);
    let target: RunningTarget | null = null;
    try {
      target = await launcher.start(status.id);
      if (target.proc === null) continue;
      await sleep(500); // let start-up allocation settle before the idle sample
      log(`memory test: ${status.label}, 1,000,000 pipelined GETs, replies never read`);
      row.unread = await unreadPipeline(target.port, target.proc.pid);
      const u = row.unread;
      log(`memory test: ${status.label}: idle ${(u.idleRssBytes / MIB).toFixed(1)} MiB, peak ${(u.peakRssBytes / MIB).toFixed(1)} MiB, ${u.commandsWritten} written, ${u.stalled ? 'writes stalled' : 'never stalled'}`);
    } catch (err) {
      row.error = errorMessage(err).split('\n')[0];
      failures.push(`memory test on ${status.label}: ${errorMessage(err)}`);
    } finally {
      await target?.stop();
    }
  }
  return rows;
}

async function run(opts: BenchOptions, cleanup: Cleanup): Promise<number> {
  const started = Date.now();
  const bin = redisBenchmarkBin();
  const tmpDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-bench-'));
  cleanup.push(() => fsp.rm(tmpDir, { recursive: true, force: true }));

  log(`rounds ${opts.rounds}, shapes ${opts.shapes.map(shapeLabel).join(', ')}, ${opts.requests} requests per test, tests ${opts.tests.join(',')}`);
  const machine = await machineInfo(REPO_ROOT);
  log('starting redis-servers: 1 direct, 3 standalone, a 3-master cluster');
  const backends: Backends = await startBackends();
  cleanup.push(() => stopBackends(backends));
  const launcher = new TargetLauncher(backends, tmpDir, opts.baseline);
  const { running, statuses, failures } = await startTargets(launcher, cleanup, opts.targets);

  const samples: RunSample[] = [];
  for (let round = 1; round <= opts.rounds; round++) {
    await flushBackends(backends);
    for (const shape of opts.shapes) {
      for (const target of running) {
        checkInterrupted();
        const sample = await runOne(bin, target, shape, round, opts);
        checkInterrupted(); // a run cut short by the signal is not a result
        samples.push(sample);
        log(progressLine(sample, opts.rounds));
        for (const [test, o] of sample.outcomes) {
          if (!o.ok) failures.push(`${TARGET_LABELS[target.id]} ${shapeLabel(shape)} ${test}: ${o.error}`);
        }
      }
    }
  }
  for (const target of running) {
    const status = statuses.find((s) => s.id === target.id);
    if (status === undefined || target.proc === null) continue;
    const stats = treeStats(target.proc.pid);
    status.hwmBytes = stats.hwmBytes;
    status.cpuSecondsTotal = stats.cpuSeconds;
  }
  // The memory test starts fresh proxies; the benchmark's ones are done.
  await Promise.all(running.map((t) => t.stop()));
  checkInterrupted();
  const memory = opts.memoryTest ? await memoryTest(launcher, statuses, samples, failures) : null;

  const benchmarkCommands = opts.shapes.flatMap((shape) => invocations('PORT', shape, opts.tests, opts.requests).map((inv) => shellLine('redis-benchmark', inv.args)));
  const results: BenchResults = {
    rounds: opts.rounds,
    requests: opts.requests,
    shapes: opts.shapes,
    tests: opts.tests,
    quick: opts.quick,
    machine,
    targets: statuses,
    samples,
    memory,
    launches: [...launcher.launches.values()],
    benchmarkCommands,
    wallSeconds: (Date.now() - started) / 1000,
  };

  await fsp.mkdir(opts.outDir, { recursive: true });
  const mdFile = path.join(opts.outDir, MARKDOWN_FILE);
  const svgFile = path.join(opts.outDir, SVG_FILE);
  const available = statuses.filter((s) => s.unavailable === null);
  const summaries = summarize(results);
  const chart = renderChart({
    title: `ops/s per target and shape (median of ${opts.rounds} round(s), ${machine.cpuModel}, ${machine.cores} cores)`,
    series: available.map((s) => s.label),
    panels: summaries.map((s) => ({
      title: shapeLabel(s.shape),
      groups: opts.tests,
      values: available.map((t) => opts.tests.map((test) => s.rows.find((row) => row.target.id === t.id)?.cells.get(test)?.rps ?? null)),
    })),
  });
  let markdown = renderMarkdown(results, HEADROOM_NOTE, SVG_FILE);
  // The ring migration's numbers (issue 6): copy of 1,000,000 keys, and double-write's cost.
  if (opts.memoryTest) markdown += `\n${await runMigrationBench(1_000_000, 200_000)}\n`;
  // What each connected client costs (issue 24): 1,000 to 10,000 clients, idle and at 1 GET/s each.
  if (opts.memoryTest) markdown += `\n${await runClientCostBench(5)}\n`;
  // Issue 32's counts; 50,000 runs both servers as 4 workers and the clients from 4 processes
  // (one process's open-file limit is 20,000 here), see bench/client-memory.ts.
  if (opts.memoryTest) markdown += `\n${await runClientMemoryBench([1000, 10_000, 50_000], 3, 5)}\n`;
  // What client-side caching costs per tracked key (issue 23).
  if (opts.memoryTest) markdown += `\n${await runTrackingMemoryBench()}\n`;
  await fsp.writeFile(mdFile, markdown);
  await fsp.writeFile(svgFile, chart);

  process.stdout.write(renderConsole(results, HEADROOM_NOTE));
  process.stdout.write(`\nwrote ${mdFile}\nwrote ${svgFile}\n(${results.wallSeconds.toFixed(0)} s)\n`);
  if (failures.length > 0) {
    log(`${failures.length} problem(s):`);
    for (const f of failures) log(`  ${f}`);
    return 1;
  }
  return 0;
}

async function main(): Promise<number> {
  let opts: BenchOptions | null;
  try {
    opts = parseOptions(process.argv.slice(2), REPO_ROOT);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bench: ${err.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (opts === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const cleanup = new Cleanup();
  installSignalHandlers(cleanup);
  try {
    return await run(opts, cleanup);
  } catch (err) {
    if (err instanceof Interrupted) return 130;
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 1;
  } finally {
    await cleanup.run();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench: ${String(err)}\n`);
    process.exit(1);
  },
);
