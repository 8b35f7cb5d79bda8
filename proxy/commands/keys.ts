/**
 * Where a request's keys are, from its command's key specs: Redis's own getKeysUsingKeySpecs
 * (db.c, 7.0) transcribed, so the proxy and the node agree on which arguments are keys.
 */
import { CommandInfo, KeySpec } from './table';

/** The command resolved to its subcommand (for containers such as OBJECT, XINFO, MEMORY). */
export function resolveSubcommand(info: CommandInfo, args: readonly Buffer[]): CommandInfo | Buffer | null {
  if (info.subcommands === null) return info;
  if (args.length < 2) return null;
  return info.subcommands.get(args[1].toString('latin1').toLowerCase()) ?? args[1];
}

/** True when the argument count breaks the command's arity (Redis checks this before anything else). */
export function arityMismatch(info: CommandInfo, argc: number): boolean {
  return info.arity > 0 ? argc !== info.arity : argc < -info.arity;
}

/**
 * Positions of the keys in `args`, or null when only the node can tell (COMMAND GETKEYS).
 * An empty result for a command that has keys means the arguments are malformed; the node will
 * answer with its own error when the command is sent to it. With `acl`, each key's spec's
 * KeySpec.acl is appended to it, in the same order (0 for a table without key specs).
 */
export function keyPositions(info: CommandInfo, args: readonly Buffer[], acl?: number[]): number[] | null {
  if (info.needsGetKeys) return null;
  if (info.keySpecs.length === 0) {
    const positions = legacyPositions(info, args.length);
    for (let i = 0; acl !== undefined && i < positions.length; i++) acl.push(0);
    return positions;
  }
  const argc = args.length;
  if (acl === undefined && info.keySpecs.length === 1) {
    // GET, SET, INCR, LPUSH, HSET ...: one key at a fixed place. A shared list, no array per request.
    const at = oneKeyAt(info.keySpecs[0]);
    if (at > 0) return at < argc ? oneKey(at) : [];
  }
  const out: number[] = [];
  for (const spec of info.keySpecs) {
    if (spec.notKey) continue;
    const before = out.length;
    const found = specPositions(spec, args, argc, out);
    if (!found) {
      if (acl !== undefined) acl.length = 0;
      return [];
    }
    for (let i = before; acl !== undefined && i < out.length; i++) acl.push(spec.acl);
  }
  return out;
}

/** Where a spec's one key is when it names exactly one, at a fixed index; 0 otherwise. */
function oneKeyAt(spec: KeySpec): number {
  const begin = spec.begin;
  const find = spec.find;
  if (spec.notKey || begin === null || !('index' in begin) || find === null || find.kind !== 'range') return 0;
  return find.lastKey === 0 ? begin.index : 0;
}

/** Shared, frozen: [i] for each key index i (a write would throw). */
const ONE_KEY: number[][] = [];

function oneKey(at: number): number[] {
  return (ONE_KEY[at] ??= Object.freeze([at]) as number[]);
}

/** Appends the keys of one spec to `out`; false when the arguments do not fit the spec (Redis: invalid_spec). */
function specPositions(spec: KeySpec, args: readonly Buffer[], argc: number, out: number[]): boolean {
  let first = 0;
  const begin = spec.begin;
  if (begin === null || spec.find === null) return false;
  if ('index' in begin) {
    first = begin.index;
  } else {
    const start = begin.startFrom > 0 ? begin.startFrom : argc + begin.startFrom;
    const end = begin.startFrom > 0 ? argc - 1 : 1;
    for (let i = start; i !== end; i = start <= end ? i + 1 : i - 1) {
      if (i >= argc || i < 1) break;
      if (args[i].length === begin.keyword.length && args[i].toString('latin1').toLowerCase() === begin.keyword) {
        first = i + 1;
        break;
      }
    }
    if (first === 0) return true; // keyword absent: this spec names no keys
  }
  let last: number;
  let step: number;
  const find = spec.find;
  if (find.kind === 'range') {
    step = find.keyStep;
    if (find.lastKey >= 0) last = first + find.lastKey;
    else if (find.limit === 0) last = argc + find.lastKey;
    else last = first + (Math.floor((argc - first) / find.limit) + find.lastKey);
  } else {
    step = find.keyStep;
    if (first + find.keyNumIndex >= argc) return false;
    const numKeys = parseInteger(args[first + find.keyNumIndex]);
    if (numKeys === null || numKeys < 0) return false;
    first += find.firstKey;
    last = first + numKeys - 1;
  }
  if (last >= argc || last < first || first >= argc) return false;
  for (let i = first; i <= last; i += step) out.push(i);
  return true;
}

function legacyPositions(info: CommandInfo, argc: number): number[] {
  if (info.firstKey <= 0) return [];
  const last = info.lastKey < 0 ? argc + info.lastKey : info.lastKey;
  const out: number[] = [];
  for (let i = info.firstKey; i <= last && i < argc; i += Math.max(1, info.keyStep)) out.push(i);
  return out;
}

/** A decimal integer as Redis's string2ll accepts it, or null. */
export function parseInteger(b: Buffer): number | null {
  const s = b.toString('latin1');
  if (!/^(0|-?[1-9][0-9]{0,17})$/.test(s)) return null;
  return Number(s);
}
