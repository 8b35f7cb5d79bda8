// Jest fixture: master+replica groups of standalone redis-servers watched by redis-sentinel
// processes (Debian's redis-sentinel), all on free loopback ports, for the Sentinel failover tests.
// Sentinels are told to fail over fast (down-after-milliseconds, failover-timeout); a group's
// master name is its ring node's name. Every process is stopped in stop(), also after a failure.
import { ChildProcess, spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { destroyAll, startOnFreePort } from '../../cmd/sandbox/node-group';
import { freePorts } from '../../cmd/sandbox/ports';
import { makeTempDir, removeTempDir, settlesWithin, sleep } from '../../cmd/sandbox/helpers';
import { findExecutable, redisSentinelCommand } from '../../cmd/sandbox/executables';
import { registry } from '../../cmd/sandbox/live-registry';
import { RespReply, sendCommand } from '../../cmd/sandbox/resp-client';

/** Whichever node is master, a replica syncs at once (Redis 7 waits 5 s for more replicas by default). */
const FAST_SYNC = ['--repl-diskless-sync-delay', '0'];

export interface SentinelGroupsOptions {
  /** Master names, one master+replica group each. */
  names: string[];
  sentinels?: number;
  quorum?: number;
  downAfterMs?: number;
  failoverTimeoutMs?: number;
}

/** One redis-sentinel process: its config file is its own (Sentinel rewrites it). */
export class SentinelProcess {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly port: number,
    private readonly file: string,
  ) {}

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  async start(): Promise<void> {
    const sentinel = redisSentinelCommand(this.file);
    if (sentinel === null) throw new Error('redis-sentinel not found: run SLOTPROXY_NEED_SENTINEL=1 bash scripts/setup.sh');
    const setpriv = findExecutable('setpriv');
    const [command, argv] =
      setpriv === null ? [sentinel.bin, sentinel.args] : [setpriv, ['--pdeathsig', 'SIGKILL', '--', sentinel.bin, ...sentinel.args]];
    const child = spawn(command, argv, { cwd: path.dirname(this.file), stdio: 'ignore' });
    child.unref();
    const live = registry();
    if (child.pid !== undefined) live.pids.add(child.pid);
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', () => {
        if (child.pid !== undefined) live.pids.delete(child.pid);
        if (this.child === child) this.child = null;
        resolve();
      });
      child.once('error', () => resolve());
    });
    for (const deadline = Date.now() + 10_000; ; ) {
      if (this.child === null) throw new Error(`redis-sentinel on ${this.address} exited at start (see ${this.file})`);
      if (await this.command('PING').then((r) => r === 'PONG', () => false)) return;
      if (Date.now() > deadline) throw new Error(`redis-sentinel on ${this.address} did not answer PING`);
      await sleep(50);
    }
  }

  /** SIGKILL, as a crash; resolves once it is gone. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child !== null) {
      child.kill('SIGTERM');
      if (!(await settlesWithin(this.exited, 2000))) child.kill('SIGKILL');
    }
    await this.exited;
  }

  command(...args: (string | number)[]): Promise<RespReply> {
    return sendCommand(this.port, args, { timeoutMs: 2000 });
  }
}

export interface SentinelGroup {
  name: string;
  /** [initial master, initial replica]; which is master changes with failovers. */
  nodes: RedisNode[];
}

export class SentinelGroups {
  private constructor(
    readonly groups: SentinelGroup[],
    readonly sentinels: SentinelProcess[],
    private readonly dir: string,
  ) {}

  static async start(opts: SentinelGroupsOptions): Promise<SentinelGroups> {
    const dir = await makeTempDir();
    const nodes: RedisNode[] = [];
    const sentinels: SentinelProcess[] = [];
    const pick = async (): Promise<number> => (await freePorts(1))[0];
    try {
      const groups: SentinelGroup[] = [];
      for (const name of opts.names) {
        const master = await startOnFreePort(pick, (port) => ({ port, dir: path.join(dir, String(port)), extraArgs: FAST_SYNC }));
        nodes.push(master);
        const replica = await startOnFreePort(pick, (port) => ({ port, dir: path.join(dir, String(port)), extraArgs: [...FAST_SYNC, '--replicaof', '127.0.0.1', String(master.port)] }));
        nodes.push(replica);
        groups.push({ name, nodes: [master, replica] });
      }
      const ports = await freePorts(opts.sentinels ?? 3);
      for (const port of ports) {
        const lines = [`port ${port}`, 'bind 127.0.0.1', `dir ${dir}`, 'protected-mode no', `logfile ${path.join(dir, `sentinel-${port}.log`)}`];
        for (const g of groups) {
          lines.push(
            `sentinel monitor ${g.name} 127.0.0.1 ${g.nodes[0].port} ${opts.quorum ?? 2}`,
            `sentinel down-after-milliseconds ${g.name} ${opts.downAfterMs ?? 1000}`,
            `sentinel failover-timeout ${g.name} ${opts.failoverTimeoutMs ?? 3000}`,
            `sentinel parallel-syncs ${g.name} 1`,
          );
        }
        const file = path.join(dir, `sentinel-${port}.conf`);
        await fsp.writeFile(file, lines.join('\n') + '\n');
        const s = new SentinelProcess(port, file);
        sentinels.push(s);
        await s.start();
      }
      const env = new SentinelGroups(groups, sentinels, dir);
      await env.waitUntilWatched();
      return env;
    } catch (err) {
      await Promise.allSettled(sentinels.map((s) => s.stop()));
      await destroyAll(nodes).catch(() => undefined);
      await removeTempDir(dir);
      throw err;
    }
  }

  get sentinelAddresses(): string[] {
    return this.sentinels.map((s) => s.address);
  }

  group(name: string): SentinelGroup {
    const g = this.groups.find((x) => x.name === name);
    if (g === undefined) throw new Error(`no group ${name}`);
    return g;
  }

  /** The group's node at `address`. */
  node(address: string): RedisNode {
    for (const g of this.groups) for (const n of g.nodes) if (n.address === address) return n;
    throw new Error(`no node at ${address}`);
  }

  /**
   * Where the sentinels that answer say the master of `name` is now: the view with the highest
   * config epoch (a restarted sentinel answers from its old config until it hears the others).
   */
  async masterOf(name: string): Promise<string> {
    let best: { address: string; epoch: number } | null = null;
    for (const s of this.sentinels) {
      if (!s.running) continue;
      const r = await s.command('SENTINEL', 'MASTER', name).catch(() => null);
      if (!Array.isArray(r)) continue;
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < r.length; i += 2) f.set(String(r[i]), String(r[i + 1]));
      const epoch = Number(f.get('config-epoch') ?? 0);
      if (best === null || epoch > best.epoch) best = { address: `${f.get('ip') ?? ''}:${f.get('port') ?? ''}`, epoch };
    }
    if (best === null) throw new Error(`no sentinel knows ${name}`);
    return best.address;
  }

  /**
   * Until every running sentinel knows the other sentinels and each master's replica, and every
   * replica is in sync: a failover needs the quorum to agree and a replica to promote (one that has
   * its master's data), and sentinels learn both from each other.
   */
  async waitUntilWatched(timeoutMs = 20_000): Promise<void> {
    const others = this.sentinels.filter((s) => s.running).length - 1;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let ready = true;
      for (const s of this.sentinels) {
        if (!s.running) continue;
        for (const g of this.groups) {
          const info = await s.command('SENTINEL', 'master', g.name).catch(() => null);
          const fields = new Map<string, string>();
          if (Array.isArray(info)) for (let i = 0; i + 1 < info.length; i += 2) fields.set(String(info[i]), String(info[i + 1]));
          if (Number(fields.get('num-other-sentinels') ?? -1) < others || Number(fields.get('num-slaves') ?? 0) < 1 || (fields.get('flags') ?? '') !== 'master') ready = false;
        }
      }
      for (const g of this.groups) {
        for (const n of g.nodes) {
          if (!n.running) continue;
          const role = await n.command('ROLE').catch(() => null);
          if (Array.isArray(role) && role[0] === 'slave' && role[3] !== 'connected') ready = false;
        }
      }
      if (ready) return;
      if (Date.now() > deadline) throw new Error('sentinels did not all see each other and every replica (in sync) in time');
      await sleep(100);
    }
  }

  /** Until the sentinels name a master of `name` other than `from`; resolves with it. */
  async failoverFrom(name: string, from: string, timeoutMs = 30_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = await this.masterOf(name).catch(() => from);
      if (now !== from) return now;
      if (Date.now() > deadline) throw new Error(`no failover of ${name} away from ${from} within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  /** Until `node` reports `role` (ROLE's first element: master or slave). */
  async waitForRole(node: RedisNode, role: 'master' | 'slave', timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = await node.command('ROLE').catch(() => null);
      if (Array.isArray(r) && r[0] === role) return;
      if (Date.now() > deadline) throw new Error(`${node.address} did not become ${role} within ${timeoutMs} ms`);
      await sleep(50);
    }
  }

  async stop(): Promise<void> {
    try {
      await Promise.allSettled(this.sentinels.map((s) => s.stop()));
      await destroyAll(this.groups.flatMap((g) => g.nodes));
    } finally {
      await removeTempDir(this.dir);
    }
  }
}
