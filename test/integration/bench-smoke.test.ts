// Keeps `npm run bench` from rotting: a --quick run (one round, one shape, seconds) must start
// every target it can, print a row per target, and write BENCHMARKS.md and BENCHMARKS.svg to the
// directory it is given, never to the repository. It times nothing: numbers only have to be > 0.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const REPO = path.resolve(__dirname, '..', '..');
const SCRIPT = path.join(REPO, 'dist', 'bench', 'run.js');
const QUICK_SHAPE = '-c 50 -P 1';
const TARGETS = ['redis-server direct', 'twemproxy', 'Node floor (multiplexed, 3 nodes)', 'slotproxy ring', 'Node floor (multiplexed, cluster)', 'slotproxy cluster', 'slotproxy cluster --workers 2'];
const HEADERS = ['Target', 'SET ops/s', 'GET ops/s', 'MGET10 ops/s', 'p50 ms', 'p99 ms', 'vs direct', 'vs twemproxy'];
const MEASURED = ['redis-server direct', 'twemproxy', 'Node floor (multiplexed, 3 nodes)', 'Node floor (multiplexed, cluster)', 'slotproxy cluster'];
const RUN_TIMEOUT_MS = 150_000;

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runBench(args: string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, ...args], { cwd: REPO, timeout: RUN_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
      resolve({ code, stdout, stderr });
    });
  });
}

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());
}

/** The markdown table right under "### <shape>" in the printed output: header and body rows. */
function shapeTable(stdout: string, shape: string): { header: string[]; rows: string[][] } {
  const lines = stdout.split('\n');
  const start = lines.findIndex((l) => l.trim() === `### ${shape}`);
  if (start < 0) throw new Error(`no "### ${shape}" section in the output:\n${stdout}`);
  const tableLines: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === '' && tableLines.length === 0) continue;
    if (!line.startsWith('|')) break;
    tableLines.push(line);
  }
  if (tableLines.length < 2) throw new Error(`no table under "### ${shape}":\n${stdout}`);
  return { header: cells(tableLines[0]), rows: tableLines.slice(2).map(cells) };
}

let outDir = '';
let result: RunResult = { code: null, stdout: '', stderr: '' };
let repoMarkdownBefore: number | null = null;

function repoMarkdownMtime(): number | null {
  try {
    return fs.statSync(path.join(REPO, 'BENCHMARKS.md')).mtimeMs;
  } catch {
    return null;
  }
}

/** The output, for failure messages: a failing assertion should say what the benchmark printed. */
function transcript(): string {
  return `--- exit code ${String(result.code)} ---\n--- stdout ---\n${result.stdout}\n--- stderr ---\n${result.stderr}`;
}

beforeAll(async () => {
  if (!fs.existsSync(SCRIPT)) {
    throw new Error(`${SCRIPT} is missing: build first ("npm run build"; "npm test" builds before running jest)`);
  }
  outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slotproxy-bench-smoke-'));
  repoMarkdownBefore = repoMarkdownMtime();
  result = await runBench(['--quick', '--out', outDir]);
}, RUN_TIMEOUT_MS + 30_000);

afterAll(() => {
  if (outDir !== '') fs.rmSync(outDir, { recursive: true, force: true });
});

describe('npm run bench -- --quick', () => {
  test('exits 0', () => {
    if (result.code !== 0) throw new Error(`bench exited with ${String(result.code)}\n${transcript()}`);
  });

  test('prints one row per target for the quick shape, in order, with the expected columns', () => {
    const { header, rows } = shapeTable(result.stdout, QUICK_SHAPE);
    expect(header).toEqual(HEADERS);
    expect(rows.map((r) => r[0])).toEqual(TARGETS);
    for (const row of rows) expect(row).toHaveLength(HEADERS.length);
    // --quick runs exactly one shape.
    expect(result.stdout.match(/^### /gm)).toHaveLength(1);
  });

  test('ops/s are numbers > 0 for redis-server direct, twemproxy, both Node floors and slotproxy cluster', () => {
    const { rows } = shapeTable(result.stdout, QUICK_SHAPE);
    for (const name of MEASURED) {
      const row = rows.find((r) => r[0] === name);
      if (row === undefined) throw new Error(`no row for ${name}\n${transcript()}`);
      if (name === 'twemproxy' && /not installed/.test(row[1])) {
        throw new Error(`twemproxy is not installed: run "SLOTPROXY_NEED_NUTCRACKER=1 bash scripts/setup.sh" (row: ${row[1]})`);
      }
      for (const cell of row.slice(1, 4)) {
        if (!/^\d+(\.\d+)?$/.test(cell) || !(Number(cell) > 0)) throw new Error(`${name}: "${cell}" is not a positive ops/s\n${transcript()}`);
      }
      expect(row[4]).toMatch(/^\d+\.\d{3}$/); // p50 ms
      expect(row[5]).toMatch(/^\d+\.\d{3}$/); // p99 ms
      expect(row[6]).toMatch(/^\d+\.\d\dx$/); // vs direct
      expect(row[7]).toMatch(/^\d+\.\d\dx$/); // vs twemproxy
    }
  });

  test('ring mode and the --workers scaling row either have numbers or say why not', () => {
    const { rows } = shapeTable(result.stdout, QUICK_SHAPE);
    for (const name of ['slotproxy ring', 'slotproxy cluster --workers 2']) {
      const row = rows.find((r) => r[0] === name);
      if (row === undefined) throw new Error(`no row for ${name}`);
      const measured = row.slice(1, 4).every((c) => /^\d+(\.\d+)?$/.test(c) && Number(c) > 0);
      const explained = /not implemented|not available yet|skipped/.test(row[1]);
      if (!measured && !explained) throw new Error(`${name}: neither numbers nor a reason: ${row.join(' | ')}\n${transcript()}`);
    }
  });

  test('reports CPU per request for the proxies and skips the memory test', () => {
    expect(result.stdout).toMatch(/^\| twemproxy\s+\| -c 50 -P 1 \|\s+\d+\.\d\d \|/m);
    expect(result.stdout).toMatch(/^\| slotproxy cluster\s+\| -c 50 -P 1 \|\s+\d+\.\d\d \|/m);
    expect(result.stdout).toContain('## Memory\n\nNot run (--quick).');
  });

  test('writes BENCHMARKS.md and BENCHMARKS.svg to --out, not to the repository', () => {
    expect(fs.readdirSync(outDir).sort()).toEqual(['BENCHMARKS.md', 'BENCHMARKS.svg']);
    const md = fs.readFileSync(path.join(outDir, 'BENCHMARKS.md'), 'utf8');
    for (const heading of ['# slotproxy benchmarks', '## Machine', '## Throughput and latency', `### ${QUICK_SHAPE}`, '## Proxy cost', '## Memory', '## Command lines', '## What moved the numbers, and where the time goes']) {
      expect(md).toContain(`${heading}\n`);
    }
    expect(md).toContain('![ops/s per target and shape](BENCHMARKS.svg)');
    const svg = fs.readFileSync(path.join(outDir, 'BENCHMARKS.svg'), 'utf8');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    // One legend entry per measured target, and a bar per target and test.
    for (const name of MEASURED) expect(svg).toContain(`class="legend">${name}</text>`);
    expect(svg.match(/<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+" fill="#[0-9a-f]{6}"><title>/g)?.length).toBeGreaterThanOrEqual(MEASURED.length * 3);
    expect(repoMarkdownMtime()).toBe(repoMarkdownBefore);
    expect(result.stdout).toContain(`wrote ${path.join(outDir, 'BENCHMARKS.md')}`);
  });

  test('leaves none of the proxies it started running', () => {
    const pids = [...result.stderr.matchAll(/ready on 127\.0\.0\.1:\d+ \(pid (\d+)\)/g)].map((m) => Number(m[1]));
    expect(pids.length).toBeGreaterThanOrEqual(2); // twemproxy and slotproxy cluster at least
    const alive = pids.filter((pid) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    });
    expect(alive).toEqual([]);
  });
});
