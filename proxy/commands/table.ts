/**
 * What the proxy knows about each command: arity, flags and where its keys are. Built from the back
 * end's own `COMMAND` reply, so new commands and modules route without a code change; a table
 * recorded from Redis 7.0 (fallback-table.json) is used only when no node answers COMMAND.
 */
import { Reply, asArray, asNumber, asString } from '../resp/decode-reply';
import { NameIndex } from './name-index';

/** Redis 7 key spec: where the keys begin (begin_search) and how many follow (find_keys). */
export interface KeySpec {
  readonly begin: { readonly index: number } | { readonly keyword: string; readonly startFrom: number } | null;
  readonly find:
    | { readonly kind: 'range'; readonly lastKey: number; readonly keyStep: number; readonly limit: number }
    | { readonly kind: 'keynum'; readonly keyNumIndex: number; readonly firstKey: number; readonly keyStep: number }
    | null;
  /** Keys may hide where the spec cannot see them (SORT ... BY, MIGRATE ... KEYS): ask COMMAND GETKEYS. */
  readonly incomplete: boolean;
  /** Not really a key (e.g. a channel): ignored for routing. */
  readonly notKey: boolean;
  /**
   * What Redis's ACL requires of a key pattern for these keys (ACLSelectorCheckKey): KEY_READS when
   * the spec has `access`, KEY_WRITES when it has `insert`, `delete` or `update`; 0 when neither.
   */
  readonly acl: number;
  /** `variable_flags`: the real flags depend on the arguments (SET ... GET, BITFIELD ... SET). */
  readonly variableFlags: boolean;
}

/** Bits of KeySpec.acl, the same as a key pattern's `%R` and `%W`. */
export const KEY_READS = 1;
export const KEY_WRITES = 2;

export interface CommandInfo {
  /** Lower case; a subcommand is `container|sub` as Redis writes it. */
  readonly name: string;
  readonly arity: number;
  readonly flags: ReadonlySet<string>;
  /** Legacy first/last/step (used when the back end has no key specs, Redis < 7). */
  readonly firstKey: number;
  readonly lastKey: number;
  readonly keyStep: number;
  readonly keySpecs: readonly KeySpec[];
  /** Key positions cannot be computed from the specs: use COMMAND GETKEYS. */
  readonly needsGetKeys: boolean;
  readonly subcommands: ReadonlyMap<string, CommandInfo> | null;
  /**
   * The ACL categories rules such as `+@read` reach it by (COMMAND's 7th element, without the `@`):
   * its own and, for a subcommand, its container's, since Redis applies a category rule that
   * matches a container to all of its subcommands.
   */
  readonly aclCategories: ReadonlySet<string>;
  /** Calls through this proxy (Redis's own `calls`): one field increment on the hot path, read by /metrics. */
  readonly counters: { calls: number };
  /** What every forwarded request asks about, as bits (READONLY, BLOCKING, SCRIPT_NAMED): no Set or Map lookup per request. */
  readonly traits: number;
}

/** Bits of CommandInfo.traits: the `readonly` and `blocking` flags, and a name that may be a script call. */
export const READONLY = 1;
export const BLOCKING = 2;
/** Named eval... or fcall...: EVAL, EVALSHA, FCALL and their _RO forms (dispatch/script-call.ts) are looked up only then. */
export const SCRIPT_NAMED = 4;

/** CommandInfo.traits of command `name` with `flags`. */
export function traitsOf(name: string, flags: ReadonlySet<string>): number {
  return (flags.has('readonly') ? READONLY : 0) | (flags.has('blocking') ? BLOCKING : 0) | (/^(eval|fcall)/.test(name) ? SCRIPT_NAMED : 0);
}

export class CommandTable {
  /** By lower-case name (as COMMAND gives them): the proxy's own lookups. */
  private readonly byName = new Map<string, CommandInfo>();
  /** The same commands, found by a request's name bytes in any case (the hot path). */
  private readonly byBytes: NameIndex<CommandInfo>;

  constructor(commands: Iterable<CommandInfo>, readonly source: 'backend' | 'fallback') {
    for (const c of commands) this.byName.set(c.name, c);
    this.byBytes = new NameIndex(this.byName);
  }

  /** From a decoded `COMMAND` reply. */
  static fromCommandReply(reply: Reply, source: 'backend' | 'fallback' = 'backend'): CommandTable {
    return new CommandTable(asArray(reply).map((entry) => parseCommand(asArray(entry))), source);
  }

  /**
   * Read when asked and not kept in require's cache: a proxy whose back end answers COMMAND holds
   * neither the recorded JSON (290 KiB of heap) nor this table for longer than its start-up.
   */
  static fallback(): CommandTable {
    const file = require.resolve('./fallback-table.json');
    const recorded = require(file) as typeof import('./fallback-table.json');
    delete require.cache[file];
    return CommandTable.fromCommandReply(recorded as Reply, 'fallback');
  }

  get size(): number {
    return this.byName.size;
  }

  /** The command named by `name` (any case), or undefined. */
  lookup(name: Buffer): CommandInfo | undefined {
    return this.byBytes.get(name);
  }

  /** The command of lower-case name `name`, or undefined. */
  get(name: string): CommandInfo | undefined {
    return this.byName.get(name);
  }

  /** Every command and subcommand, once each. */
  *all(): IterableIterator<CommandInfo> {
    for (const info of this.byName.values()) {
      yield info;
      if (info.subcommands !== null) yield* info.subcommands.values();
    }
  }
}

function parseCommand(e: Reply[], containerCategories: readonly string[] = []): CommandInfo {
  const name = asString(e[0]).toLowerCase();
  const flags = new Set(asArray(e[2]).map((f) => asString(f).toLowerCase()));
  const keySpecs = e.length > 8 && Array.isArray(e[8]) ? asArray(e[8]).map((s) => parseKeySpec(asArray(s))) : [];
  const categories = e.length > 6 && Array.isArray(e[6]) ? asArray(e[6]).map((c) => asString(c).replace(/^@/, '').toLowerCase()) : [];
  const subcommands =
    e.length > 9 && Array.isArray(e[9]) && e[9].length > 0
      ? new Map(asArray(e[9]).map((s) => {
          const sub = parseCommand(asArray(s), categories);
          return [sub.name.slice(sub.name.indexOf('|') + 1), sub] as const;
        }))
      : null;
  const movable = flags.has('movablekeys');
  const needsGetKeys =
    keySpecs.some((s) => (s.incomplete || s.begin === null || s.find === null) && !s.notKey) ||
    (keySpecs.length === 0 && movable);
  return Object.freeze({
    name,
    arity: asNumber(e[1]),
    flags,
    firstKey: asNumber(e[3]),
    lastKey: asNumber(e[4]),
    keyStep: asNumber(e[5]),
    keySpecs,
    needsGetKeys,
    subcommands,
    aclCategories: new Set([...categories, ...containerCategories]),
    counters: { calls: 0 },
    traits: traitsOf(name, flags),
  });
}

/** A key spec comes as a flat list of name/value pairs, nested the same way. */
function pairs(list: Reply): Map<string, Reply> {
  const a = asArray(list);
  const m = new Map<string, Reply>();
  for (let i = 0; i + 1 < a.length; i += 2) m.set(asString(a[i]), a[i + 1]);
  return m;
}

function parseKeySpec(raw: Reply[]): KeySpec {
  const spec = pairs(raw);
  const flags = new Set(asArray(spec.get('flags') ?? []).map((f) => asString(f).toLowerCase()));
  const bs = pairs(spec.get('begin_search') ?? []);
  const bsSpec = pairs(bs.get('spec') ?? []);
  let begin: KeySpec['begin'] = null;
  if (bs.get('type') === 'index') begin = { index: asNumber(bsSpec.get('index') ?? null) };
  else if (bs.get('type') === 'keyword') {
    begin = { keyword: asString(bsSpec.get('keyword') ?? null).toLowerCase(), startFrom: asNumber(bsSpec.get('startfrom') ?? null) };
  }
  const fk = pairs(spec.get('find_keys') ?? []);
  const fkSpec = pairs(fk.get('spec') ?? []);
  let find: KeySpec['find'] = null;
  if (fk.get('type') === 'range') {
    find = {
      kind: 'range',
      lastKey: asNumber(fkSpec.get('lastkey') ?? null),
      keyStep: asNumber(fkSpec.get('keystep') ?? null),
      limit: asNumber(fkSpec.get('limit') ?? null),
    };
  } else if (fk.get('type') === 'keynum') {
    find = {
      kind: 'keynum',
      keyNumIndex: asNumber(fkSpec.get('keynumidx') ?? null),
      firstKey: asNumber(fkSpec.get('firstkey') ?? null),
      keyStep: asNumber(fkSpec.get('keystep') ?? null),
    };
  }
  const acl = (flags.has('access') ? KEY_READS : 0) | (flags.has('insert') || flags.has('delete') || flags.has('update') ? KEY_WRITES : 0);
  return { begin, find, incomplete: flags.has('incomplete'), notKey: flags.has('not_key'), acl, variableFlags: flags.has('variable_flags') };
}
