import fs from 'node:fs';
import path from 'node:path';

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Absolute path of an executable, or null: a path is checked as it is; a bare name is looked up on
 * PATH, then in the sbin folders, because Debian puts nutcracker in /usr/sbin, which is not on an
 * ordinary user's PATH.
 */
export function findExecutable(name: string): string | null {
  if (name.includes('/')) return isExecutableFile(name) ? path.resolve(name) : null;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}

/** The Redis tools the sandbox, the tests and the benches run. */
export type RedisTool = 'redis-server' | 'redis-cli' | 'redis-benchmark' | 'redis-sentinel';

/** A pointer file is at most this long: a sibling's name standing in for a symlink. */
const POINTER_MAX_BYTES = 64;

/**
 * The file a pointer chain ends at, or null. A folder copied without symlinks (the shared Redis and
 * Valkey builds) holds, under a tool's name, a non-executable file of a few bytes naming the sibling
 * that is the real binary (valkey's `redis-server` says `valkey-server`); followed a few steps.
 */
function resolvePointer(file: string): string | null {
  let current = file;
  for (let step = 0; step < 4; step++) {
    if (isExecutableFile(current)) return path.resolve(current);
    let text: string;
    try {
      if (fs.statSync(current).size > POINTER_MAX_BYTES) return null;
      text = fs.readFileSync(current, 'utf8').trim();
    } catch {
      return null;
    }
    if (text === '' || text.includes('/') || /\s/.test(text)) return null;
    current = path.join(path.dirname(current), text);
  }
  return null;
}

/** SLOTPROXY_REDIS_BIN: the folder of the Redis (or Valkey) build under test; unset means PATH's. */
export function redisBinDir(): string | null {
  const dir = process.env.SLOTPROXY_REDIS_BIN;
  return dir === undefined || dir === '' ? null : path.resolve(dir);
}

/**
 * Absolute path of a Redis tool, or null: from SLOTPROXY_REDIS_BIN's folder when it is set
 * (following pointer files), else from PATH. A sentinel may resolve to the server binary itself:
 * run it through redisSentinelCommand, which adds `--sentinel`.
 */
export function findRedisExecutable(tool: RedisTool): string | null {
  const dir = redisBinDir();
  if (dir === null) return findExecutable(tool);
  return resolvePointer(path.join(dir, tool));
}

/**
 * How to run a sentinel on `configFile`: `redis-server --sentinel` is what redis-sentinel is (the
 * flag is harmless when the binary is named redis-sentinel), and the only way when redis-sentinel is
 * a pointer to the server binary.
 */
export function redisSentinelCommand(configFile: string): { bin: string; args: string[] } | null {
  const bin = findRedisExecutable('redis-sentinel');
  return bin === null ? null : { bin, args: [configFile, '--sentinel'] };
}

/**
 * Puts symlinks named redis-server and redis-cli into `binDir`, to the tools findRedisExecutable
 * resolves, so that a shell script run with `binDir` first on PATH types the plain names and runs
 * the build under test.
 */
export function linkRedisTools(binDir: string): void {
  for (const tool of ['redis-server', 'redis-cli'] as const) {
    const target = findRedisExecutable(tool);
    if (target !== null) fs.symlinkSync(target, path.join(binDir, tool));
  }
}
