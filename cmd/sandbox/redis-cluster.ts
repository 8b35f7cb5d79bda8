// Starts and stops real redis-server processes on 127.0.0.1 for the
// `slotproxy sandbox` command, integration tests and benchmarks.
//
// Every process started here is recorded in a registry that SIGKILLs it when
// the host Node process exits, and (where util-linux `setpriv` exists) it is
// also started with a parent-death signal, so a crashed or killed test run
// does not leave redis-servers behind.

import { ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import RedisParser from 'redis-parser';
import { LOOPBACK, MAX_CLUSTER_PORT, freeClusterPorts, freePorts } from './ports';
import { findExecutable } from './executables';

export const CLUSTER_SLOTS = 16384;
const DEFAULT_READY_TIMEOUT_MS = 10_000;
const DEFAULT_CLUSTER_OK_TIMEOUT_MS = 30_000;
const DEFAULT_NODE_TIMEOUT_MS = 2_000;
const STOP_GRACE_MS = 2_000;
const LOG_TAIL_LINES = 25;
const OUTPUT_KEEP_BYTES = 8 * 1024;
/** Attempts when ports are picked automatically and another process wins the race for one. */
const PORT_RACE_ATTEMPTS = 3;

// ---------------------------------------------------------------------------
// Registry of live redis-server pids, killed synchronously on process exit.

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

function registry(): LiveRegistry {
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

// ---------------------------------------------------------------------------
// Small helpers.

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves true if `promise` settles within ms, false otherwise; never leaves a timer behind. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
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

function errorMessage(err: unknown): string {
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

function redisServerBin(override?: string): string {
  return requireExecutable(override ?? process.env.SLOTPROXY_REDIS_SERVER ?? 'redis-server', 'redis-server');
}

function redisCliBin(): string {
  return requireExecutable(process.env.SLOTPROXY_REDIS_CLI ?? 'redis-cli', 'redis-tools');
}

/** Stdio pipes are net.Sockets at run time, though typed as plain streams. */
function unrefStream(stream: unknown): void {
  if (stream instanceof net.Socket) stream.unref();
}

async function readTail(file: string, lines: number): Promise<string> {
  try {
    const text = await fsp.readFile(file, 'utf8');
    return text.trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

async function makeTempDir(parent?: string): Promise<string> {
  const base = parent === undefined ? os.tmpdir() : path.resolve(parent);
  await fsp.mkdir(base, { recursive: true });
  const dir = await fsp.mkdtemp(path.join(base, 'slotproxy-'));
  registry().dirs.add(dir);
  return dir;
}

async function removeTempDir(dir: string): Promise<void> {
  await fsp.rm(dir, { recursive: true, force: true });
  registry().dirs.delete(dir);
}

// ---------------------------------------------------------------------------
// Minimal RESP client: one connection per command, enough for PING, INFO and
// CLUSTER * without spawning redis-cli on every poll.

export type RespReply = string | number | null | RespReply[];

/** An error reply (-ERR ..., -MOVED ..., -LOADING ...) from redis. */
export class RedisReplyError extends Error {
  override name = 'RedisReplyError';
}

function toReply(value: unknown): RespReply {
  if (value === null) return null;
  if (typeof value === 'string' || typeof value === 'number') return value;
  if (Array.isArray(value)) return value.map(toReply);
  if (value instanceof Error) throw new RedisReplyError(value.message);
  throw new Error(`unexpected RESP value of type ${typeof value}`);
}

function encodeCommand(args: readonly (string | number)[]): Buffer {
  const parts: string[] = [`*${args.length}\r\n`];
  for (const arg of args) {
    const s = String(arg);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return Buffer.from(parts.join(''));
}

export interface SendCommandOptions {
  host?: string;
  timeoutMs?: number;
}

/** Sends one command over a fresh TCP connection and resolves its reply. */
export function sendCommand(
  port: number,
  args: readonly (string | number)[],
  opts: SendCommandOptions = {},
): Promise<RespReply> {
  const host = opts.host ?? LOOPBACK;
  const timeoutMs = opts.timeoutMs ?? 5_000;
  return new Promise((resolve, reject) => {
    let settled = false;
    const socket = net.connect({ host, port });
    const finish = (err: Error | null, reply: RespReply = null): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err !== null) reject(err);
      else resolve(reply);
    };
    const parser = new RedisParser({
      returnReply: (reply: unknown) => {
        try {
          finish(null, toReply(reply));
        } catch (err) {
          finish(err instanceof Error ? err : new Error(String(err)));
        }
      },
      returnError: (err: Error) => finish(new RedisReplyError(err.message)),
      returnFatalError: (err: Error) => finish(err),
    });
    const what = `${host}:${port} ${String(args[0] ?? '')}`;
    socket.setTimeout(timeoutMs, () => finish(new Error(`${what}: no reply within ${timeoutMs}ms`)));
    socket.once('connect', () => socket.write(encodeCommand(args)));
    socket.on('data', (chunk: Buffer) => parser.execute(chunk));
    socket.once('error', (err) => finish(err));
    socket.once('close', () => finish(new Error(`${what}: connection closed before a reply`)));
  });
}

/** Parses INFO output ("key:value" lines) into a map. */
export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.indexOf(':');
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}

export interface SlotNodeRef {
  host: string;
  port: number;
  id: string;
}

export interface SlotRange {
  start: number;
  end: number;
  master: SlotNodeRef;
  replicas: SlotNodeRef[];
}

function asNodeRef(value: RespReply): SlotNodeRef {
  if (!Array.isArray(value) || typeof value[0] !== 'string' || typeof value[1] !== 'number') {
    throw new Error(`malformed CLUSTER SLOTS node entry: ${JSON.stringify(value)}`);
  }
  return { host: value[0], port: value[1], id: typeof value[2] === 'string' ? value[2] : '' };
}

/** Parses a CLUSTER SLOTS reply into ranges sorted by start slot. */
export function parseClusterSlots(reply: RespReply): SlotRange[] {
  if (!Array.isArray(reply)) throw new Error('CLUSTER SLOTS: expected an array reply');
  const ranges = reply.map((entry): SlotRange => {
    if (!Array.isArray(entry) || typeof entry[0] !== 'number' || typeof entry[1] !== 'number' || entry.length < 3) {
      throw new Error(`malformed CLUSTER SLOTS entry: ${JSON.stringify(entry)}`);
    }
    return {
      start: entry[0],
      end: entry[1],
      master: asNodeRef(entry[2]),
      replicas: entry.slice(3).map(asNodeRef),
    };
  });
  return ranges.sort((a, b) => a.start - b.start);
}

/** Null if the ranges cover slots 0..16383 exactly once, else why not. */
export function slotCoverageProblem(ranges: readonly SlotRange[]): string | null {
  let next = 0;
  for (const r of ranges) {
    if (r.start !== next) {
      return r.start > next ? `slots ${next}-${r.start - 1} unassigned` : `slot ${r.start} assigned twice`;
    }
    next = r.end + 1;
  }
  return next === CLUSTER_SLOTS ? null : `slots ${next}-${CLUSTER_SLOTS - 1} unassigned`;
}

// ---------------------------------------------------------------------------
// RedisNode

export interface RedisNodeOptions {
  port: number;
  /** Loopback address to bind; default 127.0.0.1 (any of 127.0.0.0/8 works, for a port taken on .1). */
  host?: string;
  /** Start with --cluster-enabled yes. */
  cluster?: boolean;
  /** Working directory (created if missing); default: a fresh temp dir removed by destroy(). */
  dir?: string;
  /** Appended to the redis-server command line, e.g. ['--maxmemory', '10mb']. */
  extraArgs?: string[];
  /** cluster-node-timeout for cluster nodes; default 2000. */
  nodeTimeoutMs?: number;
  /** How long to wait for PONG; default 10000. */
  readyTimeoutMs?: number;
  /** redis-server binary; default $SLOTPROXY_REDIS_SERVER or redis-server on PATH. */
  serverBin?: string;
  /** Start under `setpriv --pdeathsig SIGKILL` when available, so the server dies with us; default true. */
  dieWithParent?: boolean;
}

/** A redis-server failed to become ready; `addressInUse` tells a lost port race. */
export class RedisStartError extends Error {
  override name = 'RedisStartError';
  constructor(
    message: string,
    readonly addressInUse: boolean,
  ) {
    super(message);
  }
}

export class RedisNode {
  readonly host: string;
  readonly port: number;
  readonly dir: string;
  /** The current redis-server child; replaced by restart(). */
  process!: ChildProcess;

  private readonly opts: RedisNodeOptions;
  private readonly ownsDir: boolean;
  private exitPromise: Promise<void> = Promise.resolve();
  private exited = true;
  private exitDescription = '';
  private output = '';

  private constructor(opts: RedisNodeOptions, dir: string, ownsDir: boolean) {
    this.opts = opts;
    this.host = opts.host ?? LOOPBACK;
    this.port = opts.port;
    this.dir = dir;
    this.ownsDir = ownsDir;
  }

  /** Starts redis-server and resolves once it answers PING. */
  static async start(opts: RedisNodeOptions): Promise<RedisNode> {
    if (!Number.isInteger(opts.port) || opts.port < 1 || opts.port > 65535) {
      throw new RangeError(`RedisNode: invalid port ${opts.port}`);
    }
    if (opts.cluster === true && opts.port > MAX_CLUSTER_PORT) {
      throw new RangeError(`RedisNode: cluster port ${opts.port} leaves no room for its bus port (+10000)`);
    }
    const bin = redisServerBin(opts.serverBin);
    const ownsDir = opts.dir === undefined;
    let dir: string;
    if (opts.dir === undefined) {
      dir = await makeTempDir();
    } else {
      dir = path.resolve(opts.dir);
      await fsp.mkdir(dir, { recursive: true });
    }
    const node = new RedisNode(opts, dir, ownsDir);
    try {
      node.spawnServer(bin);
      await node.waitReady();
    } catch (err) {
      await node.destroy();
      throw err;
    }
    return node;
  }

  /** "127.0.0.1:PORT" */
  get address(): string {
    return `${this.host}:${this.port}`;
  }

  get logFile(): string {
    return path.join(this.dir, 'redis.log');
  }

  /** True while the current redis-server process has not exited. */
  get running(): boolean {
    return !this.exited;
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  private serverArgs(): string[] {
    const args = [
      '--port', String(this.port),
      '--bind', this.host,
      '--save', '',
      '--appendonly', 'no',
      '--dir', this.dir,
      '--daemonize', 'no',
      '--protected-mode', 'no',
      '--logfile', this.logFile,
    ];
    if (this.opts.cluster === true) {
      args.push(
        '--cluster-enabled', 'yes',
        '--cluster-config-file', path.join(this.dir, 'nodes.conf'),
        '--cluster-node-timeout', String(this.opts.nodeTimeoutMs ?? DEFAULT_NODE_TIMEOUT_MS),
      );
    }
    return args.concat(this.opts.extraArgs ?? []);
  }

  private spawnServer(bin: string): void {
    const args = this.serverArgs();
    const setpriv = this.opts.dieWithParent === false ? null : findExecutable('setpriv');
    // setpriv execs redis-server in place, so the pid stays redis-server's own.
    const [command, argv] =
      setpriv === null ? [bin, args] : [setpriv, ['--pdeathsig', 'SIGKILL', '--', bin, ...args]];
    this.output = '';
    const child = spawn(command, argv, { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    this.process = child;
    this.exited = false;
    this.exitDescription = '';
    const live = registry();
    if (child.pid !== undefined) live.pids.add(child.pid);
    const keep = (chunk: Buffer): void => {
      // Config errors are printed before the log file is opened.
      this.output = (this.output + chunk.toString('utf8')).slice(-OUTPUT_KEEP_BYTES);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    // A server someone forgot to stop must not keep Node (e.g. jest) alive
    // forever: unref it, and let the exit hook kill it when Node exits.
    child.unref();
    unrefStream(child.stdout);
    unrefStream(child.stderr);
    this.exitPromise = new Promise<void>((resolve) => {
      const onGone = (description: string): void => {
        if (child.pid !== undefined) live.pids.delete(child.pid);
        if (this.process === child) {
          this.exited = true;
          this.exitDescription = description;
        }
        resolve();
      };
      child.once('exit', (code, signal) =>
        onGone(signal !== null ? `killed by ${signal}` : `exited with code ${String(code)}`),
      );
      child.once('error', (err) => onGone(`could not be started: ${err.message}`));
    });
  }

  private async failure(headline: string): Promise<RedisStartError> {
    const log = await readTail(this.logFile, LOG_TAIL_LINES);
    const output = this.output.trim();
    const parts = [headline];
    if (output !== '') parts.push(`--- redis-server output ---\n${output}`);
    parts.push(log === '' ? `--- ${this.logFile}: empty or missing ---` : `--- ${this.logFile} (tail) ---\n${log}`);
    const addressInUse = /address already in use/i.test(output + log);
    return new RedisStartError(parts.join('\n'), addressInUse);
  }

  private async waitReady(): Promise<void> {
    const timeoutMs = this.opts.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    let lastError = '';
    for (;;) {
      if (this.exited) {
        throw await this.failure(`redis-server on ${this.address} ${this.exitDescription} before answering PING`);
      }
      try {
        const reply = await sendCommand(this.port, ['PING'], { host: this.host, timeoutMs: 1_000 });
        if (reply === 'PONG') return;
        lastError = `unexpected reply ${JSON.stringify(reply)}`;
      } catch (err) {
        lastError = errorMessage(err); // refused until it binds; LOADING while loading
      }
      if (Date.now() >= deadline) {
        throw await this.failure(
          `redis-server on ${this.address} did not answer PING within ${timeoutMs}ms (last: ${lastError})`,
        );
      }
      await sleep(50);
    }
  }

  /** Sends a signal to the current process (default SIGKILL) without waiting; false if it is gone. */
  kill(signal: NodeJS.Signals = 'SIGKILL'): boolean {
    if (this.exited) return false;
    return this.process.kill(signal);
  }

  /** Resolves when the current process has exited. */
  waitForExit(): Promise<void> {
    return this.exitPromise;
  }

  /** SIGTERM, then SIGKILL after 2s; resolves once the process has exited. Keeps the dir (see destroy()). */
  async stop(): Promise<void> {
    if (!this.exited) {
      // Keep Node alive until the exit is seen, or `await stop()` could hang up a script's last step.
      this.process.ref();
      this.process.kill('SIGTERM');
      // A SIGSTOPped server would not act on SIGTERM until continued.
      this.process.kill('SIGCONT');
      if (!(await settlesWithin(this.exitPromise, STOP_GRACE_MS))) {
        this.process.kill('SIGKILL');
      }
    }
    await this.exitPromise;
  }

  /** stop(), then remove the dir if start() created it. */
  async destroy(): Promise<void> {
    await this.stop();
    if (this.ownsDir) await removeTempDir(this.dir);
  }

  /** Stops the server if running and starts it again on the same port and dir (a cluster node keeps its nodes.conf identity). */
  async restart(): Promise<void> {
    await this.stop();
    this.spawnServer(redisServerBin(this.opts.serverBin));
    try {
      await this.waitReady();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  /** Sends one command over the RESP protocol; rejects with RedisReplyError on an error reply. */
  command(...args: (string | number)[]): Promise<RespReply> {
    return sendCommand(this.port, args, { host: this.host });
  }

  /** INFO [section], parsed. */
  async info(section?: string): Promise<Map<string, string>> {
    const reply = await this.command(...(section === undefined ? ['INFO'] : ['INFO', section]));
    if (typeof reply !== 'string') throw new Error(`${this.address}: INFO returned a non-string reply`);
    return parseInfo(reply);
  }

  /**
   * Runs `redis-cli -h 127.0.0.1 -p PORT ...args` and resolves its stdout, trimmed.
   * Note redis-cli exits 0 on error replies and prints them ("ERR ...", "MOVED ...");
   * this rejects only when redis-cli itself fails (e.g. connection refused).
   */
  cli(...args: string[]): Promise<string> {
    return runRedisCli(['-h', this.host, '-p', String(this.port), ...args]);
  }
}

function runRedisCli(args: string[], timeoutMs = 60_000): Promise<string> {
  let bin: string;
  try {
    bin = redisCliBin();
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    const child = execFile(
      bin,
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err !== null) {
          const detail = [stderr.trim(), stdout.trim()].filter((s) => s !== '').join('\n');
          reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}${detail === '' ? '' : `\n${detail}`}`));
          return;
        }
        resolve(stdout.trim());
      },
    );
    // --cluster create asks for confirmation on stdin unless --cluster-yes; never let it wait.
    child.stdin?.end();
  });
}

/** Starts a node on automatically picked ports, retrying if another process grabs a port first. */
async function startOnFreePort(
  pickPort: () => Promise<number>,
  opts: (port: number) => RedisNodeOptions,
): Promise<RedisNode> {
  for (let attempt = 1; ; attempt++) {
    const port = await pickPort();
    try {
      return await RedisNode.start(opts(port));
    } catch (err) {
      if (!(err instanceof RedisStartError && err.addressInUse) || attempt >= PORT_RACE_ATTEMPTS) throw err;
    }
  }
}

/** Stops nodes in parallel, reporting the first failure only after all have been tried. */
async function destroyAll(nodes: readonly RedisNode[]): Promise<void> {
  const results = await Promise.allSettled(nodes.map((n) => n.destroy()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

// ---------------------------------------------------------------------------
// RedisCluster

export interface RedisClusterOptions {
  /** Number of masters; default 3. 1 and 2 are supported (set up without redis-cli, which needs 3). */
  masters?: number;
  /** Replicas per master; default 1. */
  replicasPerMaster?: number;
  /** Use ports basePort .. basePort+n-1 instead of free ones picked automatically. */
  basePort?: number;
  /** cluster-node-timeout; default 2000. */
  nodeTimeoutMs?: number;
  /** Parent for the cluster's temp dir; default os.tmpdir(). */
  dir?: string;
  /** Appended to every node's redis-server command line. */
  extraArgs?: string[];
  /** Deadline for the cluster to become healthy after creation; default 30000. */
  okTimeoutMs?: number;
}

export type NodeRole = 'master' | 'replica' | 'unknown';

export class RedisCluster {
  /** Roles as last seen by waitForClusterOk()/refreshRoles(); 'unknown' for stopped nodes. */
  private readonly roles = new Map<RedisNode, NodeRole>();

  private constructor(
    readonly nodes: RedisNode[],
    /** The temp dir holding one sub-dir per node (logs, nodes.conf). */
    readonly dir: string,
  ) {}

  static async start(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
    const masters = opts.masters ?? 3;
    const replicasPerMaster = opts.replicasPerMaster ?? 1;
    if (!Number.isInteger(masters) || masters < 1) throw new RangeError(`RedisCluster: masters must be >= 1, got ${masters}`);
    if (!Number.isInteger(replicasPerMaster) || replicasPerMaster < 0) {
      throw new RangeError(`RedisCluster: replicasPerMaster must be >= 0, got ${replicasPerMaster}`);
    }
    const total = masters * (1 + replicasPerMaster);
    if (opts.basePort !== undefined) {
      const last = opts.basePort + total - 1;
      if (!Number.isInteger(opts.basePort) || opts.basePort < 1 || last > MAX_CLUSTER_PORT) {
        throw new RangeError(
          `RedisCluster: ports ${opts.basePort}-${last} must lie in 1-${MAX_CLUSTER_PORT} (bus port = port + 10000)`,
        );
      }
    }

    const dir = await makeTempDir(opts.dir);
    const nodeOpts = (port: number): RedisNodeOptions => ({
      port,
      cluster: true,
      dir: path.join(dir, String(port)),
      // CLUSTER SLOTS hides replicas whose replication offset is still 0, and an
      // idle master only advances it by pinging replicas (default every 10s).
      extraArgs: ['--repl-ping-replica-period', '1', ...(opts.extraArgs ?? [])],
      nodeTimeoutMs: opts.nodeTimeoutMs ?? DEFAULT_NODE_TIMEOUT_MS,
    });

    const started: RedisNode[] = [];
    try {
      const basePort = opts.basePort;
      if (basePort !== undefined) {
        const results = await Promise.allSettled(
          Array.from({ length: total }, (_, i) => RedisNode.start(nodeOpts(basePort + i))),
        );
        for (const r of results) if (r.status === 'fulfilled') started.push(r.value);
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
      } else {
        const ports = await freeClusterPorts(total);
        const pending = ports.map((first) => {
          let next: number | undefined = first;
          const pick = async (): Promise<number> => {
            const p = next ?? (await freeClusterPorts(1))[0];
            next = undefined;
            return p;
          };
          return startOnFreePort(pick, nodeOpts).then((node) => {
            started.push(node);
            return node;
          });
        });
        const results = await Promise.allSettled(pending);
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
      }
      // Port order: the first `masters` nodes become masters.
      started.sort((a, b) => a.port - b.port);
      const cluster = new RedisCluster(started, dir);
      if (masters >= 3) {
        await runRedisCli([
          '--cluster', 'create',
          ...started.map((n) => n.address),
          '--cluster-replicas', String(replicasPerMaster),
          '--cluster-yes',
        ]);
      } else {
        await cluster.createManually(masters);
      }
      await cluster.waitForClusterOk(opts.okTimeoutMs ?? DEFAULT_CLUSTER_OK_TIMEOUT_MS);
      return cluster;
    } catch (err) {
      await destroyAll(started).catch(() => undefined);
      await removeTempDir(dir);
      throw err;
    }
  }

  /** For fewer than 3 masters, which `redis-cli --cluster create` refuses. */
  private async createManually(masterCount: number): Promise<void> {
    const masters = this.nodes.slice(0, masterCount);
    const replicas = this.nodes.slice(masterCount);
    await Promise.all(
      masters.map((node, i) => {
        const start = Math.floor((i * CLUSTER_SLOTS) / masterCount);
        const end = Math.floor(((i + 1) * CLUSTER_SLOTS) / masterCount) - 1;
        return node.command('CLUSTER', 'ADDSLOTSRANGE', start, end);
      }),
    );
    const [first] = this.nodes;
    for (const node of this.nodes.slice(1)) await node.command('CLUSTER', 'MEET', first.host, first.port);
    // CLUSTER REPLICATE needs the replica to already know its master's id.
    await this.poll(10_000, 'all nodes to meet', async () => {
      for (const node of this.nodes) {
        const known = parseInfo(String(await node.command('CLUSTER', 'INFO'))).get('cluster_known_nodes');
        if (known !== String(this.nodes.length)) return `${node.address} knows ${known ?? '?'} nodes`;
      }
      return null;
    });
    const ids = await Promise.all(masters.map(async (m) => String(await m.command('CLUSTER', 'MYID'))));
    await Promise.all(replicas.map((r, i) => r.command('CLUSTER', 'REPLICATE', ids[i % masterCount])));
  }

  /** Nodes whose last seen role is master (stopped nodes excluded). */
  get masters(): RedisNode[] {
    return this.nodes.filter((n) => this.roles.get(n) === 'master');
  }

  /** Nodes whose last seen role is replica (stopped nodes excluded). */
  get replicas(): RedisNode[] {
    return this.nodes.filter((n) => this.roles.get(n) === 'replica');
  }

  /** "127.0.0.1:PORT" for every node. */
  get seeds(): string[] {
    return this.nodes.map((n) => n.address);
  }

  roleOf(node: RedisNode): NodeRole {
    return this.roles.get(node) ?? 'unknown';
  }

  nodeByPort(port: number): RedisNode | undefined {
    return this.nodes.find((n) => n.port === port);
  }

  private liveNode(): RedisNode {
    const node = this.nodes.find((n) => n.running);
    if (node === undefined) throw new Error('RedisCluster: no node is running');
    return node;
  }

  /** CLUSTER SLOTS as seen by a running node. */
  async slots(): Promise<SlotRange[]> {
    return parseClusterSlots(await this.liveNode().command('CLUSTER', 'SLOTS'));
  }

  /** The node serving `slot`, according to a running node's CLUSTER SLOTS. */
  async masterFor(slot: number): Promise<RedisNode> {
    if (!Number.isInteger(slot) || slot < 0 || slot >= CLUSTER_SLOTS) {
      throw new RangeError(`RedisCluster: slot must be 0-${CLUSTER_SLOTS - 1}, got ${slot}`);
    }
    const range = (await this.slots()).find((r) => r.start <= slot && slot <= r.end);
    if (range === undefined) throw new Error(`RedisCluster: slot ${slot} is not assigned`);
    const node = this.nodeByPort(range.master.port);
    if (node === undefined) throw new Error(`RedisCluster: slot ${slot} is served by unknown node ${range.master.port}`);
    return node;
  }

  /** Running replicas whose INFO replication names `master` as their master. */
  async replicasOf(master: RedisNode): Promise<RedisNode[]> {
    const live = this.nodes.filter((n) => n.running && n !== master);
    const infos = await Promise.all(live.map((n) => n.info('replication')));
    return live.filter((_, i) => infos[i].get('role') === 'slave' && infos[i].get('master_port') === String(master.port));
  }

  /** Re-reads every running node's role (INFO replication); stopped nodes become 'unknown'. */
  async refreshRoles(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (node) => {
        if (!node.running) {
          this.roles.set(node, 'unknown');
          return;
        }
        const role = (await node.info('replication')).get('role');
        this.roles.set(node, role === 'master' ? 'master' : role === 'slave' ? 'replica' : 'unknown');
      }),
    );
  }

  /** Null when healthy, else the first problem found. Also refreshes roles. */
  private async clusterProblem(): Promise<string | null> {
    const live = this.nodes.filter((n) => n.running);
    if (live.length === 0) return 'no node is running';
    const livePorts = new Set(live.map((n) => n.port));
    // master port -> sorted ports of its running replicas
    const expectedReplicas = new Map<number, number[]>();
    for (const node of live) {
      const replication = await node.info('replication');
      const role = replication.get('role');
      this.roles.set(node, role === 'master' ? 'master' : role === 'slave' ? 'replica' : 'unknown');
      if (role !== 'slave') continue;
      if (replication.get('master_link_status') !== 'up') {
        return `${node.address}: master_link_status is ${replication.get('master_link_status') ?? 'missing'}`;
      }
      const masterPort = Number(replication.get('master_port'));
      expectedReplicas.set(masterPort, [...(expectedReplicas.get(masterPort) ?? []), node.port].sort((a, b) => a - b));
    }
    for (const node of this.nodes) if (!node.running) this.roles.set(node, 'unknown');

    let reference: string | null = null;
    let referenceNode = '';
    for (const node of live) {
      const state = parseInfo(String(await node.command('CLUSTER', 'INFO'))).get('cluster_state');
      if (state !== 'ok') return `${node.address}: cluster_state is ${state ?? 'missing'}`;
      const ranges = parseClusterSlots(await node.command('CLUSTER', 'SLOTS'));
      const coverage = slotCoverageProblem(ranges);
      if (coverage !== null) return `${node.address}: ${coverage}`;
      for (const r of ranges) {
        if (!livePorts.has(r.master.port)) {
          return `${node.address}: slots ${r.start}-${r.end} still served by stopped node ${r.master.port}`;
        }
        // Clients that read from replicas learn them from CLUSTER SLOTS.
        const listed = r.replicas.map((x) => x.port).sort((a, b) => a - b).join(',');
        const expected = (expectedReplicas.get(r.master.port) ?? []).join(',');
        if (listed !== expected) {
          return `${node.address}: slots ${r.start}-${r.end} list replicas [${listed}], expected [${expected}]`;
        }
      }
      // Every node must agree on who serves what, or clients would bounce on MOVED.
      const view = ranges.map((r) => `${r.start}-${r.end}@${r.master.port}`).join(',');
      if (reference === null) {
        reference = view;
        referenceNode = node.address;
      } else if (view !== reference) {
        return `${node.address} and ${referenceNode} disagree on the slot map`;
      }
    }
    return null;
  }

  private async poll(timeoutMs: number, what: string, check: () => Promise<string | null>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'not checked yet';
    for (;;) {
      try {
        const problem = await check();
        if (problem === null) return;
        last = problem;
      } catch (err) {
        last = errorMessage(err);
      }
      if (Date.now() >= deadline) throw new Error(`RedisCluster: timed out after ${timeoutMs}ms waiting for ${what}: ${last}`);
      await sleep(100);
    }
  }

  /**
   * Waits until every running node reports cluster_state:ok, sees all 16384
   * slots served by running nodes, agrees with the others on the slot map,
   * lists exactly the running replicas under each master, and every running
   * replica has master_link_status:up. Use after failovers, restarts or
   * resharding.
   */
  async waitForClusterOk(timeoutMs: number = DEFAULT_CLUSTER_OK_TIMEOUT_MS): Promise<void> {
    await this.poll(timeoutMs, 'a healthy cluster', () => this.clusterProblem());
  }

  /** Stops all nodes in parallel and removes the cluster's temp dir. Idempotent. */
  async stop(): Promise<void> {
    try {
      await destroyAll(this.nodes);
    } finally {
      this.roles.clear();
      await removeTempDir(this.dir);
    }
  }
}

// ---------------------------------------------------------------------------
// StandaloneNodes

export interface StandaloneNodesOptions {
  /** Parent for the temp dir; default os.tmpdir(). */
  dir?: string;
  /** Appended to every node's redis-server command line. */
  extraArgs?: string[];
}

/** N independent (non-cluster) redis-servers, e.g. for a consistent-hash ring. */
export class StandaloneNodes {
  private constructor(
    readonly nodes: RedisNode[],
    readonly dir: string,
  ) {}

  static async start(n: number, opts: StandaloneNodesOptions = {}): Promise<StandaloneNodes> {
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`StandaloneNodes: n must be >= 1, got ${n}`);
    const dir = await makeTempDir(opts.dir);
    const started: RedisNode[] = [];
    try {
      const ports = await freePorts(n);
      const results = await Promise.allSettled(
        ports.map((first) => {
          let next: number | undefined = first;
          const pick = async (): Promise<number> => {
            const p = next ?? (await freePorts(1))[0];
            next = undefined;
            return p;
          };
          return startOnFreePort(pick, (port) => ({ port, dir: path.join(dir, String(port)), extraArgs: opts.extraArgs }));
        }),
      );
      // Keep the order of the ports handed out, so node i is stable for callers.
      for (const r of results) if (r.status === 'fulfilled') started.push(r.value);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      return new StandaloneNodes(started, dir);
    } catch (err) {
      await destroyAll(started).catch(() => undefined);
      await removeTempDir(dir);
      throw err;
    }
  }

  /** "127.0.0.1:PORT" for every node, in node order. */
  get addresses(): string[] {
    return this.nodes.map((n) => n.address);
  }

  /** Stops all nodes in parallel and removes the temp dir. Idempotent. */
  async stop(): Promise<void> {
    try {
      await destroyAll(this.nodes);
    } finally {
      await removeTempDir(this.dir);
    }
  }
}
