// One redis-server process on loopback (RedisNode): spawning it (under setpriv's parent-death
// signal where available), waiting for PING, stop/restart/destroy, and talking to it over RESP
// or redis-cli. Every pid it starts is recorded in the live registry.

import { ChildProcess, spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { LOOPBACK, MAX_CLUSTER_PORT } from './ports';
import { findExecutable } from './executables';
import {
  errorMessage,
  makeTempDir,
  readTail,
  redisServerBin,
  removeTempDir,
  settlesWithin,
  sleep,
  unrefStream,
} from './helpers';
import { registry } from './live-registry';
import { RespReply, parseInfo, sendCommand } from './resp-client';
import { runRedisCli } from './redis-cli';

const DEFAULT_READY_TIMEOUT_MS = 10_000;
export const DEFAULT_NODE_TIMEOUT_MS = 2_000;
const STOP_GRACE_MS = 2_000;
const LOG_TAIL_LINES = 25;
const OUTPUT_KEEP_BYTES = 8 * 1024;

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
      // A replica (or a migration's follower) gets its snapshot at once, not after Redis's 5 s
      // wait for more replicas to share one diskless sync; extraArgs may set it back.
      '--repl-diskless-sync-delay', '0',
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
        // The server on the port must be this process: nodes started side by side (two clusters
        // at once) can be handed the same free port, and the one that lost the bind would else
        // take the other's PONG for its own and join the wrong cluster.
        const reply = await sendCommand(this.port, ['PING'], { host: this.host, timeoutMs: 1_000 });
        const info = reply === 'PONG' ? String(await sendCommand(this.port, ['INFO', 'server'], { host: this.host, timeoutMs: 1_000 })) : '';
        const pid = /process_id:(\d+)/.exec(info)?.[1];
        if (pid !== undefined && Number(pid) === this.process.pid) return;
        lastError = reply !== 'PONG' ? `unexpected reply ${JSON.stringify(reply)}` : `port ${this.port} answered by another redis-server (pid ${pid ?? '?'})`;
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

  /** cli() for a long run (a reshard), killed after `timeoutMs` instead of cli()'s 60 s. */
  cliWithin(timeoutMs: number, ...args: string[]): Promise<string> {
    return runRedisCli(['-h', this.host, '-p', String(this.port), ...args], timeoutMs);
  }
}
