/**
 * nutcracker's log level steps (SIGTTIN one up, SIGTTOU one down) on pino's levels. nutcracker
 * goes from LOG_EMERG to LOG_PVERB and stops at either end; here the ladder is fatal, error, warn,
 * info, debug, trace. `silent` is below the ladder: up from it is fatal, down from it stays silent.
 */
import type { Level, LevelWithSilent } from 'pino';

const LADDER: readonly Level[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'];

function isLevel(level: string): level is Level {
  return (LADDER as readonly string[]).includes(level);
}

/** The level one step more verbose (`up`) or less verbose (`down`) than `level`; the same at either end. */
export function stepLogLevel(level: string, direction: 'up' | 'down'): LevelWithSilent {
  if (!isLevel(level)) return direction === 'up' ? 'fatal' : 'silent';
  const i = LADDER.indexOf(level) + (direction === 'up' ? 1 : -1);
  return LADDER[Math.min(LADDER.length - 1, Math.max(0, i))];
}
