// Child processes the benchmark starts itself (proxies, redis-benchmark): started so they die
// with us, stopped with SIGTERM then SIGKILL, and all killed if the benchmark exits early.
//
// redis-servers are not handled here: cmd/sandbox/live-registry.ts has its own registry.

import { ChildProcess, spawn } from 'node:child_process';
import { findExecutable, findRedisExecutable } from '../cmd/sandbox/executables';

export { findExecutable, findRedisExecutable };

const TAIL_BYTES = 16 * 1024;

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** SIGKILLs every child still running; synchronous so it can run in an 'exit' handler. */
export function killAllChildrenSync(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
  live.clear();
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', killAllChildrenSync);
}

const SETPRIV = findExecutable('setpriv');

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running child with its output tail kept for error messages. */
export class ManagedProcess {
  private stdoutText = '';
  private stderrText = '';
  private exitInfo: ExitInfo | null = null;
  readonly exited: Promise<ExitInfo>;

  private constructor(
    readonly child: ChildProcess,
    readonly description: string,
    keepAllStdout: boolean,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => {
      this.stdoutText += chunk.toString('utf8');
      // redis-benchmark's CSV is short and must be read whole; a proxy's output only as a tail.
      if (!keepAllStdout) this.stdoutText = this.stdoutText.slice(-TAIL_BYTES);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderrText = (this.stderrText + chunk.toString('utf8')).slice(-TAIL_BYTES);
    });
    this.exited = new Promise<ExitInfo>((resolve) => {
      const done = (info: ExitInfo): void => {
        live.delete(child);
        this.exitInfo = info;
        resolve(info);
      };
      // 'close' (not 'exit') so that all output has been read when it fires.
      child.once('close', (code, signal) => done({ code, signal }));
      child.once('error', () => done({ code: null, signal: null }));
    });
  }

  /**
   * Starts `command`. With `dieWithParent`, it runs under `setpriv --pdeathsig SIGKILL` (which execs
   * in place, so the pid is the command's own) and dies even if the benchmark is SIGKILLed. With
   * `stdin: 'pipe'`, the parent talks to it through `child.stdin`.
   */
  static start(
    command: string,
    args: readonly string[],
    opts: { cwd?: string; dieWithParent?: boolean; keepAllStdout?: boolean; stdin?: 'pipe' } = {},
  ): ManagedProcess {
    installExitHook();
    const wrap = opts.dieWithParent !== false && SETPRIV !== null;
    const [bin, argv] = wrap && SETPRIV !== null ? [SETPRIV, ['--pdeathsig', 'SIGKILL', '--', command, ...args]] : [command, [...args]];
    const child = spawn(bin, argv, { cwd: opts.cwd, stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'] });
    live.add(child);
    return new ManagedProcess(child, [command, ...args].join(' '), opts.keepAllStdout === true);
  }

  get pid(): number {
    const { pid } = this.child;
    if (pid === undefined) throw new Error(`${this.description}: not started`);
    return pid;
  }

  get running(): boolean {
    return this.exitInfo === null;
  }

  get stdout(): string {
    return this.stdoutText;
  }

  get stderr(): string {
    return this.stderrText;
  }

  /** "exited with code 1" / "killed by SIGKILL" / "running". */
  describeExit(): string {
    const info = this.exitInfo;
    if (info === null) return 'running';
    return info.signal !== null ? `killed by ${info.signal}` : `exited with code ${String(info.code)}`;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  async stop(graceMs = 5_000): Promise<ExitInfo> {
    if (this.running) {
      this.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), graceMs);
      });
      const first = await Promise.race([this.exited, timedOut]);
      clearTimeout(timer);
      if (first === 'timeout') this.child.kill('SIGKILL');
    }
    return this.exited;
  }
}
