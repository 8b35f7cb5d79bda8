/**
 * How a command ends on an error: a ConfigError's problems, one a line, and exit 2; anything else
 * in one line and exit 1.
 */
import { ConfigError } from '../config/load';

/** What `fail` prints for `err`, and the exit code. */
export function failure(err: unknown): { text: string; code: number } {
  if (err instanceof ConfigError) {
    const lines = [`slotproxy: invalid configuration${err.file !== undefined ? ` in ${err.file}` : ''}:`, ...err.problems.map((p) => `  ${p}`)];
    return { text: `${lines.join('\n')}\n`, code: 2 };
  }
  return { text: `slotproxy: ${err instanceof Error ? err.message : String(err)}\n`, code: 1 };
}

export function fail(err: unknown): never {
  const { text, code } = failure(err);
  process.stderr.write(text);
  process.exit(code);
}
