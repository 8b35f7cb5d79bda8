/**
 * What a script may do, read from its text: Redis 7.0 tracks the keys a script declares for a
 * tracking caller only when the script runs a read-only command (7.2 and later track the keys those
 * commands read: script-read-keys.ts), and the proxy cannot see what a
 * script runs on its node. So it reads the body: every use of the `redis` table must be a call with
 * a literal command name (`redis.call('set', ...)`) or a harmless helper (`redis.log`, ...). Any
 * other use, or anything that reaches globals another way (`_G`, `getfenv`, `loadstring`, ...),
 * and the script is taken to read and write anything: its keys are then tracked. The error is only
 * ever an invalidation one Redis would not send, never one it would send and the proxy not.
 */
import { CommandTable } from '../commands/table';
import { ScriptKey, scriptReadKeys } from './script-read-keys';

export interface ScriptUse {
  /** It may run a read-only command: its declared keys are tracked for the caller. */
  readonly reads: boolean;
  /** It may change keys: under NOLOOP its declared keys are the caller's own writes. */
  readonly writes: boolean;
  /** Redis 7.2 and later: the keys its read-only calls read (script-read-keys.ts); null when the text does not tell. */
  readonly readKeys: readonly ScriptKey[] | null;
}

const ANYTHING: ScriptUse = { reads: true, writes: true, readKeys: null };
/** The `redis` fields that run no command. */
const HARMLESS = new Set([
  'log', 'sha1hex', 'error_reply', 'status_reply', 'setresp', 'set_repl', 'replicate_commands', 'breakpoint', 'debug',
  'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REPL_ALL', 'REPL_AOF', 'REPL_SLAVE', 'REPL_REPLICA', 'REPL_NONE',
  'REDIS_VERSION', 'REDIS_VERSION_NUM',
]);
/** Ways to reach the `redis` table without naming it. */
const ESCAPES = /\b(_G|_ENV|getfenv|setfenv|debug|rawget|loadstring|load|dofile|loadfile|require|module|package)\b/;
const REDIS = /\bredis\b/g;
/** `.call('name',` or `.pcall("name")`: a literal command name as the whole first argument. */
const CALL = /^\.p?call\s*\(\s*(['"])([A-Za-z_-]+)\1\s*[,)]/;
const FIELD = /^\.([A-Za-z_][A-Za-z0-9_]*)/;
const CACHE_MAX = 1000;

export class ScriptUses {
  /** By body: the same scripts run again and again. */
  private readonly cache = new Map<string, ScriptUse>();

  /** `body` null (an EVALSHA the proxy never saw, a function): it may do anything. */
  of(body: Buffer | null, table: CommandTable): ScriptUse {
    if (body === null) return ANYTHING;
    const text = body.toString('latin1');
    let use = this.cache.get(text);
    if (use === undefined) {
      use = scriptUse(text, table);
      if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(text, use);
    }
    return use;
  }
}

export function scriptUse(body: string, table: CommandTable): ScriptUse {
  if (ESCAPES.test(body)) return ANYTHING;
  let reads = false;
  let writes = false;
  for (const m of body.matchAll(REDIS)) {
    const rest = body.slice(m.index + 5, m.index + 205);
    const call = CALL.exec(rest);
    if (call !== null) {
      const command = table.get(call[2].toLowerCase());
      // Unknown here: the node's error, or a command the proxy's table lacks; assume the worst.
      if (command === undefined) return ANYTHING;
      const forms = command.subcommands === null ? [command] : [command, ...command.subcommands.values()];
      if (forms.some((c) => c.flags.has('readonly'))) reads = true;
      if (forms.some((c) => c.flags.has('write'))) writes = true;
      continue;
    }
    const field = FIELD.exec(rest);
    if (field === null || !HARMLESS.has(field[1])) return ANYTHING;
  }
  return { reads, writes, readKeys: reads ? scriptReadKeys(body, table) : [] };
}

/** EVAL, EVALSHA, FCALL and their _RO forms: the keys they declare are what they may read. */
export function isScriptCall(name: string): boolean {
  return name.startsWith('eval') || name.startsWith('fcall');
}

/** The script's text: EVAL's own, EVALSHA's when the proxy has seen it (`stored`); null for a function. */
export function scriptBody(name: string, args: readonly Buffer[], stored: (sha: Buffer) => Buffer | undefined): Buffer | null {
  if (name === 'eval' || name === 'eval_ro') return args[1];
  if (name === 'evalsha' || name === 'evalsha_ro') return stored(args[1]) ?? null;
  return null;
}
