/**
 * nutcracker's signals, other than the ones that stop the proxy or reload its config (SIGTERM,
 * SIGINT, SIGHUP: cmd/slotproxy.ts, cmd/workers.ts):
 * - SIGTTIN: log level one step more verbose; SIGTTOU: one step less (proxy/telemetry/log-level.ts).
 * - SIGUSR1: reopen the log file (logrotate's postrotate); SIGHUP does it too, before its reload.
 * - SIGUSR2: nothing (nutcracker handles it and does nothing).
 * - SIGPIPE: ignored, as nutcracker's SIG_IGN; Node itself ignores it, and a handler here could only
 *   loop (a log line to a stderr pipe nobody reads raising another).
 * Without these handlers SIGTTIN and SIGTTOU would stop the process (as a background job is
 * stopped) and SIGUSR2 would end it. A handler on SIGUSR1 also keeps Node from opening its
 * inspector port on it.
 *
 * `forward`, in the primary of `--workers N`: SIGTTIN, SIGTTOU and SIGUSR1 are passed on to every
 * worker too (each steps its own level, reopens its own file).
 */
import { log, reopenLogFile, stepLogLevelBySignal } from '../proxy/telemetry/log';

export function handleNutcrackerSignals(forward?: (signal: NodeJS.Signals) => void): void {
  process.on('SIGTTIN', () => {
    stepLogLevelBySignal('SIGTTIN', 'up');
    forward?.('SIGTTIN');
  });
  process.on('SIGTTOU', () => {
    stepLogLevelBySignal('SIGTTOU', 'down');
    forward?.('SIGTTOU');
  });
  process.on('SIGUSR1', () => {
    if (!reopenLogFile('SIGUSR1')) log.info({ signal: 'SIGUSR1' }, 'signal received; logs go to stderr, no log file to reopen');
    forward?.('SIGUSR1');
  });
  process.on('SIGUSR2', () => {
    log.info({ signal: 'SIGUSR2' }, 'signal received; nothing to do');
  });
}
