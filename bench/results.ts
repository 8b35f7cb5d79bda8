// What one benchmark run collected, and the summaries the report prints: medians over rounds,
// ratios to redis-server direct and to twemproxy, CPU time per request.

import { MachineInfo } from './machine';
import { UnreadPipelineResult } from './memory-test';
import { Shape, TestName, TestOutcome, shapeLabel } from './redis-benchmark';
import { LaunchRecord, TargetId } from './targets';

/** One target, one shape, one round. */
export interface RunSample {
  round: number;
  shape: Shape;
  target: TargetId;
  outcomes: Map<TestName, TestOutcome>;
  /** CPU seconds the proxy's process tree used during the run; null for redis-server direct. */
  cpuSeconds: number | null;
  /** Requests of the tests that succeeded (the denominator of CPU per request). */
  requests: number;
  /** Highest RSS of the proxy's process tree during the run; null for redis-server direct. */
  peakRssBytes: number | null;
  /** Some test failed, so CPU per request would divide by the wrong count. */
  anyFailed: boolean;
}

export interface TargetStatus {
  id: TargetId;
  label: string;
  /** Why it did not run (not implemented, not installed ...); null when it ran. */
  unavailable: string | null;
  isProxy: boolean;
  /** RSS right after start-up, before any traffic. */
  idleRssBytes: number | null;
  /** VmHWM at the end of the benchmark rounds (whole life of the process). */
  hwmBytes: number | null;
  /** CPU seconds over the whole life of the process, start-up included. */
  cpuSecondsTotal: number | null;
}

export interface MemoryRow {
  target: TargetId;
  label: string;
  /** Peak RSS during the many-clients shape (max over rounds); null when that shape did not run. */
  manyClientsPeakBytes: number | null;
  /** RSS of the benchmark's proxy process before any traffic (the base of the many-clients bound). */
  benchIdleBytes: number | null;
  unread: UnreadPipelineResult | null;
  error: string | null;
  /** Bytes above idle the proxy promises to stay under; null when it promises nothing (twemproxy). */
  headroomBytes: number | null;
}

export interface BenchResults {
  rounds: number;
  requests: number;
  shapes: Shape[];
  tests: TestName[];
  quick: boolean;
  machine: MachineInfo;
  targets: TargetStatus[];
  samples: RunSample[];
  /** null when the memory test was not run (--quick). */
  memory: MemoryRow[] | null;
  launches: LaunchRecord[];
  benchmarkCommands: string[];
  wallSeconds: number;
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Geometric mean: the right average of ratios (a 2x and a 0.5x cancel out). */
function geometricMean(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  return Math.exp(values.reduce((sum, v) => sum + Math.log(v), 0) / values.length);
}

export interface Cell {
  rps: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Set when no round produced a number. */
  error: string | null;
}

export interface Row {
  target: TargetStatus;
  cells: Map<TestName, Cell>;
  /** Median over tests of the per-test p50. */
  p50Ms: number | null;
  /** Worst per-test p99. */
  p99Ms: number | null;
  /** Geometric mean over tests of ops/s divided by the other target's. */
  vsDirect: number | null;
  vsTwemproxy: number | null;
  cpuUsPerRequest: number | null;
  cpuSecondsPerRound: number | null;
  peakRssBytes: number | null;
}

export interface ShapeSummary {
  shape: Shape;
  rows: Row[];
}

function cellFor(samples: readonly RunSample[], test: TestName): Cell {
  const ok: { rps: number; p50Ms: number; p99Ms: number }[] = [];
  let error: string | null = null;
  for (const s of samples) {
    const o = s.outcomes.get(test);
    if (o === undefined) continue;
    if (o.ok) ok.push(o.result);
    else error ??= o.error;
  }
  if (ok.length === 0) return { rps: null, p50Ms: null, p99Ms: null, error: error ?? 'not run' };
  return {
    rps: median(ok.map((r) => r.rps)),
    p50Ms: median(ok.map((r) => r.p50Ms)),
    p99Ms: median(ok.map((r) => r.p99Ms)),
    error: null,
  };
}

function ratio(row: Map<TestName, Cell>, base: Map<TestName, Cell> | undefined, tests: readonly TestName[]): number | null {
  if (base === undefined) return null;
  const ratios: number[] = [];
  for (const t of tests) {
    const a = row.get(t)?.rps ?? null;
    const b = base.get(t)?.rps ?? null;
    if (a !== null && b !== null && b > 0) ratios.push(a / b);
  }
  return ratios.length === tests.length ? geometricMean(ratios) : null;
}

export function summarize(r: BenchResults): ShapeSummary[] {
  return r.shapes.map((shape) => {
    const label = shapeLabel(shape);
    const forTarget = (id: TargetId): RunSample[] => r.samples.filter((s) => s.target === id && shapeLabel(s.shape) === label);
    const cells = new Map<TargetId, Map<TestName, Cell>>();
    for (const t of r.targets) {
      if (t.unavailable !== null) continue;
      const samples = forTarget(t.id);
      cells.set(t.id, new Map(r.tests.map((test) => [test, cellFor(samples, test)])));
    }
    const rows = r.targets.map((target): Row => {
      const mine = cells.get(target.id) ?? new Map<TestName, Cell>();
      const samples = forTarget(target.id);
      const p50s = [...mine.values()].flatMap((c) => (c.p50Ms === null ? [] : [c.p50Ms]));
      const p99s = [...mine.values()].flatMap((c) => (c.p99Ms === null ? [] : [c.p99Ms]));
      const cpuSamples = samples.filter((s) => s.cpuSeconds !== null && !s.anyFailed && s.requests > 0);
      const peaks = samples.flatMap((s) => (s.peakRssBytes === null ? [] : [s.peakRssBytes]));
      return {
        target,
        cells: mine,
        p50Ms: median(p50s),
        p99Ms: p99s.length === 0 ? null : Math.max(...p99s),
        vsDirect: target.unavailable === null ? ratio(mine, cells.get('direct'), r.tests) : null,
        vsTwemproxy: target.unavailable === null ? ratio(mine, cells.get('twemproxy'), r.tests) : null,
        cpuUsPerRequest: median(cpuSamples.map((s) => ((s.cpuSeconds ?? 0) * 1e6) / s.requests)),
        cpuSecondsPerRound: median(cpuSamples.map((s) => s.cpuSeconds ?? 0)),
        peakRssBytes: peaks.length === 0 ? null : Math.max(...peaks),
      };
    });
    return { shape, rows };
  });
}
