/**
 * Per-user permissions (`auth.users[].commands`, `keys`, `channels`), checked as Redis 7.0's
 * ACLSelectorCheckCmd checks one selector: the command (by name, subcommand, first argument or
 * category), then every key of the request against the key patterns with the read/write access its
 * key spec asks for, then every channel. Pure: no I/O; the dispatcher calls `check` once per
 * request, after AUTH and before the command is queued in MULTI, split or routed, as Redis checks
 * before queueing and before the cluster redirection.
 *
 * Rules are applied left to right per command, lazily, and the verdict kept per CommandInfo, so a
 * command table replaced by the back end's needs nothing recompiled. A user whose three fields are
 * absent has no UserPermissions at all (null): its sessions pay one null check per command.
 */
import { ConfigError } from '../../config/load';
import {
  ChannelRule,
  CommandRule,
  KEY_READ,
  KEY_WRITE,
  KeyRule,
  RulesInput,
  parseChannelRules,
  parseCommandRules,
  parseKeyRules,
} from '../../config/acl-rules';
import { CommandInfo, CommandTable, KEY_READS, KEY_WRITES } from '../commands/table';
import { keyPositions, parseInteger } from '../commands/keys';
import { ADMIN_COMMANDS } from '../commands/policy';
import * as errors from '../resp/errors';
import { crc16, keySlot } from '../../sharding/slot';
import { globMatch } from './glob';

/** Why a request was refused: INFO's acl_denied_* and /metrics count by it. */
export type DenialReason = 'command' | 'key' | 'channel';

export interface Denial {
  readonly reason: DenialReason;
  /** The error reply's text (Redis's). */
  readonly message: string;
  /**
   * What was refused, as ACL LOG's `object` names it: the command's full name, the key, the
   * channel. Undefined for SORT's BY/GET refusal, which Redis reports as a plain error, not logged.
   */
  readonly object?: string;
}

/**
 * The proxy's own PROXY command (migration/admin.ts), in no Redis's table: for the permission check,
 * an admin command as Redis would file it (`@admin @slow @dangerous`), named `proxy` in rules.
 */
export const PROXY_COMMAND: CommandInfo = Object.freeze({
  name: 'proxy',
  arity: -2,
  flags: new Set(['admin', 'noscript']),
  firstKey: 0,
  lastKey: 0,
  keyStep: 0,
  keySpecs: [],
  needsGetKeys: false,
  subcommands: null,
  aclCategories: new Set(['admin', 'slow', 'dangerous']),
  counters: { calls: 0 },
  traits: 0,
});

/** The fan-out admin commands (ADMIN_COMMANDS) are `@admin` and `@dangerous` whatever their Redis categories. */
const ADMIN_CATEGORIES = ['admin', 'dangerous'];

/** What the field of a user says, ready to match. */
interface KeyPattern {
  readonly pattern: Buffer;
  /** KEY_READ and/or KEY_WRITE. */
  flags: number;
}

interface Verdict {
  readonly allowed: boolean;
  /** `+select|0` rules: the command is allowed with one of these first arguments (lower case). */
  readonly firstArgs: readonly string[] | null;
}


/** Commands whose arguments name channels (Redis's commands_with_channels that ACL checks). */
const CHANNEL_ARGS: ReadonlyMap<string, { readonly all: boolean; readonly pattern: boolean }> = new Map([
  ['subscribe', { all: true, pattern: false }],
  ['ssubscribe', { all: true, pattern: false }],
  ['psubscribe', { all: true, pattern: true }],
  ['publish', { all: false, pattern: false }],
  ['spublish', { all: false, pattern: false }],
]);

export class UserPermissions {
  private readonly verdicts = new WeakMap<CommandInfo, Verdict>();
  /** Null: every command (no `commands` field). */
  private readonly commandRules: readonly CommandRule[] | null;
  private readonly allKeys: boolean;
  private readonly keyPatterns: readonly KeyPattern[];
  private readonly allChannels: boolean;
  private readonly channelPatterns: readonly Buffer[];

  /**
   * `clusterMode`: the nodes are a Redis Cluster, which refuses a SORT pattern of another slot than
   * the key's before it looks at permissions (sortPatternDenial).
   */
  constructor(
    commands: readonly CommandRule[] | null,
    keys: readonly KeyRule[] | null,
    channels: readonly ChannelRule[] | null,
    private readonly clusterMode = false,
  ) {
    this.commandRules = commands;
    const k = foldPatterns<Extract<KeyRule, { kind: 'pattern' }>, KeyPattern>(
      keys,
      (rule) => ({ pattern: Buffer.from(rule.pattern), flags: rule.flags }),
      (into, rule) => (into.flags |= rule.flags), // Redis merges `%R~x %W~x` into `~x`
    );
    this.allKeys = k.all;
    this.keyPatterns = k.patterns;
    const c = foldPatterns(channels, (rule) => ({ pattern: Buffer.from(rule.pattern) }));
    this.allChannels = c.all;
    this.channelPatterns = c.patterns.map((p) => p.pattern);
  }

  /** Denies every command (a user the reloaded config no longer has). */
  static none(): UserPermissions {
    return new UserPermissions([], [], []);
  }

  /** Null when the request is allowed; else why not, with Redis's error text. */
  check(info: CommandInfo, args: readonly Buffer[]): Denial | null {
    // Commands that need no AUTH (AUTH, HELLO, QUIT, RESET) are never refused, as in Redis.
    if (this.commandRules !== null && !info.flags.has('no_auth') && !this.commandAllowed(info, args)) {
      return { reason: 'command', message: errors.nopermCommand(info.name), object: info.name };
    }
    const key = this.allKeys ? null : this.deniedKey(info, args);
    if (key !== null) return { reason: 'key', message: errors.NOPERM_KEY, object: key };
    const channel = this.allChannels ? null : this.deniedChannel(info, args);
    if (channel !== null) return { reason: 'channel', message: errors.NOPERM_CHANNEL, object: channel };
    if ((info.name === 'sort' || info.name === 'sort_ro') && !this.readsEveryKey()) return sortPatternDenial(info.name, args, this.clusterMode);
    return null;
  }

  private commandAllowed(info: CommandInfo, args: readonly Buffer[]): boolean {
    let verdict = this.verdicts.get(info);
    if (verdict === undefined) {
      verdict = evaluate(this.commandRules ?? [], info);
      this.verdicts.set(info, verdict);
    }
    if (verdict.allowed) return true;
    if (verdict.firstArgs === null || args.length < 2) return false;
    return verdict.firstArgs.includes(asciiLower(args[1].toString('latin1')));
  }

  /** The first key the user may not access this way, or null when every key is allowed. */
  private deniedKey(info: CommandInfo, args: readonly Buffer[]): string | null {
    const acl: number[] = [];
    const positions = keyPositions(info, args, acl) ?? movableKeys(info.name, args, acl);
    // Keys only a node could find (a module's movable keys): refused unless every key is allowed.
    if (positions === null) return args.length > 1 ? args[1].toString() : '';
    const varying = VARIABLE_FLAGS.get(info.name);
    for (let i = 0; i < positions.length; i++) {
      const needed = aclFlags(varying !== undefined ? varying(args) : acl[i]);
      if (!this.keyAllowed(args[positions[i]], needed)) return args[positions[i]].toString();
    }
    return null;
  }

  /** Redis's ACLSelectorCheckKey: a pattern with at least the needed permissions that matches. */
  private keyAllowed(key: Buffer, needed: number): boolean {
    for (const p of this.keyPatterns) {
      if ((p.flags & needed) === needed && globMatch(p.pattern, key)) return true;
    }
    return false;
  }

  /** The first channel the user may not use, or null. */
  private deniedChannel(info: CommandInfo, args: readonly Buffer[]): string | null {
    const spec = CHANNEL_ARGS.get(info.name);
    if (spec === undefined) return null;
    const last = spec.all ? args.length - 1 : Math.min(1, args.length - 1);
    for (let i = 1; i <= last; i++) {
      const channel = args[i];
      // A PSUBSCRIBE pattern must be one of the user's patterns as written; a channel must match one.
      const ok = spec.pattern
        ? this.channelPatterns.some((p) => p.equals(channel))
        : this.channelPatterns.some((p) => globMatch(p, channel));
      if (!ok) return channel.toString();
    }
    return null;
  }

  /**
   * Whether a client subscribed to these may stay subscribed (Redis's ACLKillPubsubClientsIfNeeded):
   * every channel matches a pattern of the user's, every pattern is one of them as written.
   */
  allowsSubscriptions(channels: readonly Buffer[], patterns: readonly Buffer[]): boolean {
    if (this.allChannels) return true;
    return patterns.every((p) => this.channelPatterns.some((x) => x.equals(p))) && channels.every((c) => this.channelPatterns.some((x) => globMatch(x, c)));
  }

  /** SORT's BY and GET read keys named by patterns: Redis wants read access to every key for them. */
  private readsEveryKey(): boolean {
    return this.allKeys || this.keyPatterns.some((p) => (p.flags & KEY_READ) !== 0 && p.pattern.length === 1 && p.pattern[0] === 0x2a);
  }
}

/** KeySpec.acl bits -> a key pattern's permission bits. */
function aclFlags(specAcl: number): number {
  return ((specAcl & KEY_READS) !== 0 ? KEY_READ : 0) | ((specAcl & KEY_WRITES) !== 0 ? KEY_WRITE : 0);
}

/** The rules of one user's `commands`, applied left to right to one command (Redis's ACLSetSelector, per command). */
export function evaluate(rules: readonly CommandRule[], info: CommandInfo): Verdict {
  const categories = ADMIN_COMMANDS.has(info.name) ? new Set([...info.aclCategories, ...ADMIN_CATEGORIES]) : info.aclCategories;
  // Category rules leave module commands alone, as Redis's do.
  const byCategory = !info.flags.has('module');
  let allowed = false;
  let firstArgs: string[] | null = null;
  for (const rule of rules) {
    if (rule.kind === 'all' || (rule.kind === 'category' && byCategory && categories.has(rule.category))) {
      allowed = rule.allow;
      firstArgs = null;
    } else if (rule.kind === 'command') {
      if (rule.sub === null ? info.name === rule.name || info.name.startsWith(`${rule.name}|`) : info.name === `${rule.name}|${asciiLower(rule.sub)}`) {
        allowed = rule.allow;
        firstArgs = null;
      } else if (rule.sub !== null && rule.allow && info.name === rule.name && info.subcommands === null) {
        (firstArgs ??= []).push(asciiLower(rule.sub));
      }
    }
  }
  return { allowed, firstArgs };
}

/**
 * A pattern field's rules folded as Redis keeps them: `all` (allkeys, allchannels) or the list of
 * patterns since the last reset, a pattern written twice kept once (`merge` joins the second in).
 */
export function foldPatterns<R extends { kind: 'pattern'; pattern: string }, P extends { pattern: Buffer }>(
  rules: readonly (R | { kind: 'all' } | { kind: 'reset' })[] | null,
  make: (rule: R) => P,
  merge: (into: P, rule: R) => void = () => undefined,
): { all: boolean; patterns: P[] } {
  if (rules === null) return { all: true, patterns: [] };
  let all = false;
  let patterns: P[] = [];
  for (const rule of rules) {
    if (rule.kind !== 'pattern') {
      all = rule.kind === 'all';
      patterns = [];
      continue;
    }
    const same = patterns.find((p) => p.pattern.equals(Buffer.from(rule.pattern)));
    if (same !== undefined) merge(same, rule);
    else patterns.push(make(rule));
  }
  return { all, patterns };
}

/**
 * Commands whose KeySpec flags depend on the arguments (`variable_flags`): the KeySpec.acl bits
 * their keys really need, as Redis's setGetKeys and bitfieldGetKeys give them.
 */
const VARIABLE_FLAGS: ReadonlyMap<string, (args: readonly Buffer[]) => number> = new Map([
  // SET k v ... GET reads the old value; a plain SET only overwrites.
  ['set', (args: readonly Buffer[]) => (args.slice(3).some((a) => isWord(a, 'get')) ? KEY_READS | KEY_WRITES : KEY_WRITES)],
  ['bitfield', bitfieldAccess],
]);

function bitfieldAccess(args: readonly Buffer[]): number {
  for (let i = 2; i < args.length; i++) {
    const left = args.length - i - 1;
    if (isWord(args[i], 'get') && left >= 2) i += 2;
    else if (isWord(args[i], 'overflow') && left >= 1) i += 1;
    else return KEY_READS | KEY_WRITES; // SET, INCRBY, or a syntax error: Redis assumes a write
  }
  return KEY_READS;
}

/**
 * Keys that key specs cannot find (the spec is incomplete), as Redis's own getkeys procedures find
 * them, with their KeySpec.acl bits; null for a command the proxy has no procedure for.
 */
function movableKeys(name: string, args: readonly Buffer[], acl: number[]): number[] | null {
  if (name === 'sort' || name === 'sort_ro') {
    // sortGetKeys: the key is read; the last STORE's destination is written (SORT_RO has none).
    const positions = [1];
    acl.push(KEY_READS);
    let store = 0;
    for (let i = 2; name === 'sort' && i < args.length; i++) {
      if (isWord(args[i], 'limit')) i += 2;
      else if (isWord(args[i], 'get') || isWord(args[i], 'by')) i += 1;
      else if (isWord(args[i], 'store') && i + 1 < args.length) store = i + 1;
    }
    if (store > 0) {
      positions.push(store);
      acl.push(KEY_WRITES);
    }
    return positions;
  }
  if (name === 'migrate') {
    // migrateGetKeys: the key argument, or every key after KEYS when it is empty; read and deleted.
    let first = 3;
    let count = 1;
    for (let i = 6; i < args.length; i++) {
      if (isWord(args[i], 'keys')) {
        if (args[3].length > 0) return [];
        first = i + 1;
        count = args.length - first;
        break;
      }
      if (isWord(args[i], 'auth')) i += 1;
      else if (isWord(args[i], 'auth2')) i += 2;
    }
    const positions: number[] = [];
    for (let i = 0; i < count && first + i < args.length; i++) {
      positions.push(first + i);
      acl.push(KEY_READS | KEY_WRITES);
    }
    return positions;
  }
  return null;
}

/**
 * SORT ... BY <pattern with *> and GET read keys the patterns name; Redis refuses them, while parsing
 * the options, to a user without read access to every key. Options are read in Redis's order, so a
 * syntax or number error met first is left to the node, and so is, on a Redis Cluster, a pattern of
 * another slot than the key's, which the node refuses before it looks at permissions.
 */
function sortPatternDenial(name: string, args: readonly Buffer[], clusterMode: boolean): Denial | null {
  const readonly = name === 'sort_ro';
  const otherSlot = (pattern: Buffer): boolean => clusterMode && patternHashSlot(pattern) !== keySlot(args[1]);
  for (let j = 2; j < args.length; j++) {
    const left = args.length - j - 1;
    const a = args[j];
    if (isWord(a, 'asc') || isWord(a, 'desc') || isWord(a, 'alpha')) continue;
    if (isWord(a, 'limit') && left >= 2) {
      if (parseInteger(args[j + 1]) === null || parseInteger(args[j + 2]) === null) return null;
      j += 2;
    } else if (!readonly && isWord(a, 'store') && left >= 1) {
      j++;
    } else if (isWord(a, 'by') && left >= 1) {
      if (args[j + 1].includes(0x2a)) return otherSlot(args[j + 1]) ? null : { reason: 'key', message: errors.sortOptionDenied('BY') };
      j++;
    } else if (isWord(a, 'get') && left >= 1) {
      return otherSlot(args[j + 1]) ? null : { reason: 'key', message: errors.sortOptionDenied('GET') };
    } else {
      return null;
    }
  }
  return null;
}

/** Redis's patternHashSlot: the slot every key a pattern can name is in, or -1 when they may be in any. */
function patternHashSlot(pattern: Buffer): number {
  let open = -1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === 0x2a || c === 0x3f || c === 0x5b || c === 0x5c) return -1; // * ? [ and a backslash
    if (open === -1 && c === 0x7b) open = i;
    else if (open >= 0 && c === 0x7d) {
      if (i === open + 1) open = -2; // `{}`: the whole pattern is hashed
      else return crc16(pattern, open + 1, i) & 0x3fff;
    }
  }
  return crc16(pattern) & 0x3fff;
}

/** Case-insensitive comparison with a lower-case ASCII word, as strcasecmp. */
function isWord(arg: Buffer, word: string): boolean {
  return arg.length === word.length && asciiLower(arg.toString('latin1')) === word;
}

/** strcasecmp folds ASCII letters only. */
function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (m) => m.toLowerCase());
}

/** One user's fields as the config has them. */
export interface UserRules {
  readonly name: string;
  readonly commands?: RulesInput;
  readonly keys?: RulesInput;
  readonly channels?: RulesInput;
}

/** A user's rules, field by field; null: the field is absent (everything). */
export interface UserRuleLists {
  readonly commands: CommandRule[] | null;
  readonly keys: KeyRule[] | null;
  readonly channels: ChannelRule[] | null;
}

/**
 * A user's permissions, or null when it has no rules (every command, key and channel, as Redis's
 * default user). The syntax was checked by the config schema; with `table`, command names are
 * checked against it (ConfigError naming `auth.users[<index>].commands` otherwise).
 */
export function compilePermissions(user: UserRules, index: number, table?: CommandTable, clusterMode = false): UserPermissions | null {
  const rules = userRuleLists(user, index, table);
  return rules === null ? null : new UserPermissions(rules.commands, rules.keys, rules.channels, clusterMode);
}

/** A config user's rules, checked as compilePermissions checks them; null when it has none. */
export function userRuleLists(user: UserRules, index: number, table?: CommandTable): UserRuleLists | null {
  if (user.commands === undefined && user.keys === undefined && user.channels === undefined) return null;
  const field = (name: string): string => `auth.users[${index}].${name}`;
  const problems: string[] = [];
  const parsed = <R>(name: string, input: RulesInput | undefined, parse: (i: RulesInput) => { rules: R[]; problems: string[] }): R[] | null => {
    if (input === undefined) return null;
    const r = parse(input);
    problems.push(...r.problems.map((p) => `${field(name)}: ${p}`));
    return r.rules;
  };
  const commands = parsed('commands', user.commands, parseCommandRules);
  const keys = parsed('keys', user.keys, parseKeyRules);
  const channels = parsed('channels', user.channels, parseChannelRules);
  if (table !== undefined) {
    for (const rule of commands ?? []) {
      const unknown = rule.kind === 'command' ? unknownCommand(rule, table) : null;
      if (unknown !== null) problems.push(`${field('commands')}: ${unknown}`);
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { commands, keys, channels };
}

/** ACL SETUSER's check of a command rule against the back end's table: true when it names a command Redis would know. */
export function knownCommand(rule: Extract<CommandRule, { kind: 'command' }>, table: CommandTable): boolean {
  return unknownCommand(rule, table) === null;
}

/** Why ACL SETUSER would refuse this rule against this command table, or null. */
function unknownCommand(rule: Extract<CommandRule, { kind: 'command' }>, table: CommandTable): string | null {
  const command = rule.name === PROXY_COMMAND.name ? PROXY_COMMAND : table.get(rule.name);
  const unknown = `${JSON.stringify(rule.token)}: Unknown command or category name in ACL (no command '${rule.sub === null ? rule.name : `${rule.name}|${asciiLower(rule.sub)}`}' in the back end's COMMAND table)`;
  if (command === undefined) return unknown;
  if (rule.sub === null) return null;
  // `container|sub` must be a subcommand; `command|arg` of a command without any is a first argument (`+` only).
  if (command.subcommands !== null) return command.subcommands.has(asciiLower(rule.sub)) ? null : unknown;
  return rule.allow ? null : unknown;
}
