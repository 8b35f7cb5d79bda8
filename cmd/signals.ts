/**
 * nutcracker's signals, other than the ones that stop the proxy or reload its config (SIGTERM,
 * SIGINT, SIGHUP: cmd/serve.ts, cmd/workers.ts):
 * - SIGTTIN: log level one step more verbose; SIGTTOU: one step less (proxy/telemetry/log-level.ts).
 * - SIGUSR1: reopen the log file (logrotate's postrotate); SIGHUP does it too, before its reload.
 * - SIGUSR2: nothing (nutcracker handles it and does nothing).
 * - SIGSEGV: not handled, so that a real fault ends the process (see below); nutcracker's
 *   "core dumping" line is not written.
 * - SIGPIPE: ignored and not logged, as nutcracker's SIG_IGN; Node itself ignores it. A handler
 *   here would turn every write to a closed socket or pipe into a signal, and a log line to a
 *   stderr pipe nobody reads into a loop.
 * Every signal handled is logged in nutcracker's words (nc_signal.c), `signal 21 (SIGTTIN)
 * received, up logging level`, so that what an operator greps for in nutcracker's log is there.
 * Without these handlers SIGTTIN and SIGTTOU would stop the process (as a background job is
 * stopped) and SIGUSR2 would end it. A handler on SIGUSR1 also keeps Node from opening its
 * inspector port on it.
 *
 * `forward`, in the primary of `--workers N`: SIGTTIN, SIGTTOU and SIGUSR1 are passed on to every
 * worker too (each steps its own level, reopens its own file).
 */
import os from 'node:os';
import { log, logFile, reopenLogFile, stepLogLevelBySignal } from '../proxy/telemetry/log';

/** nutcracker's line for a signal: `signal 1 (SIGHUP) received, reopening log file`. */
export function signalReceived(signal: NodeJS.Signals, action?: string): string {
  return `signal ${os.constants.signals[signal]} (${signal}) received${action === undefined ? '' : `, ${action}`}`;
}

export function logSignal(signal: NodeJS.Signals, action?: string): void {
  log.info({ signal }, signalReceived(signal, action));
}

/**
 * SIGUSR1 and SIGHUP: the log file reopened, then the signal's line (`then`, when a file was
 * reopened: what else the signal does), first in the new file.
 */
export function reopenLogOnSignal(signal: NodeJS.Signals, then?: string): void {
  const action = logFile() === null ? then : ['reopening log file', then].filter((a) => a !== undefined).join(' and ');
  const received = (): void => logSignal(signal, action);
  if (!reopenLogFile(signal, received)) received();
}

export function handleNutcrackerSignals(forward?: (signal: NodeJS.Signals) => void): void {
  process.on('SIGTTIN', () => {
    logSignal('SIGTTIN', 'up logging level');
    stepLogLevelBySignal('SIGTTIN', 'up');
    forward?.('SIGTTIN');
  });
  process.on('SIGTTOU', () => {
    logSignal('SIGTTOU', 'down logging level');
    stepLogLevelBySignal('SIGTTOU', 'down');
    forward?.('SIGTTOU');
  });
  process.on('SIGUSR1', () => {
    reopenLogOnSignal('SIGUSR1');
    forward?.('SIGUSR1');
  });
  process.on('SIGUSR2', () => logSignal('SIGUSR2'));
  // No SIGSEGV handler: with one, libuv's C handler only notes the signal and returns, so a real
  // fault (in native code) re-runs the faulting instruction for ever, a hang no supervisor
  // restarts. Without it, a fault and a `kill -SEGV` both end the process by SIGSEGV at once.
}
