// Memory and CPU time of a process and its descendants, read from Linux's /proc.
//
// The benchmark measures proxies from outside (as separate processes) so that what it reports is
// what an operator would see in `top`, and so the numbers include everything the proxy's runtime
// does (GC, JIT), not just what the proxy's own code thinks it allocated.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** Clock ticks per second for /proc/<pid>/stat's utime and stime; 100 on every Linux we know. */
function readClockTicks(): number {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    if (Number.isInteger(n) && n > 0) return n;
  } catch {
    // getconf missing: fall back to the kernel's USER_HZ default.
  }
  return 100;
}

const CLOCK_TICKS = readClockTicks();

function readText(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null; // the process exited between listing and reading: count it as gone
  }
}

/** Direct children of `pid`, over all its threads (a child is listed under the thread that forked it). */
function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    const text = readText(`/proc/${pid}/task/${tid}/children`);
    if (text === null) continue;
    for (const word of text.trim().split(/\s+/)) {
      const child = Number(word);
      if (word !== '' && Number.isInteger(child)) out.push(child);
    }
  }
  return out;
}

/** `pid` and all its descendants that are alive now (Node cluster workers, for instance). */
export function processTree(pid: number): number[] {
  const seen = new Set<number>();
  const pending = [pid];
  while (pending.length > 0) {
    const next = pending.pop();
    if (next === undefined || seen.has(next)) continue;
    if (!fs.existsSync(`/proc/${next}`)) continue;
    seen.add(next);
    pending.push(...childrenOf(next));
  }
  return [...seen];
}

/** A kB field of /proc/<pid>/status in bytes, or 0 when the process is gone. */
function statusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const text = readText(`/proc/${pid}/status`);
  if (text === null) return 0;
  const m = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]) * 1024;
}

/** utime + stime of one process in seconds, or 0 when it is gone. */
function cpuSecondsOf(pid: number): number {
  const text = readText(`/proc/${pid}/stat`);
  if (text === null) return 0;
  // The command name (field 2) may contain spaces and parentheses, so split after its last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state), so utime (14) and stime (15) are at 11 and 12.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

export interface TreeStats {
  /** Resident set size now, summed over the tree. */
  rssBytes: number;
  /** Peak resident set size (VmHWM) summed over the tree: an upper bound of the tree's true peak. */
  hwmBytes: number;
  /** User + system CPU time of the live processes of the tree. */
  cpuSeconds: number;
  processes: number;
}

export function treeStats(pid: number): TreeStats {
  const pids = processTree(pid);
  let rssBytes = 0;
  let hwmBytes = 0;
  let cpuSeconds = 0;
  for (const p of pids) {
    rssBytes += statusBytes(p, 'VmRSS');
    hwmBytes += statusBytes(p, 'VmHWM');
    cpuSeconds += cpuSecondsOf(p);
  }
  return { rssBytes, hwmBytes, cpuSeconds, processes: pids.length };
}

/**
 * Samples a process tree's RSS every `intervalMs` until stopped and keeps the maximum. VmHWM alone
 * cannot give the peak of one benchmark run, because it covers the process's whole life.
 */
export class RssSampler {
  private peak = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    intervalMs = 100,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  private sample(): void {
    this.peak = Math.max(this.peak, treeStats(this.pid).rssBytes);
  }

  /** Stops sampling and returns the highest RSS seen, including one last sample. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peak;
  }
}
