/**
 * Which keys a script reads, from its text: since Redis 7.2 a tracking caller of a script tracks
 * the keys of the read-only commands the script runs (Redis 7.0 tracked the keys the script
 * declares). The proxy cannot see what a script runs on its node, so it reads the calls in the
 * body: `redis.call('get', KEYS[1])` reads declared key 1, `redis.call('get', 'user:1')` reads
 * `user:1`. A read-only call whose keys are not written out (`redis.call('get', ARGV[1])`,
 * `unpack(KEYS)`, a key built at run time) makes the answer null: then the declared keys are
 * tracked, as Redis 7.0 did. A read in a branch that does not run is tracked all the same.
 */
import { CommandInfo, CommandTable } from '../commands/table';
import { keyPositions, resolveSubcommand } from '../commands/keys';

/** A key a script reads: a literal name, or the index (from 0) of one of its declared keys. */
export type ScriptKey = Buffer | number;

/** An argument the text does not tell (a variable, an expression). */
const UNKNOWN = Buffer.from('\0unknown\0');
const REDIS_CALL = /\bredis\s*\.\s*p?call\s*\(/g;
const STRING = /^(['"])([^'"\\\n\0]*)\1$/;
const DECLARED = /^KEYS\s*\[\s*(\d+)\s*\]$/;
/** How a `KEYS[n]` argument is carried (no string literal has a NUL: see STRING). */
const DECLARED_MARK = '\0KEYS\0';
const NUMBER = /^-?\d+(\.\d+)?$/;

/**
 * The keys the script's read-only calls read, in the order written; null when some read-only call's
 * keys cannot be told from the text. `table` names the commands (unknown ones: null).
 */
export function scriptReadKeys(body: string, table: CommandTable): ScriptKey[] | null {
  const out: ScriptKey[] = [];
  for (const m of body.matchAll(REDIS_CALL)) {
    const argv = callArguments(body, m.index + m[0].length);
    if (argv === null || argv.length === 0 || argv[0] === UNKNOWN) return null;
    const top = table.get(argv[0].toString('latin1').toLowerCase());
    if (top === undefined) return null;
    const resolved = resolveSubcommand(top, argv);
    if (resolved === null || Buffer.isBuffer(resolved)) {
      // A container whose subcommand is not written out: unknown if any of its forms reads.
      if (top.subcommands !== null && [...top.subcommands.values()].some((c) => c.flags.has('readonly'))) return null;
      continue;
    }
    if (!resolved.flags.has('readonly')) continue;
    const keys = callKeys(resolved, argv);
    if (keys === null) return null;
    out.push(...keys);
  }
  return out;
}

/** The keys of one read-only call, or null when one of them (or what finds them) is not written out. */
function callKeys(info: CommandInfo, argv: Buffer[]): ScriptKey[] | null {
  const positions = keyPositions(info, argv);
  if (positions === null) return null;
  // Keys found by a count or a keyword depend on every argument.
  const searched = info.keySpecs.some((s) => s.find?.kind === 'keynum' || (s.begin !== null && 'keyword' in s.begin));
  const last = positions.length === 0 ? -1 : Math.max(...positions);
  for (let i = 0; i < argv.length; i++) if (argv[i] === UNKNOWN && (searched || i <= last)) return null;
  return positions.map((p) => {
    const text = argv[p].toString('latin1');
    return text.startsWith(DECLARED_MARK) ? Number(text.slice(DECLARED_MARK.length)) - 1 : argv[p];
  });
}

/**
 * The arguments of a call whose `(` ends just before `from`: string and number literals as their
 * value, `KEYS[n]` marked (callKeys reads it), anything else UNKNOWN. Null when the call does
 * not end in the text.
 */
function callArguments(body: string, from: number): Buffer[] | null {
  const tokens: string[] = [];
  let depth = 0;
  let start = from;
  for (let i = from; i < body.length; i++) {
    const ch = body[i];
    if (ch === "'" || ch === '"') {
      const end = stringEnd(body, i);
      if (end < 0) return null;
      i = end;
    } else if (ch === '(' || ch === '[' || ch === '{') depth++;
    else if (ch === ']' || ch === '}') depth--;
    else if (ch === ')' && depth > 0) depth--;
    else if ((ch === ',' || ch === ')') && depth === 0) {
      tokens.push(body.slice(start, i).trim());
      start = i + 1;
      if (ch === ')') return tokens.length === 1 && tokens[0] === '' ? [] : tokens.map(argument);
    }
  }
  return null;
}

function argument(token: string): Buffer {
  const s = STRING.exec(token);
  if (s !== null) return Buffer.from(s[2], 'latin1');
  const declared = DECLARED.exec(token);
  if (declared !== null) return Buffer.from(DECLARED_MARK + declared[1], 'latin1');
  if (NUMBER.test(token)) return Buffer.from(token, 'latin1');
  return UNKNOWN;
}

/** Where a string literal opening at `at` ends (its closing quote), or -1. */
function stringEnd(body: string, at: number): number {
  const quote = body[at];
  for (let i = at + 1; i < body.length; i++) {
    if (body[i] === '\\') i++;
    else if (body[i] === quote) return i;
    else if (body[i] === '\n') return -1;
  }
  return -1;
}

/**
 * The keys a call of the script reads, for its arguments (`EVAL body numkeys key ...`, `FCALL name
 * numkeys key ...`): a declared key past numkeys is Lua's nil, whose call fails and tracks nothing.
 */
export function readKeysOfCall(keys: readonly ScriptKey[], args: readonly Buffer[]): Buffer[] {
  const numkeys = Number.parseInt(args[2]?.toString('latin1') ?? '0', 10);
  const out: Buffer[] = [];
  for (const k of keys) {
    if (Buffer.isBuffer(k)) out.push(k);
    else if (k < numkeys && 3 + k < args.length) out.push(args[3 + k]);
  }
  return out;
}
