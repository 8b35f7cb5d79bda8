/**
 * One user of the proxy as Redis 7.0 keeps one (user.c's struct user, one root selector): `on`/`off`,
 * `nopass` or its passwords, the payload flag, and its command, key and channel rules in the
 * order they were given. ACL SETUSER's rules are applied here as Redis's ACLSetUser applies them,
 * to a copy that replaces the user only when every rule was accepted.
 */
import crypto from 'node:crypto';
import { ChannelRule, CommandRule, KeyRule, parseSetUserRule } from '../../config/acl-rules';
import { CommandTable } from '../commands/table';
import { UserPermissions, UserRuleLists, knownCommand } from './permissions';

export function digest(secret: Buffer | string): Buffer {
  return crypto.createHash('sha256').update(secret).digest();
}

export interface ProxyUser {
  readonly name: string;
  enabled: boolean;
  /** Any password signs it in (Redis's `nopass`). */
  nopass: boolean;
  /** SHA-256 digests of its passwords, in the order they were given. */
  passwords: Buffer[];
  /** Redis's payload flag, as ACL LIST shows it (null: neither was given). */
  sanitize: 'sanitize-payload' | 'skip-sanitize-payload' | null;
  /** Applied left to right from `-@all`; kept from the last `allcommands`/`nocommands` on. */
  commands: CommandRule[];
  /** From no key: `[all]`, or the patterns since the last reset. */
  keys: KeyRule[];
  channels: ChannelRule[];
  /** Compiled from the three (null: everything, one null check per command). */
  permissions: UserPermissions | null;
}

const ALL_COMMANDS: CommandRule = { kind: 'all', allow: true };
const NO_COMMANDS: CommandRule = { kind: 'all', allow: false };

/** A user of the config file (or the default user): `on`, its password, its rules (a field left out: everything). */
export function configUser(name: string, password: string | undefined, nopass: boolean, rules: UserRuleLists | null, clusterMode: boolean): ProxyUser {
  const user: ProxyUser = {
    name,
    enabled: true,
    nopass,
    passwords: password === undefined ? [] : [digest(password)],
    sanitize: null,
    commands: rules?.commands === null || rules === null ? [ALL_COMMANDS] : [NO_COMMANDS, ...rules.commands],
    keys: rules?.keys === null || rules === null ? [{ kind: 'all' }] : [...rules.keys],
    channels: rules?.channels === null || rules === null ? [{ kind: 'all' }] : [...rules.channels],
    permissions: null,
  };
  // The config's own compiled form: a field left out checks nothing.
  user.permissions = rules === null ? null : new UserPermissions(rules.commands, rules.keys, rules.channels, clusterMode);
  return user;
}

/** ACL SETUSER of a name no user has: Redis's ACLCreateUser, `off` with no rule (`resetchannels -@all`). */
export function newUser(name: string): ProxyUser {
  return { name, enabled: false, nopass: false, passwords: [], sanitize: null, commands: [], keys: [], channels: [], permissions: null };
}

/** The rules compiled: null when they allow every command, key and channel. */
export function compileUser(user: ProxyUser, clusterMode: boolean): UserPermissions | null {
  const everything = (rules: readonly { kind: string }[]): boolean => rules.length === 1 && rules[0].kind === 'all';
  if (user.commands.length === 1 && user.commands[0].kind === 'all' && user.commands[0].allow && everything(user.keys) && everything(user.channels)) return null;
  return new UserPermissions(user.commands, user.keys, user.channels, clusterMode);
}

const HASH = /^[0-9a-f]{64}$/;

/**
 * ACL SETUSER's rules applied to a copy of `user`, left to right: the new user, or Redis's error
 * text for the first rule refused (the user then stays as it was, as in Redis 7.0).
 */
export function setUser(user: ProxyUser, rules: readonly Buffer[], table: CommandTable, clusterMode: boolean): ProxyUser | string {
  const next: ProxyUser = { ...user, passwords: [...user.passwords], commands: [...user.commands], keys: [...user.keys], channels: [...user.channels] };
  for (const arg of rules) {
    const op = arg.toString();
    const why = applyRule(next, op, table);
    if (why !== null) return `ERR Error in ACL SETUSER modifier '${op}': ${why}`;
  }
  next.permissions = compileUser(next, clusterMode);
  return next;
}

/** One rule (Redis's ACLSetUser); null when taken, else why not in Redis's words. */
function applyRule(u: ProxyUser, op: string, table: CommandTable): string | null {
  const lower = op.toLowerCase();
  switch (lower) {
    case 'on':
      u.enabled = true;
      return null;
    case 'off':
      u.enabled = false;
      return null;
    case 'sanitize-payload':
    case 'skip-sanitize-payload':
      u.sanitize = lower;
      return null;
    case 'nopass':
      u.nopass = true;
      u.passwords = [];
      return null;
    case 'resetpass':
      u.nopass = false;
      u.passwords = [];
      return null;
    case 'reset':
      for (const r of ['resetpass', 'resetkeys', 'resetchannels', 'off', 'sanitize-payload', '-@all']) applyRule(u, r, table);
      return null;
    case 'clearselectors':
      return null; // the proxy's users have no selectors to clear
    case '':
      return null; // an empty rule changes nothing, as in Redis
  }
  if (op[0] === '>' || op[0] === '#') {
    const hash = op[0] === '>' ? digest(op.slice(1)) : hashOf(op.slice(1));
    if (hash === null) return 'The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters';
    if (!u.passwords.some((p) => p.equals(hash))) u.passwords.push(hash);
    u.nopass = false;
    return null;
  }
  if (op[0] === '<' || op[0] === '!') {
    const hash = op[0] === '<' ? digest(op.slice(1)) : hashOf(op.slice(1));
    if (hash === null) return 'The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters';
    const at = u.passwords.findIndex((p) => p.equals(hash));
    if (at < 0) return 'The password you are trying to remove from the user does not exist';
    u.passwords.splice(at, 1);
    u.nopass = false;
    return null;
  }
  if (op[0] === '(') return 'slotproxy does not support selectors: give the user one set of rules';
  const parsed = parseSetUserRule(op);
  if (parsed === null) return 'Syntax error';
  if (typeof parsed === 'string') return parsed;
  switch (parsed.field) {
    case 'commands': {
      const rule = parsed.rule;
      if (rule.kind === 'command' && !knownCommand(rule, table)) return 'Unknown command or category name in ACL';
      // allcommands/nocommands undo every earlier rule: the list starts again from them.
      u.commands = rule.kind === 'all' ? [rule] : [...u.commands, rule];
      return null;
    }
    case 'keys':
      if (parsed.rule.kind === 'pattern' && u.keys[0]?.kind === 'all') {
        return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
      }
      u.keys = parsed.rule.kind === 'pattern' ? [...u.keys, parsed.rule] : [parsed.rule];
      return null;
    case 'channels':
      if (parsed.rule.kind === 'pattern' && u.channels[0]?.kind === 'all') {
        return "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
      }
      u.channels = parsed.rule.kind === 'pattern' ? [...u.channels, parsed.rule] : [parsed.rule];
      return null;
  }
}

/** `#<hash>`: 64 lower-case hex digits, as Redis checks them. */
function hashOf(hex: string): Buffer | null {
  return HASH.test(hex) ? Buffer.from(hex, 'hex') : null;
}
