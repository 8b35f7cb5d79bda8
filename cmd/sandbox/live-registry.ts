// The registry of redis-server pids and temp dirs the sandbox has live: one per OS process,
// shared by every module instance (each jest test file has its own), and SIGKILLed/removed
// synchronously when the host Node process exits, so a crashed or killed test run does not
// leave redis-servers behind (redis-node.ts adds a parent-death signal where setpriv exists).

import fs from 'node:fs';
import vm from 'node:vm';

interface LiveRegistry {
  readonly brand: 'slotproxy.sandbox.registry.v2';
  readonly pids: Set<number>;
  /** Temp dirs we created and have not removed yet; removed at exit too. */
  readonly dirs: Set<string>;
  readonly killAll: () => void;
}

const REGISTRY_KEY = Symbol.for('slotproxy.sandbox.liveRedisPids');

/**
 * The process object whose 'exit' event really fires. Jest gives each test
 * file a copy of `process` whose events never fire, so we reach for the host
 * realm's one; outside jest this is just `process`.
 */
function hostProcess(): NodeJS.Process {
  try {
    const candidate: unknown = vm.runInThisContext('process');
    if (
      typeof candidate === 'object' &&
      candidate !== null &&
      'on' in candidate &&
      'kill' in candidate &&
      'pid' in candidate
    ) {
      return candidate as NodeJS.Process;
    }
  } catch {
    // vm unavailable in this environment: fall through.
  }
  return process;
}

function isRegistry(value: unknown): value is LiveRegistry {
  // Duck-typed: the registry may come from another jest test file's realm.
  return (
    typeof value === 'object' &&
    value !== null &&
    'brand' in value &&
    value.brand === 'slotproxy.sandbox.registry.v2'
  );
}

export function registry(): LiveRegistry {
  const host = hostProcess();
  const existing: unknown = Reflect.get(host, REGISTRY_KEY);
  if (isRegistry(existing)) return existing;
  const pids = new Set<number>();
  const dirs = new Set<string>();
  const killAll = (): void => {
    for (const pid of pids) {
      try {
        host.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    pids.clear();
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    dirs.clear();
  };
  const created: LiveRegistry = { brand: 'slotproxy.sandbox.registry.v2', pids, dirs, killAll };
  // One registry and one 'exit' listener per OS process, however many test
  // files (each with its own module instance) load this module.
  Reflect.set(host, REGISTRY_KEY, created);
  host.on('exit', killAll);
  return created;
}

/** SIGKILLs every redis-server started by this module that is still running and removes its temp dirs. Synchronous. */
export function killAllRedisSync(): void {
  registry().killAll();
}

/** Pids of redis-servers started by this module that have not exited yet. */
export function liveRedisPids(): number[] {
  return [...registry().pids];
}
