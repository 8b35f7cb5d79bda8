/**
 * How a command ends on an error: a ConfigError's problems, one a line, and exit 2; anything else
 * in one line and exit 1.
 */
import { ConfigError } from '../config/load';

export function fail(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`slotproxy: invalid configuration${err.file !== undefined ? ` in ${err.file}` : ''}:\n`);
    for (const p of err.problems) process.stderr.write(`  ${p}\n`);
    process.exit(2);
  }
  process.stderr.write(`slotproxy: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
