/**
 * `slotproxy nutcracker -d`: run in the background, as nutcracker -d does. The command runs again
 * as a detached child (its own session, no terminal) with the same arguments, told by
 * SLOTPROXY_DAEMON_CHILD that it is the daemon; its stdin and stdout are /dev/null and its stderr
 * the `-o` file (else /dev/null). The parent waits until the child serves (then exits 0, having
 * printed nothing) or failed (then prints the child's error and exits with its code), so a service
 * script that starts it knows the outcome, which nutcracker's parent, exiting at once, does not say.
 * The child writes the `-p` pid file itself: its pid, there before the parent exits.
 */
import { spawn } from 'node:child_process';
import cluster from 'node:cluster';
import fs from 'node:fs';
import { failure } from './fail';

const CHILD_ENV = 'SLOTPROXY_DAEMON_CHILD';

/** What the child tells the parent over the IPC channel. */
type DaemonMessage = { serving: true } | { failed: string; code: number };

/**
 * True in the daemon's child: -d is then already done. Not in its --workers (they inherit the
 * environment, and their IPC channel is to the daemon, not to the command).
 */
export function isDaemonChild(): boolean {
  return process.env[CHILD_ENV] === '1' && typeof process.send === 'function' && cluster.isPrimary;
}

/** The parent's side: starts the child and ends this process with its outcome. */
export function daemonize(logFile: string | undefined): Promise<never> {
  const stderr = logFile === undefined ? 'ignore' : fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    detached: true,
    stdio: ['ignore', 'ignore', stderr, 'ipc'],
    env: { ...process.env, [CHILD_ENV]: '1' },
  });
  if (typeof stderr === 'number') fs.closeSync(stderr);
  return new Promise<never>(() => {
    // A failure is printed once the child is gone (its pid file with it), so that the command ends after it.
    let failed: { failed: string; code: number } | null = null;
    child.on('message', (m: DaemonMessage) => {
      if ('serving' in m) process.exit(0);
      failed = m;
    });
    child.on('error', (err) => {
      process.stderr.write(`slotproxy nutcracker: cannot start the daemon: ${err.message}\n`);
      process.exit(1);
    });
    child.on('exit', (code, signal) => {
      // A message sent just before the exit may be read after it.
      setTimeout(() => {
        if (failed !== null) {
          process.stderr.write(failed.failed);
          process.exit(failed.code);
        }
        process.stderr.write(`slotproxy nutcracker: the daemon exited (${signal ?? `code ${String(code)}`}) before serving${logFile === undefined ? '' : `; see ${logFile}`}\n`);
        process.exit(1);
      }, 50);
    });
  });
}

/** The child's side, once every pool (and the stats port) serves: the parent may go. */
export function tellServing(): void {
  if (!isDaemonChild()) return;
  process.send?.({ serving: true } satisfies DaemonMessage, () => process.disconnect());
}

/** The child's side, when it cannot start: the parent prints `err` as `fail` would; this process exits once it is sent. */
export function tellFailed(err: unknown): void {
  const { text, code } = failure(err);
  process.stderr.write(text);
  process.send?.({ failed: text, code } satisfies DaemonMessage, () => process.exit(code));
}
