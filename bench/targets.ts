// The things benchmarked: redis-server itself, twemproxy over three standalone nodes, slotproxy
// in ring mode over the same nodes, slotproxy in cluster mode over a 3-master cluster, and the
// latter with Node cluster workers. Proxies run as separate processes, so their RSS and CPU time
// can be read from /proc exactly as for twemproxy.

import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { RedisCluster } from '../cmd/sandbox/redis-cluster';
import { RedisNode, RedisStartError } from '../cmd/sandbox/redis-node';
import { StandaloneNodes } from '../cmd/sandbox/standalone-nodes';
import { sendCommand } from '../cmd/sandbox/resp-client';
import { freePort, freePorts } from '../cmd/sandbox/ports';
import { ManagedProcess, findExecutable, findRedisExecutable } from './children';
import { NODE_FLAGS } from '../cmd/node-flags';
import { SETTLE_AFTER_MS } from '../cmd/settle-heap';

export const TARGET_IDS = ['direct', 'twemproxy', 'floor', 'ring', 'ring-baseline', 'floor-cluster', 'cluster', 'cluster-baseline', 'workers'] as const;
export type TargetId = (typeof TARGET_IDS)[number];

/** slotproxy from another checkout (`--baseline DIR`), each beside this build's row: before/after in one run. */
export const BASELINE_IDS: readonly TargetId[] = ['ring-baseline', 'cluster-baseline'];

export const TARGET_LABELS: Record<TargetId, string> = {
  direct: 'redis-server direct',
  twemproxy: 'twemproxy',
  floor: 'Node floor (multiplexed, 3 nodes)',
  ring: 'slotproxy ring',
  'ring-baseline': 'slotproxy ring (baseline)',
  'floor-cluster': 'Node floor (multiplexed, cluster)',
  cluster: 'slotproxy cluster',
  'cluster-baseline': 'slotproxy cluster (baseline)',
  workers: 'slotproxy cluster --workers 2',
};

/** Workers for the scaling row, and the cores it needs: the workers, redis-benchmark and the redis-servers. */
export const SCALING_WORKERS = 2;
export const SCALING_MIN_CORES = 4;

const READY_TIMEOUT_MS = 20_000;

/**
 * How long after a proxy starts its idle RSS is read: past slotproxy's start-up settling
 * (cmd/settle-heap.ts), so that a baseline is not taken on one side of it and the next sample on
 * the other.
 */
export const IDLE_SAMPLE_AFTER_MS = SETTLE_AFTER_MS + 2_000;
const START_ATTEMPTS = 3;

/** The target cannot run here (not implemented, not installed, too few cores): its row says why. */
export class TargetUnavailable extends Error {
  override name = 'TargetUnavailable';
}

/** The Redis processes behind the targets, started once and shared by every round. */
export interface Backends {
  direct: RedisNode;
  standalone: StandaloneNodes;
  cluster: RedisCluster;
}

export interface RunningTarget {
  id: TargetId;
  port: number;
  /** The proxy process (whose tree is measured); null for redis-server direct. */
  proc: ManagedProcess | null;
  stop(): Promise<void>;
}

/** How each proxy was started, for the report's "command lines" section. */
export interface LaunchRecord {
  id: TargetId;
  command: string;
  config: string;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function startBackends(): Promise<Backends> {
  // allSettled, not all: if one part fails, the others are stopped only after they finished starting.
  const [direct, standalone, cluster] = await Promise.allSettled([
    startDirectNode(),
    StandaloneNodes.start(3),
    RedisCluster.start({ masters: 3, replicasPerMaster: 0 }),
  ]);
  if (direct.status === 'fulfilled' && standalone.status === 'fulfilled' && cluster.status === 'fulfilled') {
    return { direct: direct.value, standalone: standalone.value, cluster: cluster.value };
  }
  await Promise.allSettled([
    direct.status === 'fulfilled' ? direct.value.destroy() : undefined,
    standalone.status === 'fulfilled' ? standalone.value.stop() : undefined,
    cluster.status === 'fulfilled' ? cluster.value.stop() : undefined,
  ]);
  const failed = [direct, standalone, cluster].find((r): r is PromiseRejectedResult => r.status === 'rejected');
  throw failed?.reason ?? new Error('startBackends: failed');
}

export async function stopBackends(b: Backends): Promise<void> {
  await Promise.allSettled([b.direct.destroy(), b.standalone.stop(), b.cluster.stop()]);
}

async function startDirectNode(): Promise<RedisNode> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await RedisNode.start({ port: await freePort() });
    } catch (err) {
      // Another process may take the free port before redis-server binds it.
      if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= START_ATTEMPTS) throw err;
    }
  }
}

/**
 * How long a FLUSHALL between rounds may take: on a machine others load heavily (load average 20 on
 * 2 cores), a node holding a round's keys took longer than sendCommand's default 5 s, and the run died.
 */
const FLUSH_TIMEOUT_MS = 60_000;

/** FLUSHALL on every node, so every round starts from the same (empty) data set. */
export async function flushBackends(b: Backends): Promise<void> {
  await Promise.all([b.direct, ...b.standalone.nodes, ...b.cluster.nodes].map((n) => sendCommand(n.port, ['FLUSHALL'], { host: n.host, timeoutMs: FLUSH_TIMEOUT_MS })));
}

// ---------------------------------------------------------------------------
// Proxy processes.

/** This build's slotproxy, or the one built in checkout `baselineDir`. */
function slotproxyScript(baselineDir: string | null = null): string {
  // dist/bench/run.js -> dist/cmd/slotproxy.js
  const file = baselineDir === null ? path.resolve(__dirname, '..', 'cmd', 'slotproxy.js') : path.resolve(baselineDir, 'dist', 'cmd', 'slotproxy.js');
  if (!fs.existsSync(file)) throw new Error(`${file} is missing; run "npm run build" first`);
  return file;
}

export function nutcrackerBin(): string | null {
  return findExecutable(process.env.SLOTPROXY_NUTCRACKER ?? 'nutcracker');
}

/** True once the target answers PING with PONG. */
async function answersPing(port: number): Promise<boolean> {
  try {
    return (await sendCommand(port, ['PING'], { timeoutMs: 1_000 })) === 'PONG';
  } catch {
    return false;
  }
}

function tail(text: string, lines = 6): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}

/**
 * Starts a proxy on a fresh free port (`launch` builds its command for that port) and waits for
 * PONG. An early exit throws with the proxy's own output; a lost port race is retried.
 */
export async function startProxy(
  name: string,
  launch: (port: number) => Promise<{ bin: string; args: string[] }>,
  readLog: () => Promise<string>,
): Promise<{ proc: ManagedProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const { bin, args } = await launch(port);
    const proc = ManagedProcess.start(bin, args);
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (!proc.running) {
        const output = tail(`${proc.stderr}\n${proc.stdout}\n${await readLog()}`);
        if (/address already in use|EADDRINUSE/i.test(output) && attempt < START_ATTEMPTS) break;
        throw new Error(`${name} ${proc.describeExit()} before answering PING:\n${output}`);
      }
      if (await answersPing(port)) return { proc, port };
      if (Date.now() >= deadline) {
        await proc.stop();
        throw new Error(`${name} did not answer PING on port ${port} within ${READY_TIMEOUT_MS}ms:\n${tail(proc.stderr)}`);
      }
      await sleep(50);
    }
  }
}

export function slotproxyClusterConfig(port: number, seeds: readonly string[]): string {
  return ['listen: 127.0.0.1:' + String(port), 'mode: cluster', 'cluster:', `  seeds: [${seeds.join(', ')}]`, 'crossSlot: split', 'log:', '  level: warn', ''].join('\n');
}

const RING_NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];

/** Same hash, tag and node names as the twemproxy pool, so both put every key on the same node. */
function slotproxyRingConfig(port: number, nodes: readonly string[]): string {
  const lines = ['listen: 127.0.0.1:' + String(port), 'mode: ring', 'ring:', '  hash: fnv1a_64', '  hashTag: "{}"', '  nodes:'];
  nodes.forEach((addr, i) => lines.push(`    - { name: ${RING_NAMES[i] ?? `n${i}`}, addr: ${addr}, weight: 1 }`));
  // Room for the many-clients test's 10,000 connections (bench/client-cost.ts), as twemproxy has.
  lines.push('crossSlot: split', 'limits:', '  maxClients: 20000', 'log:', '  level: warn', '');
  return lines.join('\n');
}

function nutcrackerConfig(port: number, nodes: readonly string[]): string {
  const lines = [
    'bench:',
    `  listen: 127.0.0.1:${port}`,
    '  hash: fnv1a_64',
    '  distribution: ketama',
    '  redis: true',
    '  hash_tag: "{}"',
    // Never take a node out of the ring mid-run: that would move keys and change the work done.
    '  auto_eject_hosts: false',
    // One connection per server, as twemproxy is normally run; slotproxy uses its default lanes.
    '  server_connections: 1',
    '  servers:',
  ];
  nodes.forEach((addr, i) => lines.push(`   - ${addr}:1 ${RING_NAMES[i] ?? `n${i}`}`));
  lines.push('');
  return lines.join('\n');
}

function execText(bin: string, args: string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: 10_000, encoding: 'utf8' }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`));
  });
}

/** Whether this build of slotproxy has `start --workers` (the scaling row needs it). */
export async function slotproxyHasWorkersFlag(): Promise<boolean> {
  const help = await execText(process.execPath, [slotproxyScript(), 'start', '--help']);
  return /--workers\b/.test(help);
}

export class TargetLauncher {
  readonly launches = new Map<TargetId, LaunchRecord>();

  constructor(
    private readonly backends: Backends,
    private readonly tmpDir: string,
    /** A checkout whose dist/ is built (`--baseline DIR`), for the baseline rows. */
    private readonly baselineDir: string | null = null,
  ) {}

  /** Starts one target, or throws TargetUnavailable saying why it cannot run here. */
  async start(id: TargetId): Promise<RunningTarget> {
    switch (id) {
      case 'direct':
        return { id, port: this.backends.direct.port, proc: null, stop: async () => undefined };
      case 'twemproxy':
        return this.startTwemproxy();
      case 'floor':
        return this.startFloor(id, this.backends.standalone.addresses);
      case 'floor-cluster':
        return this.startFloor(id, ['--cluster', this.backends.cluster.seeds[0]]);
      case 'ring':
        return this.startSlotproxy(id, (port) => slotproxyRingConfig(port, this.backends.standalone.addresses), []);
      case 'cluster':
        return this.startSlotproxy(id, (port) => slotproxyClusterConfig(port, this.backends.cluster.seeds), []);
      case 'ring-baseline':
      case 'cluster-baseline': {
        if (this.baselineDir === null) throw new TargetUnavailable('not run: needs --baseline DIR');
        const config = id === 'ring-baseline' ? (port: number) => slotproxyRingConfig(port, this.backends.standalone.addresses) : (port: number) => slotproxyClusterConfig(port, this.backends.cluster.seeds);
        return this.startSlotproxy(id, config, [], this.baselineDir);
      }
      case 'workers': {
        if (!(await slotproxyHasWorkersFlag())) throw new TargetUnavailable('not available yet (--workers not implemented)');
        const cores = os.availableParallelism();
        if (cores < SCALING_MIN_CORES) {
          throw new TargetUnavailable(`skipped: ${cores} cores here, the scaling row needs ${SCALING_MIN_CORES} (${SCALING_WORKERS} workers, redis-benchmark, redis-servers)`);
        }
        return this.startSlotproxy(id, (port) => slotproxyClusterConfig(port, this.backends.cluster.seeds), ['--workers', String(SCALING_WORKERS)]);
      }
    }
  }

  private async writeFile(name: string, text: string): Promise<string> {
    const file = path.join(this.tmpDir, name);
    await fsp.writeFile(file, text);
    return file;
  }

  private async startSlotproxy(id: TargetId, config: (port: number) => string, extraArgs: string[], baselineDir: string | null = null): Promise<RunningTarget> {
    const script = slotproxyScript(baselineDir);
    const started = await startProxy(
      TARGET_LABELS[id],
      async (port) => {
        const text = config(port);
        const file = await this.writeFile(`slotproxy-${id}.yaml`, text);
        const args = [...NODE_FLAGS, script, 'start', '-c', file, ...extraArgs];
        const dist = baselineDir === null ? 'dist' : path.join(baselineDir, 'dist');
        this.launches.set(id, { id, command: `node ${NODE_FLAGS.join(' ')} ${dist}/cmd/slotproxy.js start -c slotproxy-${id}.yaml ${extraArgs.join(' ')}`.trim(), config: text });
        return { bin: process.execPath, args };
      },
      async () => '',
    );
    return { id, port: started.port, proc: started.proc, stop: async () => void (await started.proc.stop()) };
  }

  /**
   * bench/mux-floor.ts: the least a multiplexing Node proxy does, in front of the three standalone
   * nodes twemproxy and the ring front (`floor`), or of the cluster slotproxy cluster fronts
   * (`floor-cluster`), so each slotproxy row has a floor on its own back ends.
   */
  private async startFloor(id: 'floor' | 'floor-cluster', backends: readonly string[]): Promise<RunningTarget> {
    const script = path.join(__dirname, 'mux-floor.js');
    const started = await startProxy(
      TARGET_LABELS[id],
      async (port) => {
        this.launches.set(id, { id, command: `node ${NODE_FLAGS.join(' ')} dist/bench/mux-floor.js PORT ${backends.join(' ')}`, config: '' });
        return { bin: process.execPath, args: [...NODE_FLAGS, script, String(port), ...backends] };
      },
      async () => '',
    );
    return { id, port: started.port, proc: started.proc, stop: async () => void (await started.proc.stop()) };
  }

  private async startTwemproxy(): Promise<RunningTarget> {
    const bin = nutcrackerBin();
    if (bin === null) {
      throw new TargetUnavailable('nutcracker not installed (SLOTPROXY_NEED_NUTCRACKER=1 bash scripts/setup.sh installs it)');
    }
    const logFile = path.join(this.tmpDir, 'nutcracker.log');
    const started = await startProxy(
      TARGET_LABELS.twemproxy,
      async (port) => {
        const text = nutcrackerConfig(port, this.backends.standalone.addresses);
        const file = await this.writeFile('nutcracker.yml', text);
        // The stats port must be free too, or nutcracker exits; -a keeps it on loopback.
        const [statsPort] = await freePorts(1);
        const args = ['-c', file, '-s', String(statsPort), '-a', '127.0.0.1', '-o', logFile];
        this.launches.set('twemproxy', { id: 'twemproxy', command: `nutcracker -c nutcracker.yml -s STATS_PORT -a 127.0.0.1 -o nutcracker.log`, config: text });
        return { bin, args };
      },
      () => fsp.readFile(logFile, 'utf8').catch(() => ''),
    );
    return { id: 'twemproxy', port: started.port, proc: started.proc, stop: async () => void (await started.proc.stop()) };
  }
}

/** `redis-server --version` etc., for the machine section; never throws. */
export async function toolVersions(): Promise<{ redis: string; redisBenchmark: string; nutcracker: string }> {
  const first = (s: string): string => s.trim().split('\n')[0] ?? '';
  const redisBin = findRedisExecutable('redis-server');
  const benchBin = findRedisExecutable('redis-benchmark');
  const nut = nutcrackerBin();
  const [redis, redisBenchmark, nutcracker] = await Promise.all([
    redisBin === null ? 'not installed' : execText(redisBin, ['--version']).then(first),
    benchBin === null ? 'not installed' : execText(benchBin, ['--version']).then(first),
    // nutcracker prints "This is nutcracker-0.5.0".
    nut === null ? 'not installed' : execText(nut, ['--version']).then((t) => first(t).replace(/^This is /, '')),
  ]);
  return { redis, redisBenchmark, nutcracker };
}

/**
 * Null when the target answers SET, GET and a tagged MGET correctly, else what went wrong. Run
 * before timing anything: redis-benchmark would happily time a target that answers with errors.
 */
export async function preflightProblem(port: number): Promise<string | null> {
  try {
    const set = await sendCommand(port, ['SET', '{t}k:preflight', 'x']);
    if (set !== 'OK') return `SET answered ${JSON.stringify(set)}`;
    const get = await sendCommand(port, ['GET', '{t}k:preflight']);
    if (get !== 'x') return `GET answered ${JSON.stringify(get)}`;
    const mget = await sendCommand(port, ['MGET', '{t}k:preflight', '{t}k:absent']);
    if (JSON.stringify(mget) !== JSON.stringify(['x', null])) return `MGET answered ${JSON.stringify(mget)}`;
    return null;
  } catch (err) {
    return errorMessage(err);
  }
}
