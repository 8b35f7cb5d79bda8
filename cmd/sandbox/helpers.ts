// Small process and filesystem helpers for the sandbox launcher: sleeping and timeouts,
// locating the redis-server / redis-cli binaries, reading log tails, and temp dirs that the
// live registry removes at exit if we do not.

import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { RedisTool, findExecutable, findRedisExecutable, redisBinDir } from './executables';
import { registry } from './live-registry';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves true if `promise` settles within ms, false otherwise; never leaves a timer behind. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function requireExecutable(name: string, debianPackage: string): string {
  const found = findExecutable(name);
  if (found === null) {
    throw new Error(
      `${name} not found (PATH=${process.env.PATH ?? ''}); ` +
        `run "bash scripts/setup.sh" or install the Debian package ${debianPackage}`,
    );
  }
  return found;
}

/** A Redis tool from SLOTPROXY_REDIS_BIN (or PATH when unset), or an error saying where it looked. */
export function requireRedisExecutable(tool: RedisTool, debianPackage: string): string {
  const dir = redisBinDir();
  if (dir === null) return requireExecutable(tool, debianPackage);
  const found = findRedisExecutable(tool);
  if (found === null) throw new Error(`${tool} not found in SLOTPROXY_REDIS_BIN=${dir} (nor a pointer file naming it)`);
  return found;
}

export function redisServerBin(override?: string): string {
  const named = override ?? process.env.SLOTPROXY_REDIS_SERVER;
  return named === undefined ? requireRedisExecutable('redis-server', 'redis-server') : requireExecutable(named, 'redis-server');
}

export function redisCliBin(): string {
  const named = process.env.SLOTPROXY_REDIS_CLI;
  return named === undefined ? requireRedisExecutable('redis-cli', 'redis-tools') : requireExecutable(named, 'redis-tools');
}

/** Stdio pipes are net.Sockets at run time, though typed as plain streams. */
export function unrefStream(stream: unknown): void {
  if (stream instanceof net.Socket) stream.unref();
}

export async function readTail(file: string, lines: number): Promise<string> {
  try {
    const text = await fsp.readFile(file, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export async function makeTempDir(parent?: string): Promise<string> {
  const base = parent === undefined ? os.tmpdir() : path.resolve(parent);
  await fsp.mkdir(base, { recursive: true });
  const dir = await fsp.mkdtemp(path.join(base, 'slotproxy-'));
  registry().dirs.add(dir);
  return dir;
}

export async function removeTempDir(dir: string): Promise<void> {
  await fsp.rm(dir, { recursive: true, force: true });
  registry().dirs.delete(dir);
}
