// Command-line options of `npm run bench`. Hand-parsed: six flags do not justify a parser's types.

import path from 'node:path';
import { ALL_TESTS, Shape, TestName, parseShape, shapeLabel } from './redis-benchmark';
import { BASELINE_IDS, TARGET_IDS, TargetId } from './targets';

export interface BenchOptions {
  rounds: number;
  requests: number;
  shapes: Shape[];
  tests: TestName[];
  /** Targets to run, in TARGET_IDS order. */
  targets: TargetId[];
  outDir: string;
  /** A checkout with a built dist/ whose slotproxy runs beside this one (the baseline rows), or null. */
  baseline: string | null;
  quick: boolean;
  memoryTest: boolean;
}

export const FULL_SHAPES: readonly Shape[] = [
  { clients: 50, pipeline: 1 },
  { clients: 50, pipeline: 16 },
  { clients: 500, pipeline: 1 },
];
/** The shape whose proxy RSS the memory section reports. */
export const MANY_CLIENTS_SHAPE: Shape = { clients: 500, pipeline: 1 };

const QUICK_SHAPES: readonly Shape[] = [{ clients: 50, pipeline: 1 }];
const QUICK_TESTS: readonly TestName[] = ['SET', 'GET', 'MGET10'];
const QUICK_REQUESTS = 20_000;
const DEFAULT_REQUESTS = 200_000;
const DEFAULT_ROUNDS = 3;

export const USAGE = `usage: node dist/bench/run.js [options]   (or: npm run bench -- [options])

  --rounds N       rounds; each round runs every shape on every target in turn (default ${DEFAULT_ROUNDS})
  --requests N     requests per redis-benchmark test (default ${DEFAULT_REQUESTS})
  --shapes LIST    CLIENTSxPIPELINE,... (default ${FULL_SHAPES.map((s) => `${s.clients}x${s.pipeline}`).join(',')})
  --targets LIST   some of ${TARGET_IDS.join(',')} (default: all); a partial run skips the memory and migration tests
  --tests LIST     some of ${ALL_TESTS.join(',')} (default: all); a partial run skips the memory and migration tests
  --out DIR        where BENCHMARKS.md and BENCHMARKS.svg go (default: the repository root)
  --baseline DIR   also run slotproxy ring and cluster from checkout DIR (its dist/ built), each beside
                   this build's row in every round: a before/after in one run
  --quick          smoke run: 1 round, -c 50 -P 1, ${QUICK_REQUESTS} requests, SET/GET/MGET10, no memory test
  --help           this text

Explicit --rounds, --requests and --shapes win over --quick's.`;

export class UsageError extends Error {
  override name = 'UsageError';
}

function positiveInt(flag: string, value: string | undefined): number {
  const n = Number(value);
  if (value === undefined || !Number.isSafeInteger(n) || n < 1) throw new UsageError(`${flag} needs a positive integer, got ${JSON.stringify(value ?? '')}`);
  return n;
}

/** A comma-separated list of names out of `known`. */
function listOf<T extends string>(flag: string, value: string | undefined, known: readonly T[]): T[] {
  const names = (value ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (names.length === 0) throw new UsageError(`${flag} needs a list out of ${known.join(',')}`);
  for (const name of names) {
    if (!(known as readonly string[]).includes(name)) throw new UsageError(`${flag}: unknown ${JSON.stringify(name)}; known: ${known.join(',')}`);
  }
  return names as T[];
}

/** Parses argv (without node and the script); null means --help was asked for. */
export function parseOptions(argv: readonly string[], repoRoot: string): BenchOptions | null {
  let rounds: number | undefined;
  let requests: number | undefined;
  let shapes: Shape[] | undefined;
  let outDir = repoRoot;
  let baseline: string | null = null;
  let quick = false;
  let targets: TargetId[] | undefined;
  let tests: TestName[] | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    // Accept both "--flag value" and "--flag=value".
    const eq = arg.indexOf('=');
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith('--') && eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = (): string | undefined => inline ?? argv[++i];
    switch (flag) {
      case '--help':
      case '-h':
        return null;
      case '--quick':
        quick = true;
        break;
      case '--rounds':
        rounds = positiveInt(flag, value());
        break;
      case '--requests':
        requests = positiveInt(flag, value());
        break;
      case '--shapes': {
        const text = value();
        if (text === undefined || text.trim() === '') throw new UsageError('--shapes needs a list such as 50x1,50x16');
        try {
          shapes = text.split(',').filter((s) => s.trim() !== '').map(parseShape);
        } catch (err) {
          throw new UsageError(err instanceof Error ? err.message : String(err));
        }
        break;
      }
      case '--targets':
        targets = listOf(flag, value(), TARGET_IDS);
        break;
      case '--tests':
        tests = listOf(flag, value(), ALL_TESTS);
        break;
      case '--out': {
        const dir = value();
        if (dir === undefined || dir === '') throw new UsageError('--out needs a directory');
        outDir = path.resolve(dir);
        break;
      }
      case '--baseline': {
        const dir = value();
        if (dir === undefined || dir === '') throw new UsageError('--baseline needs a directory');
        baseline = path.resolve(dir);
        break;
      }
      default:
        throw new UsageError(`unknown option ${JSON.stringify(arg)}`);
    }
  }
  const uniqueShapes = (list: readonly Shape[]): Shape[] => {
    const seen = new Set<string>();
    return list.filter((s) => !seen.has(shapeLabel(s)) && seen.add(shapeLabel(s)) !== undefined);
  };
  if (baseline === null && targets?.some((id) => BASELINE_IDS.includes(id))) throw new UsageError(`--targets: ${BASELINE_IDS.join(' and ')} need --baseline DIR`);
  // Without --baseline its rows are not run; with it and no --targets they join the full list.
  const chosen = (id: TargetId): boolean => (targets === undefined ? baseline !== null || !BASELINE_IDS.includes(id) : targets.includes(id));
  return {
    rounds: rounds ?? (quick ? 1 : DEFAULT_ROUNDS),
    requests: requests ?? (quick ? QUICK_REQUESTS : DEFAULT_REQUESTS),
    shapes: uniqueShapes(shapes ?? (quick ? QUICK_SHAPES : FULL_SHAPES)),
    tests: tests ?? [...(quick ? QUICK_TESTS : ALL_TESTS)],
    targets: TARGET_IDS.filter(chosen),
    outDir,
    baseline,
    quick,
    memoryTest: !quick && targets === undefined && tests === undefined,
  };
}
