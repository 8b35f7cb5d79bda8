// Tests for the sandbox launcher against real redis-server processes.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freeClusterPorts, freePort, freePorts, isListening } from '../../cmd/sandbox/ports';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode, RedisStartError } from '../../cmd/sandbox/redis-node';
import { StandaloneNodes } from '../../cmd/sandbox/standalone-nodes';
import { RedisReplyError, parseInfo } from '../../cmd/sandbox/resp-client';
import { parseClusterSlots } from '../../cmd/sandbox/cluster-slots';
import { liveRedisPids } from '../../cmd/sandbox/live-registry';
import { useCluster } from '../helpers/cluster';
import { keyPerMaster } from '../helpers/master-keys';

/** Resolves the error code of a TCP connect to 127.0.0.1:port, or 'connected'. */
function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** False once the process is gone or a zombie (an orphan may wait a while for a reaper). */
function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function eventually(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

async function clusterInfo(node: RedisNode): Promise<Map<string, string>> {
  return parseInfo(String(await node.command('CLUSTER', 'INFO')));
}

describe('ports', () => {
  test('freePorts returns distinct ports that can be listened on', async () => {
    const ports = await freePorts(5);
    expect(new Set(ports).size).toBe(5);
    for (const p of ports) {
      expect(Number.isInteger(p) && p > 0 && p <= 65535).toBe(true);
      expect(await isListening(p)).toBe(false);
    }
    expect(Number.isInteger(await freePort())).toBe(true);
  });

  test('freeClusterPorts leaves room for the bus port', async () => {
    const ports = await freeClusterPorts(8);
    expect(new Set(ports).size).toBe(8);
    for (const p of ports) {
      expect(p + 10000).toBeLessThanOrEqual(65535);
      expect(ports).not.toContain(p + 10000);
      expect(await isListening(p)).toBe(false);
      expect(await isListening(p + 10000)).toBe(false);
    }
  });
});

describe('RedisNode', () => {
  test('start, cli, command, restart, destroy', async () => {
    const port = await freePort();
    const node = await RedisNode.start({ port });
    try {
      expect(node.address).toBe(`127.0.0.1:${port}`);
      expect(await node.cli('PING')).toBe('PONG');
      expect(await node.command('SET', 'k', 'v')).toBe('OK');
      expect(await node.cli('GET', 'k')).toBe('v');
      expect((await node.info('server')).get('tcp_port')).toBe(String(port));
      // redis-cli exits 0 on error replies; cli() hands them back as text.
      expect(await node.cli('NOSUCHCOMMAND')).toMatch(/^ERR unknown command/);
      await expect(node.command('NOSUCHCOMMAND')).rejects.toBeInstanceOf(RedisReplyError);

      const firstPid = node.pid;
      await node.restart();
      expect(node.pid).not.toBe(firstPid);
      expect(node.running).toBe(true);
      expect(await node.command('GET', 'k')).toBeNull(); // --save "": nothing persisted
    } finally {
      await node.destroy();
    }
    expect(node.running).toBe(false);
    expect(await connectOutcome(port)).toBe('ECONNREFUSED');
    expect(fs.existsSync(node.dir)).toBe(false);
  });

  test('stop() escalates to SIGKILL for a stopped (SIGSTOP) process', async () => {
    const node = await RedisNode.start({ port: await freePort() });
    try {
      expect(node.kill('SIGSTOP')).toBe(true);
      await node.stop();
      expect(node.running).toBe(false);
      expect(node.kill()).toBe(false);
    } finally {
      await node.destroy();
    }
  });

  test('a missing redis-server binary gives a clear error', async () => {
    await expect(
      RedisNode.start({ port: await freePort(), serverBin: '/nonexistent/redis-server' }),
    ).rejects.toThrow(/\/nonexistent\/redis-server not found .*scripts\/setup\.sh/);
  });

  test('a bad argument fails fast with redis-server output in the error', async () => {
    const started = Date.now();
    const err: unknown = await RedisNode.start({ port: await freePort(), extraArgs: ['--no-such-directive', 'x'] }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RedisStartError);
    expect((err as Error).message).toMatch(/exited with code 1 before answering PING/);
    expect((err as Error).message).toMatch(/Bad directive or wrong number of arguments/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  test('a busy port is reported as addressInUse with the log tail', async () => {
    const blocker = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    if (address === null || typeof address === 'string') throw new Error('no address');
    try {
      const err: unknown = await RedisNode.start({ port: address.port }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisStartError);
      expect((err as RedisStartError).addressInUse).toBe(true);
      expect((err as Error).message).toMatch(/redis\.log \(tail\)/);
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  test('a port already served by another redis-server is busy, not taken for its own (PONG from the wrong process)', async () => {
    // Two clusters started side by side can be handed the same free port: the node that loses the
    // bind must not read the winner's PONG as its own readiness.
    const other = await RedisNode.start({ port: (await freePorts(1))[0] });
    try {
      const err: unknown = await RedisNode.start({ port: other.port }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(RedisStartError);
      expect((err as RedisStartError).addressInUse).toBe(true);
    } finally {
      await other.destroy();
    }
  });
});

describe('RedisCluster with 3 masters and 1 replica each', () => {
  const cluster = useCluster();

  test('has 3 masters and 3 replicas, one replica per master', async () => {
    const c = cluster();
    expect(c.nodes).toHaveLength(6);
    expect(c.masters).toHaveLength(3);
    expect(c.replicas).toHaveLength(3);
    // Nodes are ordered by port and the first `masters` of them start as masters.
    expect(c.masters).toEqual(c.nodes.slice(0, 3));
    expect(c.nodes.map((n) => n.port)).toEqual([...c.nodes.map((n) => n.port)].sort((a, b) => a - b));
    for (const master of c.masters) {
      const replicas = await c.replicasOf(master);
      expect(replicas).toHaveLength(1);
      expect(c.roleOf(replicas[0])).toBe('replica');
      const info = await replicas[0].info('replication');
      expect(info.get('master_link_status')).toBe('up');
    }
  });

  // Runs right after the cluster starts, when a replica may not be receiving its master's stream yet.
  test('waitForReplication: writes made before it are on every replica', async () => {
    const c = cluster();
    for (const { key, node } of await keyPerMaster(c, 'repl')) expect(await node.command('SET', key, 'v')).toBe('OK');
    await c.waitForReplication();
    for (const master of c.masters) {
      const size = await master.command('DBSIZE');
      expect(size).toBeGreaterThan(0);
      for (const replica of await c.replicasOf(master)) expect(await replica.command('DBSIZE')).toBe(size);
    }
  });

  test('seeds lists every node as 127.0.0.1:PORT', () => {
    const c = cluster();
    expect(c.seeds).toEqual(c.nodes.map((n) => `127.0.0.1:${n.port}`));
    expect(new Set(c.seeds).size).toBe(6);
    for (const seed of c.seeds) expect(seed).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  test('every node sees all 16384 slots in 3 ranges served by the masters', async () => {
    const c = cluster();
    const masterPorts = c.masters.map((m) => m.port).sort((a, b) => a - b);
    for (const node of c.nodes) {
      const ranges = parseClusterSlots(await node.command('CLUSTER', 'SLOTS'));
      expect(ranges.map((r) => [r.start, r.end])).toEqual([
        [0, 5460],
        [5461, 10922],
        [10923, 16383],
      ]);
      expect(ranges.map((r) => r.master.port).sort((a, b) => a - b)).toEqual(masterPorts);
      for (const r of ranges) expect(r.replicas).toHaveLength(1);

      const info = await clusterInfo(node);
      expect(info.get('cluster_state')).toBe('ok');
      expect(info.get('cluster_slots_assigned')).toBe('16384');
      expect(info.get('cluster_slots_ok')).toBe('16384');
      expect(info.get('cluster_known_nodes')).toBe('6');
      expect(info.get('cluster_size')).toBe('3');
    }
  });

  test('CLUSTER KEYSLOT works on a node', async () => {
    const node = cluster().nodes[0];
    expect(await node.cli('CLUSTER', 'KEYSLOT', 'foo')).toBe('12182');
    expect(await node.command('CLUSTER', 'KEYSLOT', 'foo')).toBe(12182);
    expect(await node.command('CLUSTER', 'KEYSLOT', '{user1000}.following')).toBe(
      await node.command('CLUSTER', 'KEYSLOT', '{user1000}.followers'),
    );
  });

  test('masterFor finds the owner of a slot; other masters answer MOVED', async () => {
    const c = cluster();
    const owner = await c.masterFor(12182);
    expect(c.masters).toContain(owner);
    expect(await owner.command('SET', 'foo', 'bar')).toBe('OK');
    const other = c.masters.find((m) => m !== owner);
    if (other === undefined) throw new Error('need a second master');
    await expect(other.command('GET', 'foo')).rejects.toThrow(`MOVED 12182 127.0.0.1:${owner.port}`);
    expect((await c.masterFor(0)).port).toBe((await c.slots())[0].master.port);
    await expect(c.masterFor(16384)).rejects.toThrow(RangeError);
  });
});

describe('RedisCluster failover', () => {
  const cluster = useCluster({ masters: 3, replicasPerMaster: 1 });

  test('a killed master is replaced by its replica and rejoins as a replica', async () => {
    const c = cluster();
    const oldMaster = await c.masterFor(0);
    const [replica] = await c.replicasOf(oldMaster);
    expect(oldMaster.kill('SIGKILL')).toBe(true);
    await oldMaster.waitForExit();

    await c.waitForClusterOk();
    expect(await c.masterFor(0)).toBe(replica);
    expect(c.roleOf(replica)).toBe('master');
    expect(c.roleOf(oldMaster)).toBe('unknown');
    expect(c.masters).toHaveLength(3);
    expect(c.replicas).toHaveLength(2);

    await oldMaster.restart();
    await c.waitForClusterOk();
    expect(c.roleOf(oldMaster)).toBe('replica');
    expect(await c.replicasOf(replica)).toEqual([oldMaster]);
    expect(c.masters).toHaveLength(3);
    expect(c.replicas).toHaveLength(3);
  }, 60_000);
});

describe('RedisCluster with fewer than 3 masters', () => {
  const cluster = useCluster({ masters: 1, replicasPerMaster: 1 });

  test('one master owns all slots and has one replica', async () => {
    const c = cluster();
    expect(c.masters).toHaveLength(1);
    expect(c.replicas).toHaveLength(1);
    const ranges = await c.slots();
    expect(ranges.map((r) => [r.start, r.end, r.master.port, r.replicas.map((x) => x.port)])).toEqual([
      [0, 16383, c.masters[0].port, [c.replicas[0].port]],
    ]);
  });
});

describe('RedisCluster.stop', () => {
  test('leaves no process listening and removes the temp dir', async () => {
    const c = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
    const ports = c.nodes.map((n) => n.port);
    const pids = c.nodes.map((n) => n.pid);
    expect(c.dir.startsWith(path.join(os.tmpdir(), 'slotproxy-'))).toBe(true);
    expect(fs.existsSync(c.dir)).toBe(true);
    expect(c.masters).toHaveLength(3);
    expect(c.replicas).toHaveLength(0);

    const started = Date.now();
    await c.stop();
    expect(Date.now() - started).toBeLessThan(3000);

    for (const port of ports) {
      expect(await connectOutcome(port)).toBe('ECONNREFUSED');
      expect(await connectOutcome(port + 10000)).toBe('ECONNREFUSED');
    }
    for (const pid of pids) {
      if (pid === undefined) throw new Error('node had no pid');
      expect(pidAlive(pid)).toBe(false);
      expect(liveRedisPids()).not.toContain(pid);
    }
    expect(fs.existsSync(c.dir)).toBe(false);
    await expect(c.stop()).resolves.toBeUndefined();
  });
});

describe('StandaloneNodes', () => {
  test('starts N independent servers and stops them', async () => {
    const group = await StandaloneNodes.start(3);
    const ports = group.nodes.map((n) => n.port);
    try {
      expect(group.addresses).toEqual(ports.map((p) => `127.0.0.1:${p}`));
      expect(new Set(ports).size).toBe(3);
      for (const node of group.nodes) {
        expect(await node.command('PING')).toBe('PONG');
        expect((await node.info('cluster')).get('cluster_enabled')).toBe('0');
      }
    } finally {
      await group.stop();
    }
    for (const port of ports) expect(await connectOutcome(port)).toBe('ECONNREFUSED');
    expect(fs.existsSync(group.dir)).toBe(false);
  });
});

describe('no redis-server outlives a crashed parent', () => {
  // The launcher as `npm test` compiled it (tsc to dist/), so a separate node process can load it.
  const compiledLauncher = path.join(__dirname, '../../dist/cmd/sandbox/redis-node.js');
  beforeAll(() => {
    if (!fs.existsSync(compiledLauncher)) throw new Error(`${compiledLauncher} is missing: run npm run build first`);
  });

  async function runChild(port: number, dieWithParent: boolean, ending: string): Promise<{ pid: number; dir: string }> {
    const script = `
      const { RedisNode } = require(${JSON.stringify(compiledLauncher)});
      RedisNode.start({ port: ${port}, dieWithParent: ${dieWithParent} }).then((node) => {
        process.stdout.write(JSON.stringify({ pid: node.pid, dir: node.dir }) + '\\n', () => { ${ending} });
      }, (err) => { console.error(err); process.exit(3); });
    `;
    const child = spawn(process.execPath, ['-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const parsed: unknown = JSON.parse(out.trim());
    return parsed as { pid: number; dir: string };
  }

  test('process exit without stop() kills the server (exit hook)', async () => {
    const port = await freePort();
    const { pid, dir } = await runChild(port, false, 'process.exit(0);');
    try {
      expect(await eventually(() => !pidAlive(pid), 3000)).toBe(true);
      // The main thread turns zombie before redis' other threads let go of the socket.
      expect(await eventually(async () => (await connectOutcome(port)) === 'ECONNREFUSED', 3000)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a SIGKILLed parent takes the server with it (pdeathsig)', async () => {
    const port = await freePort();
    const { pid, dir } = await runChild(port, true, "process.kill(process.pid, 'SIGKILL');");
    try {
      expect(await eventually(() => !pidAlive(pid), 3000)).toBe(true);
      // The main thread turns zombie before redis' other threads let go of the socket.
      expect(await eventually(async () => (await connectOutcome(port)) === 'ECONNREFUSED', 3000)).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
