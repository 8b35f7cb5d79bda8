// StandaloneNodes: N independent (non-cluster) redis-servers on free loopback ports in one
// temp dir, e.g. for a consistent-hash ring, started and stopped together.

import path from 'node:path';
import { freePorts } from './ports';
import { makeTempDir, removeTempDir } from './helpers';
import { RedisNode } from './redis-node';
import { destroyAll, startOnFreePort } from './node-group';

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
