// A local Redis Cluster of real redis-servers (RedisCluster) for the `slotproxy sandbox`
// command, integration tests and benchmarks: creating it, waiting until it is healthy,
// role and slot lookups for failover tests, and teardown.

import path from 'node:path';
import { MAX_CLUSTER_PORT, freeClusterPorts } from './ports';
import { errorMessage, makeTempDir, removeTempDir, sleep } from './helpers';
import { parseInfo } from './resp-client';
import { CLUSTER_SLOTS, SlotRange, parseClusterSlots, slotCoverageProblem } from './cluster-slots';
import { DEFAULT_NODE_TIMEOUT_MS, RedisNode, RedisNodeOptions } from './redis-node';
import { runRedisCli } from './redis-cli';
import { destroyAll, startOnFreePort } from './node-group';

const DEFAULT_CLUSTER_OK_TIMEOUT_MS = 30_000;

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
  /** The redis-server every node runs (another build); default as RedisNode picks it. */
  serverBin?: string;
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
      serverBin: opts.serverBin,
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

  /**
   * Waits until every running replica has applied its master's replication stream up to the
   * master's offset at the time of the call, so writes made before it can be read from replicas.
   *
   * `WAIT` cannot do this here: node.command() opens a fresh connection per command, and WAIT only
   * waits for that connection's own writes (none), so it answers at once. And a replica whose link
   * is up may not be receiving the stream yet: after a diskless full sync, Redis 7.0 starts
   * streaming on the replica's first REPLCONF ACK after it reaps the RDB child; when the replica's
   * immediate ACK comes before that, streaming waits for the next ACK, up to a second later.
   */
  async waitForReplication(timeoutMs: number = DEFAULT_CLUSTER_OK_TIMEOUT_MS): Promise<void> {
    const live = this.nodes.filter((n) => n.running);
    const infos = await Promise.all(live.map((n) => n.info('replication')));
    // master port -> its offset now
    const targets = new Map<number, number>();
    live.forEach((n, i) => {
      if (infos[i].get('role') === 'master') targets.set(n.port, Number(infos[i].get('master_repl_offset')));
    });
    const replicas = live.filter((_, i) => infos[i].get('role') === 'slave');
    await this.poll(timeoutMs, 'replicas to catch up with their masters', async () => {
      for (const replica of replicas) {
        const info = await replica.info('replication');
        const masterPort = Number(info.get('master_port'));
        const target = targets.get(masterPort);
        if (target === undefined) return `${replica.address}: its master ${masterPort} was not a running master`;
        const offset = Number(info.get('slave_repl_offset'));
        if (!(offset >= target)) return `${replica.address}: at offset ${offset}, its master ${masterPort} at ${target}`;
      }
      return null;
    });
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
