/**
 * A user written back as rules, as Redis writes one for ACL LIST and ACL GETUSER
 * (ACLDescribeUser, ACLDescribeSelector, ACLDescribeSelectorCommandRules): flags, `#<sha256>`
 * passwords, key patterns, channels, then the commands. Redis 7.0 writes them as `+@all`/`-@all`,
 * the categories that fit best, and the single commands that still differ (Redis lists those in its
 * command dictionary's hashed order, the proxy in its command table's). Redis 7.2 and later (Valkey
 * too) write `+@all`/`-@all` and then the rules as they were given (`rules72`), and show
 * `sanitize-payload` on every user that has no payload flag of its own (their new default).
 */
import { ACL_CATEGORIES, CommandRule, KEY_READ, KEY_WRITE, KeyRule } from '../../config/acl-rules';
import { CommandInfo, CommandTable } from '../commands/table';
import { ADMIN_COMMANDS } from '../commands/policy';
import { ProxyUser } from './acl-user';
import { evaluate, foldPatterns } from './permissions';

/** ACL GETUSER's fields, in Redis's order. */
export interface UserFields {
  readonly flags: string[];
  readonly passwords: string[];
  readonly commands: string;
  readonly keys: string;
  readonly channels: string;
}

/** `as72`: as Redis 7.2 and later describe the user, else as 7.0 does. */
export function userFields(user: ProxyUser, table: CommandTable, as72 = false): UserFields {
  const flags = [user.enabled ? 'on' : 'off'];
  if (user.nopass) flags.push('nopass');
  // Redis's flag order: skip-sanitize-payload before sanitize-payload (only one is ever set).
  if (user.sanitize !== null) flags.push(user.sanitize);
  else if (as72) flags.push('sanitize-payload');
  const keys = keyPatterns(user.keys);
  const channels = channelPatterns(user);
  return {
    flags,
    passwords: user.passwords.map((p) => p.toString('hex')),
    commands: as72 ? rules72(user.commands) : describeCommands(user.commands, table),
    keys: keys === null ? '~*' : keys.join(' '),
    channels: channels === null ? '&*' : channels.join(' '),
  };
}

/** ACL LIST's line for the user. */
export function userLine(user: ProxyUser, table: CommandTable, as72 = false): string {
  const f = userFields(user, table, as72);
  const keys = keyPatterns(user.keys);
  const channels = channelPatterns(user);
  const parts = [
    'user',
    user.name,
    ...f.flags,
    ...f.passwords.map((h) => `#${h}`),
    ...(keys === null ? ['~*'] : keys),
    ...(channels === null ? ['&*'] : ['resetchannels', ...channels]),
    f.commands,
  ];
  return parts.join(' ');
}

/** Null: every key (`~*`); else the patterns as Redis writes them. */
function keyPatterns(rules: readonly KeyRule[]): string[] | null {
  const folded = foldPatterns<Extract<KeyRule, { kind: 'pattern' }>, { pattern: Buffer; flags: number }>(
    rules,
    (r) => ({ pattern: Buffer.from(r.pattern), flags: r.flags }),
    (into, r) => (into.flags |= r.flags),
  );
  if (folded.all) return null;
  return folded.patterns.map((p) => {
    const prefix = p.flags === (KEY_READ | KEY_WRITE) ? '~' : p.flags === KEY_READ ? '%R~' : '%W~';
    return `${prefix}${p.pattern.toString()}`;
  });
}

function channelPatterns(user: ProxyUser): string[] | null {
  const folded = foldPatterns(user.channels, (r) => ({ pattern: Buffer.from(r.pattern) }));
  return folded.all ? null : folded.patterns.map((p) => `&${p.pattern.toString()}`);
}

/** The categories a command counts in, as the permission check sees them (security/permissions.ts). */
function categoriesOf(info: CommandInfo): ReadonlySet<string> {
  return ADMIN_COMMANDS.has(info.name) ? new Set([...info.aclCategories, 'admin', 'dangerous']) : info.aclCategories;
}

/**
 * Redis 7.0's ACLDescribeSelectorCommandRules: `+@all` when the rules end from `allcommands` (future
 * commands allowed), else `-@all`; then, best fit first, the categories that fit what is left to
 * say (more of their commands to keep than to change; fewest to change, then most kept, then ACL
 * CAT's order), each taken out of what is left; then every command (and subcommand) whose verdict
 * still differs, and the first arguments of a command that is otherwise refused.
 */
function describeCommands(rules: readonly CommandRule[], table: CommandTable): string {
  let future = false;
  for (const r of rules) if (r.kind === 'all') future = r.allow;
  const out = [future ? '+@all' : '-@all'];
  const fake: CommandRule[] = [{ kind: 'all', allow: future }];
  const all = [...table.all()];
  const verdicts = new Map(all.map((info) => [info, evaluate(rules, info)]));
  // What is left to say: the user's verdicts, each category emitted turned the other way in it.
  const left = new Map(all.map((info) => [info, (verdicts.get(info) as { allowed: boolean }).allowed]));
  const applied = new Set<string>();
  for (;;) {
    let best: string | null = null;
    let minDiff = Infinity;
    let maxSame = 0;
    for (const category of ACL_CATEGORIES) {
      if (applied.has(category)) continue;
      let on = 0;
      let off = 0;
      for (const info of all) {
        if (!categoriesOf(info).has(category)) continue;
        if (left.get(info) === true) on++;
        else off++;
      }
      const diff = future ? on : off;
      const same = future ? off : on;
      if (same > diff && (diff < minDiff || (diff === minDiff && same > maxSame))) {
        best = category;
        minDiff = diff;
        maxSame = same;
      }
    }
    if (best === null) break;
    applied.add(best);
    out.push(`${future ? '-' : '+'}@${best}`);
    fake.push({ kind: 'category', allow: !future, category: best });
    for (const info of all) if (categoriesOf(info).has(best)) left.set(info, future);
  }
  for (const info of all) {
    const verdict = verdicts.get(info) as { allowed: boolean; firstArgs: readonly string[] | null };
    if (evaluate(fake, info).allowed !== verdict.allowed) {
      out.push(`${verdict.allowed ? '+' : '-'}${info.name}`);
      const bar = info.name.indexOf('|');
      fake.push({ kind: 'command', allow: verdict.allowed, name: bar < 0 ? info.name : info.name.slice(0, bar), sub: bar < 0 ? null : info.name.slice(bar + 1), token: info.name });
    }
    if (!verdict.allowed && verdict.firstArgs !== null) for (const arg of verdict.firstArgs) out.push(`+${info.name}|${arg}`);
  }
  return out.join(' ');
}

/**
 * Redis 7.2's command rules (ACLUpdateCommandRules): `+@all` or `-@all` as the last of them sets
 * future commands, then every rule since the last `allcommands`/`nocommands`, in the order given,
 * lower case; a rule given again moves to the end, and a command's rule drops its subcommands' and
 * first arguments' rules given before it.
 */
function rules72(rules: readonly CommandRule[]): string {
  let future = false;
  let kept: string[] = [];
  for (const r of rules) {
    if (r.kind === 'all') {
      future = r.allow;
      kept = [];
      continue;
    }
    const body = (r.kind === 'category' ? `@${r.category}` : r.sub === null ? r.name : `${r.name}|${r.sub}`).toLowerCase();
    kept = kept.filter((k) => k.slice(1) !== body && !k.slice(1).startsWith(`${body}|`));
    kept.push(`${r.allow ? '+' : '-'}${body}`);
  }
  return [future ? '+@all' : '-@all', ...kept].join(' ');
}
