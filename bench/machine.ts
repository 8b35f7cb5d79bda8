// What the numbers were measured on: without it, a BENCHMARKS.md cannot be compared with another.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { toolVersions } from './targets';

export interface MachineInfo {
  date: string;
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  /** 1-minute load average when the run started: other work on the machine skews every number. */
  loadAverage: number;
  node: string;
  redisServer: string;
  redisBenchmark: string;
  nutcracker: string;
  slotproxy: string;
}

function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    if (m !== null) return m[1].trim();
  } catch {
    // Not Linux: os.cpus() below.
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

/** package.json's version plus the git commit, "+dirty" when the work tree has changes. */
function slotproxyVersion(repoRoot: string): string {
  let version = 'unknown';
  try {
    const pkg: unknown = JSON.parse(fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'));
    if (typeof pkg === 'object' && pkg !== null && 'version' in pkg && typeof pkg.version === 'string') version = pkg.version;
  } catch {
    // Keep 'unknown'.
  }
  try {
    const git = (args: string[]): string => execFileSync('git', ['-C', repoRoot, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const rev = git(['rev-parse', '--short', 'HEAD']);
    const dirty = git(['status', '--porcelain']) !== '';
    return `${version} (${rev}${dirty ? '+dirty' : ''})`;
  } catch {
    return version;
  }
}

export async function machineInfo(repoRoot: string): Promise<MachineInfo> {
  const tools = await toolVersions();
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    cpuModel: cpuModel(),
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    loadAverage: Math.round(os.loadavg()[0] * 100) / 100,
    node: process.version,
    redisServer: tools.redis,
    redisBenchmark: tools.redisBenchmark,
    nutcracker: tools.nutcracker,
    slotproxy: slotproxyVersion(repoRoot),
  };
}
