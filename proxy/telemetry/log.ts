/**
 * The proxy's logger (pino). Lines go to stderr, so stdout stays for what commands print, or to
 * `log.file` (log-output.ts has where and how). Never log a request's arguments or a password:
 * they are user data and secrets.
 */
import pino from 'pino';
import { LogOutput } from './log-output';
import { stepLogLevel } from './log-level';

const output = new LogOutput();

export const log = pino({ base: { name: 'slotproxy' }, level: process.env.SLOTPROXY_LOG_LEVEL ?? 'info' }, output);

export function setLogLevel(level: string): void {
  log.level = level;
}

/**
 * SIGTTIN (`up`) and SIGTTOU (`down`), as nutcracker: one level more or less verbose, said at the
 * new level (so a step down to `warn` is said as a warning, and a step up to `debug` is the first
 * debug line). Returns the new level.
 */
export function stepLogLevelBySignal(signal: string, direction: 'up' | 'down'): string {
  const from = log.level;
  const to = stepLogLevel(from, direction);
  log.level = to;
  if (to !== 'silent') log[to]({ signal, from, to }, to === from ? `log level stays ${to}` : `log level ${direction === 'up' ? 'raised' : 'lowered'} to ${to}`);
  return to;
}

/** Logs go to `file` (appended, reopened if it is the current one), or to stderr for null. Throws, changing nothing, when it cannot be opened. */
export function logTo(file: string | null): void {
  output.to(file);
}

/**
 * SIGUSR1 and SIGHUP, as nutcracker's log reopen: the log file is opened again under its name, so
 * that after logrotate renamed it, lines go to a new file. Logged in the new file; a file that
 * cannot be opened leaves the logs where they went, and says so there. False, logging nothing,
 * when logs go to stderr.
 */
export function reopenLogFile(signal: string): boolean {
  const file = output.file;
  if (file === null) return false;
  try {
    output.to(file);
    log.info({ signal, file }, 'log file reopened');
  } catch (err) {
    log.error({ signal, file, err: err instanceof Error ? err.message : String(err) }, 'cannot reopen the log file; logging on to the old one');
  }
  return true;
}
