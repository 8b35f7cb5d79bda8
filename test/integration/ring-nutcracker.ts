// Test helper: a real twemproxy (nutcracker) process over given servers, on free ports, always
// stopped by the caller (stop()).
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ManagedProcess, findExecutable } from '../../bench/children';
import { freePorts } from '../../cmd/sandbox/ports';
import { sendCommand } from '../../cmd/sandbox/resp-client';

export interface NutcrackerPool {
  hash: string;
  /** Default ketama. */
  distribution?: 'ketama' | 'modula' | 'random';
  hashTag?: string;
  /** `host:port:weight [name]` lines, as nutcracker.yml writes them. */
  servers: string[];
  /** auto_eject_hosts with this server_failure_limit and server_retry_timeout (ms). */
  autoEject?: { failureLimit: number; retryTimeoutMs: number };
}

/** The nutcracker.yml of one pool `pool` listening on `listen`. */
export function nutcrackerYaml(pool: NutcrackerPool, listen: string): string {
  return [
    'pool:',
    `  listen: ${listen}`,
    `  hash: ${pool.hash}`,
    `  distribution: ${pool.distribution ?? 'ketama'}`,
    '  redis: true',
    ...(pool.autoEject === undefined
      ? ['  auto_eject_hosts: false']
      : ['  auto_eject_hosts: true', `  server_failure_limit: ${pool.autoEject.failureLimit}`, `  server_retry_timeout: ${pool.autoEject.retryTimeoutMs}`]),
    ...(pool.hashTag === undefined ? [] : [`  hash_tag: "${pool.hashTag}"`]),
    '  servers:',
    ...pool.servers.map((s) => `   - ${s}`),
    '',
  ].join('\n');
}

export class Nutcracker {
  private constructor(readonly port: number, private readonly proc: ManagedProcess, private readonly dir: string) {}

  static bin(): string {
    const bin = findExecutable(process.env.SLOTPROXY_NUTCRACKER ?? 'nutcracker');
    if (bin === null) throw new Error('nutcracker is not installed (SLOTPROXY_NEED_NUTCRACKER=1 bash scripts/setup.sh installs it)');
    return bin;
  }

  static async start(pool: NutcrackerPool): Promise<Nutcracker> {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'slotproxy-nutcracker-'));
    const [port, statsPort] = await freePorts(2);
    const file = path.join(dir, 'nutcracker.yml');
    await fsp.writeFile(file, nutcrackerYaml(pool, `127.0.0.1:${port}`));
    const proc = ManagedProcess.start(Nutcracker.bin(), ['-c', file, '-s', String(statsPort), '-a', '127.0.0.1', '-o', path.join(dir, 'nutcracker.log')]);
    const nc = new Nutcracker(port, proc, dir);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (!proc.running) {
        const log = await fsp.readFile(path.join(dir, 'nutcracker.log'), 'utf8').catch(() => '');
        await nc.stop();
        throw new Error(`nutcracker exited: ${proc.stderr}${log}`);
      }
      try {
        if ((await sendCommand(port, ['PING'], { timeoutMs: 500 })) === 'PONG') return nc;
      } catch {
        // Not listening yet.
      }
      if (Date.now() > deadline) {
        await nc.stop();
        throw new Error('nutcracker did not answer PING within 10 s');
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async stop(): Promise<void> {
    await this.proc.stop();
    await fsp.rm(this.dir, { recursive: true, force: true });
  }
}
