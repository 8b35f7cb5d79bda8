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

/** The file logs go to; null: stderr. */
export function logFile(): string | null {
  return output.file;
}

/**
 * A fatal line on its way out before this returns, wherever logs go: for a process about to die by
 * a signal, which cannot count on stderr's asynchronous writes being done in time (a loaded machine).
 */
export function fatalNow(fields: object, msg: string): void {
  pino({ base: { name: 'slotproxy' } }, { write: (line: string) => output.writeNow(line) }).fatal(fields, msg);
}

/** `done` once every line logged so far is written (stderr is written asynchronously). */
export function flushLog(done: () => void): void {
  output.flush(() => done());
}

/**
 * SIGUSR1 and SIGHUP, as nutcracker's log reopen: the log file is opened again under its name, so
 * that after logrotate renamed it, lines go to a new file. `received` (the signal's own line) is
 * said first in the new file; a file that cannot be opened leaves the logs where they went, and
 * says so there. False, logging nothing, when logs go to stderr.
 */
export function reopenLogFile(signal: string, received: () => void): boolean {
  const file = output.file;
  if (file === null) return false;
  let failure: unknown = null;
  try {
    output.to(file);
  } catch (err) {
    failure = err;
  }
  received();
  if (failure === null) log.info({ signal, file }, 'log file reopened');
  else log.error({ signal, file, err: failure instanceof Error ? failure.message : String(failure) }, 'cannot reopen the log file; logging on to the old one');
  return true;
}
