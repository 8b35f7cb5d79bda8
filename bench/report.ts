// BENCHMARKS.md and the console summary, rendered from BenchResults. The console shows the same
// markdown tables as the file, so what a person sees in the terminal is what gets committed.

import { BenchResults, MemoryRow, Row, ShapeSummary, summarize } from './results';
import { KEYSPACE, MGET_KEYS, VALUE_BYTES, shapeLabel } from './redis-benchmark';
import { MANY_CLIENTS_SHAPE } from './options';
import { DEFAULT_UNREAD_PIPELINE } from './memory-test';
import { TargetId } from './targets';

const DASH = '—';

export const MIB = 1024 * 1024;

function mib(bytes: number | null): string {
  return bytes === null ? DASH : (bytes / MIB).toFixed(1);
}

function num(n: number | null, digits: number): string {
  return n === null ? DASH : n.toFixed(digits);
}

function times(n: number | null): string {
  return n === null ? DASH : `${n.toFixed(2)}x`;
}

/** A markdown table with padded columns, so it reads as well in a terminal as rendered. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], rightAlign: readonly boolean[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length), 3));
  const pad = (cell: string, i: number): string => (rightAlign[i] === true ? cell.padStart(widths[i]) : cell.padEnd(widths[i]));
  const line = (cells: readonly string[]): string => `| ${headers.map((_, i) => pad(cells[i] ?? '', i)).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (rightAlign[i] === true ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(headers), rule, ...rows.map(line)].join('\n');
}

function throughputTable(r: BenchResults, s: ShapeSummary): string {
  const headers = ['Target', ...r.tests.map((t) => `${t} ops/s`), 'p50 ms', 'p99 ms', 'vs direct', 'vs twemproxy'];
  const rows = s.rows.map((row): string[] => {
    if (row.target.unavailable !== null) {
      return [row.target.label, row.target.unavailable, ...Array.from({ length: headers.length - 2 }, () => DASH)];
    }
    const cells = r.tests.map((t) => {
      const c = row.cells.get(t);
      return c === undefined ? DASH : c.rps !== null ? c.rps.toFixed(0) : `error: ${c.error ?? '?'}`;
    });
    return [row.target.label, ...cells, num(row.p50Ms, 3), num(row.p99Ms, 3), times(row.vsDirect), times(row.vsTwemproxy)];
  });
  return table(headers, rows, headers.map((_, i) => i > 0));
}

function latencyTable(r: BenchResults, s: ShapeSummary): string {
  const headers = ['Target', ...r.tests.map((t) => `${t} p50 / p99 ms`)];
  const rows = s.rows
    .filter((row) => row.target.unavailable === null)
    .map((row) => [
      row.target.label,
      ...r.tests.map((t) => {
        const c = row.cells.get(t);
        return c === undefined || c.p50Ms === null ? DASH : `${num(c.p50Ms, 3)} / ${num(c.p99Ms, 3)}`;
      }),
    ]);
  return table(headers, rows, headers.map((_, i) => i > 0));
}

function proxies(summary: ShapeSummary): Row[] {
  return summary.rows.filter((row) => row.target.isProxy && row.target.unavailable === null);
}

function costTable(summaries: readonly ShapeSummary[]): string {
  const headers = ['Proxy', 'Shape', 'CPU µs/request', 'vs twemproxy', 'CPU s per round', 'peak RSS MiB'];
  const rows: string[][] = [];
  for (const s of summaries) {
    const twem = s.rows.find((row) => row.target.id === 'twemproxy')?.cpuUsPerRequest ?? null;
    for (const row of proxies(s)) {
      const us = row.cpuUsPerRequest;
      rows.push([
        row.target.label,
        shapeLabel(s.shape),
        num(us, 2),
        us !== null && twem !== null && twem > 0 ? times(us / twem) : DASH,
        num(row.cpuSecondsPerRound, 2),
        mib(row.peakRssBytes),
      ]);
    }
  }
  return table(headers, rows, headers.map((_, i) => i > 1));
}

function lifetimeTable(r: BenchResults): string {
  const headers = ['Proxy', 'idle RSS MiB', 'peak RSS (VmHWM) MiB', 'CPU s total'];
  const rows = r.targets
    .filter((t) => t.isProxy && t.unavailable === null)
    .map((t) => [t.label, mib(t.idleRssBytes), mib(t.hwmBytes), num(t.cpuSecondsTotal, 2)]);
  return table(headers, rows, headers.map((_, i) => i > 0));
}

export interface BoundCheck {
  manyClients: boolean | null;
  unread: boolean | null;
}

/** Whether a proxy's RSS stayed within idle + its stated headroom in both memory shapes. */
export function boundCheck(m: MemoryRow): BoundCheck {
  const h = m.headroomBytes;
  if (h === null) return { manyClients: null, unread: null };
  return {
    manyClients: m.manyClientsPeakBytes === null || m.benchIdleBytes === null ? null : m.manyClientsPeakBytes <= m.benchIdleBytes + h,
    unread: m.unread === null ? null : m.unread.peakRssBytes <= m.unread.idleRssBytes + h,
  };
}

function yesNo(v: boolean | null): string {
  return v === null ? DASH : v ? 'yes' : 'no';
}

function memoryTable(rows: readonly MemoryRow[]): string {
  const manyLabel = shapeLabel(MANY_CLIENTS_SHAPE);
  const headers = [
    'Proxy',
    `peak RSS MiB, ${manyLabel}`,
    'idle RSS MiB (unread test)',
    'peak RSS MiB, unread pipeline',
    'GETs written',
    'writes stalled',
    'RSS MiB after client left',
    'bound',
    `within bound (${manyLabel} / unread)`,
  ];
  const out = rows.map((m): string[] => {
    const u = m.unread;
    const check = boundCheck(m);
    return [
      m.label,
      mib(m.manyClientsPeakBytes),
      u === null ? DASH : mib(u.idleRssBytes),
      u === null ? (m.error !== null ? `error: ${m.error}` : DASH) : u.capped ? `> ${mib(u.peakRssBytes)} (stopped at the cap)` : mib(u.peakRssBytes),
      u === null ? DASH : String(u.commandsWritten),
      u === null ? DASH : u.stalled ? `yes, after ${u.seconds.toFixed(1)} s` : 'no',
      u === null ? DASH : mib(u.afterRssBytes),
      m.headroomBytes === null ? 'none (not bounded by config)' : `idle + ${mib(m.headroomBytes)} MiB`,
      m.headroomBytes === null ? DASH : `${yesNo(check.manyClients)} / ${yesNo(check.unread)}`,
    ];
  });
  return table(headers, out, headers.map((_, i) => i > 0 && i < 7));
}

function memorySection(r: BenchResults, headroomNote: string): string {
  if (r.memory === null) return '## Memory\n\nNot run (--quick).';
  const u = DEFAULT_UNREAD_PIPELINE;
  return [
    '## Memory',
    '',
    `Two shapes: the benchmark's \`${shapeLabel(MANY_CLIENTS_SHAPE)}\` runs (peak RSS sampled every 100 ms, highest over the rounds), and a fresh proxy ` +
      `facing one client that pipelines ${u.commands.toLocaleString('en-US')} \`GET k\` (k holds ${VALUE_BYTES} bytes, so each reply is 39 bytes) and never reads a reply. ` +
      `The client stops writing when a write waits ${u.stallMs / 1000} s for \`drain\` (the proxy stopped reading it) or after ${u.maxMs / 1000} s; ` +
      `RSS is then sampled until it has not grown for ${u.settleMs / 1000} s. A proxy whose RSS passes ${mib(u.capBytes)} MiB is cut off there ` +
      '(so the test cannot exhaust the machine); its peak is then a lower bound.',
    '',
    headroomNote,
    '',
    memoryTable(r.memory),
  ].join('\n');
}

function machineSection(r: BenchResults): string {
  const m = r.machine;
  return [
    '## Machine',
    '',
    table(
      ['', ''],
      [
        ['Date', m.date],
        ['CPU', `${m.cpuModel}, ${m.cores} cores`],
        ['Memory', `${m.memoryGiB} GiB`],
        ['Kernel', m.kernel],
        ['Load average at start', `${m.loadAverage} (1 min)`],
        ['Node', m.node],
        ['redis-server', m.redisServer],
        ['redis-benchmark', m.redisBenchmark],
        ['twemproxy', m.nutcracker],
        ['slotproxy', m.slotproxy],
      ],
    ),
  ].join('\n');
}

/** Ports are picked at run time; the report shows PORT instead. */
function portless(text: string): string {
  return text.replace(/127\.0\.0\.1:\d+/g, '127.0.0.1:PORT');
}

function commandsSection(r: BenchResults): string {
  const parts = [
    '## Command lines',
    '',
    'Every target runs on 127.0.0.1 with ports picked at run time (PORT below). redis-server direct is one node;',
    'twemproxy, the Node floor and slotproxy ring share three standalone nodes; slotproxy cluster and the cluster floor front a 3-master cluster (no replicas).',
    'All Redis nodes run with `--save "" --appendonly no` and are flushed at the start of every round.',
    '',
    '```sh',
    ...r.benchmarkCommands,
    '```',
  ];
  for (const l of r.launches) {
    const why = r.targets.find((t) => t.id === l.id)?.unavailable ?? null;
    const name = l.id === 'twemproxy' ? 'twemproxy' : l.id === 'floor' ? 'Node floor' : l.id === 'floor-cluster' ? 'Node floor (cluster)' : `slotproxy (${l.id})`;
    parts.push('', `${name}: \`${portless(l.command)}\`${why === null ? '' : ` (not run: ${why})`}`);
    if (l.config !== '') parts.push('', '```yaml', portless(l.config.trimEnd()), '```');
  }
  return parts.join('\n');
}

function throughputSection(r: BenchResults, summaries: readonly ShapeSummary[], withLatency: boolean): string {
  const parts = [
    '## Throughput and latency',
    '',
    `Median of ${r.rounds} round(s), ${r.requests.toLocaleString('en-US')} requests per test, keyspace ${KEYSPACE.toLocaleString('en-US')} (-r), ${VALUE_BYTES}-byte values (-d). ` +
      `MGET10 is a custom command of ${MGET_KEYS} keys sharing the hash tag {t}; MGET10X and MSET10X have ${MGET_KEYS} keys in ${MGET_KEYS} slots (slotproxy splits them, \`crossSlot: split\`; twemproxy splits them natively). p50 is the median of the tests' p50s, p99 the worst test's p99; ` +
      `"vs" columns are the geometric mean over the tests of this target's ops/s over the other's.`,
  ];
  for (const s of summaries) {
    parts.push('', `### ${shapeLabel(s.shape)}`, '', throughputTable(r, s));
    if (withLatency) parts.push('', latencyTable(r, s));
    const floors = floorTable(r, s);
    if (floors !== null) parts.push('', floors);
  }
  return parts.join('\n');
}

/** Each slotproxy row and the floor on its own back ends (ring: the 3-node floor; cluster: the cluster floor). */
const FLOOR_OF: Partial<Record<TargetId, TargetId>> = { ring: 'floor', 'ring-baseline': 'floor', cluster: 'floor-cluster', 'cluster-baseline': 'floor-cluster', workers: 'floor-cluster' };

/**
 * Per test, slotproxy's ops/s over its floor's and its p99 over the floor's (goal: at least 0.9x
 * and at most 1.2x); null when no slotproxy row ran beside its floor.
 */
function floorTable(r: BenchResults, s: ShapeSummary): string | null {
  const byId = new Map(s.rows.map((row) => [row.target.id, row]));
  const rows: string[][] = [];
  for (const row of s.rows) {
    const floorId = FLOOR_OF[row.target.id];
    const floor = floorId === undefined ? undefined : byId.get(floorId);
    if (floor === undefined || row.target.unavailable !== null || floor.target.unavailable !== null) continue;
    rows.push([
      `${row.target.label} / ${floor.target.label}`,
      ...r.tests.map((t) => {
        const a = row.cells.get(t);
        const b = floor.cells.get(t);
        if (a?.rps == null || b?.rps == null || a.p99Ms === null || b.p99Ms === null || b.rps === 0 || b.p99Ms === 0) return DASH;
        return `${(a.rps / b.rps).toFixed(2)}x / ${(a.p99Ms / b.p99Ms).toFixed(2)}x`;
      }),
    ]);
  }
  if (rows.length === 0) return null;
  const headers = ['Against the floor on the same back ends', ...r.tests.map((t) => `${t} ops/s / p99`)];
  return table(headers, rows, headers.map((_, i) => i > 0));
}

function costSection(r: BenchResults, summaries: readonly ShapeSummary[]): string {
  return [
    '## Proxy cost',
    '',
    'CPU time is the proxy process tree\'s utime + stime (from /proc) across one target\'s redis-benchmark runs, divided by the requests of those runs; ' +
      'the ratio of two proxies measured in the same run is stable even when the machine is noisy. Median over rounds.',
    '',
    costTable(summaries),
    '',
    'Idle RSS is read with no client connected, 8 s after the targets started (slotproxy hands back the young generation its start-up grew after 6 s idle, cmd/settle-heap.ts); peak RSS is VmHWM over the whole run.',
    '',
    lifetimeTable(r),
  ].join('\n');
}

/** The history of the numbers (bench/NOTES.md) is linked, not copied: BENCHMARKS.md is one run. */
export function renderMarkdown(r: BenchResults, headroomNote: string, svgFile: string): string {
  const summaries = summarize(r);
  return [
    '# slotproxy benchmarks',
    '',
    `Written by \`npm run bench\` (bench/run.ts) on ${r.machine.date}${r.quick ? ' (--quick smoke run: not representative)' : ''}. ` +
      'In every round each shape runs on every target in turn (A B C A B C ...), so drift on the machine hits all targets alike. ' +
      'This is a measurement, not a test: CI times nothing.',
    '',
    machineSection(r),
    '',
    throughputSection(r, summaries, true),
    '',
    `![ops/s per target and shape](${svgFile})`,
    '',
    costSection(r, summaries),
    '',
    memorySection(r, headroomNote),
    '',
    commandsSection(r),
    '',
    '## What moved the numbers, and where the time goes',
    '',
    'The tables above are one run. What changed them from run to run, measured before and after each',
    'change, and where a request\'s time goes, are in [bench/NOTES.md](bench/NOTES.md).',
    '',
  ].join('\n');
}

/** What the terminal shows: the same tables, without the machine and command-line sections. */
export function renderConsole(r: BenchResults, headroomNote: string): string {
  const summaries = summarize(r);
  const m = r.machine;
  return [
    `slotproxy benchmark: ${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB, load ${m.loadAverage}, Node ${m.node}, ${m.redisServer.split(' ').slice(0, 3).join(' ')}, ${m.nutcracker}`,
    '',
    throughputSection(r, summaries, false),
    '',
    costSection(r, summaries),
    '',
    memorySection(r, headroomNote),
    '',
  ].join('\n');
}
