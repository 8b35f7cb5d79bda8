/**
 * The permission rules of `auth.users[]` (`commands`, `keys`, `channels`), in Redis 7.0's ACL
 * SETUSER syntax, read token by token as Redis's ACLSetSelector reads them. Pure: this file knows
 * the syntax and Redis's fixed list of categories; whether a command name exists is checked by the
 * proxy against the back end's command table (proxy/security/permissions.ts), which also applies
 * the rules.
 *
 * Error texts end with Redis's own wording (`Syntax error`, `Unknown command or category name in
 * ACL` ...), so a rule refused here is a rule ACL SETUSER refuses too.
 */

/** Redis 7.0's ACL categories (ACL CAT), without the `@`. */
export const ACL_CATEGORIES: ReadonlySet<string> = new Set([
  'keyspace', 'read', 'write', 'set', 'sortedset', 'list', 'hash', 'string', 'bitmap', 'hyperloglog',
  'geo', 'stream', 'pubsub', 'admin', 'fast', 'slow', 'blocking', 'dangerous', 'connection',
  'transaction', 'scripting',
]);

/** Key pattern permissions, as Redis's ACL_READ_PERMISSION and ACL_WRITE_PERMISSION. */
export const KEY_READ = 1;
export const KEY_WRITE = 2;

export type CommandRule =
  /** `allcommands`/`+@all` (allow) and `nocommands`/`-@all`: every command, first arguments reset. */
  | { readonly kind: 'all'; readonly allow: boolean }
  | { readonly kind: 'category'; readonly allow: boolean; readonly category: string }
  /**
   * `+name`, `-name`, `+container|sub`, `-container|sub`, and `+name|arg` for a command without
   * subcommands (Redis's "first argument" rule). Names are lower case; which of the `|` forms it
   * is depends on the command table.
   */
  | { readonly kind: 'command'; readonly allow: boolean; readonly name: string; readonly sub: string | null; readonly token: string };

/** `all`: `allkeys` or `~*`; `reset`: `resetkeys`. */
export type KeyRule =
  | { readonly kind: 'all' }
  | { readonly kind: 'reset' }
  /** `~p` (read and write), `%R~p`, `%W~p`, `%RW~p`. */
  | { readonly kind: 'pattern'; readonly pattern: string; readonly flags: number };

/** `all`: `allchannels` or `&*`; `reset`: `resetchannels`. */
export type ChannelRule =
  | { readonly kind: 'all' }
  | { readonly kind: 'reset' }
  | { readonly kind: 'pattern'; readonly pattern: string };

/** What a rules field may hold in the config: one string of space-separated rules, or a list of them. */
export type RulesInput = string | readonly string[];

/** The rules of a field, one token each (a list item may hold several, separated by spaces). */
export function ruleTokens(input: RulesInput): string[] {
  const items = typeof input === 'string' ? [input] : input;
  return items.flatMap((item) => item.split(/\s+/).filter((t) => t !== ''));
}

export type Parsed<R> = { readonly rules: R[]; readonly problems: string[] };

const UNKNOWN = 'Unknown command or category name in ACL';
const SYNTAX = 'Syntax error';
const AFTER_ALLKEYS =
  "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const AFTER_ALLCHANNELS =
  "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";

function problem(token: string, why: string): string {
  return `${JSON.stringify(token)}: ${why}`;
}

/** A rule of another kind than the field's: say where it belongs. */
function misplaced(token: string, field: 'commands' | 'keys' | 'channels'): string | null {
  const lower = token.toLowerCase();
  const kind =
    lower === 'allkeys' || lower === 'resetkeys' || token.startsWith('~') || token.startsWith('%')
      ? 'keys'
      : lower === 'allchannels' || lower === 'resetchannels' || token.startsWith('&')
        ? 'channels'
        : lower === 'allcommands' || lower === 'nocommands' || token.startsWith('+') || token.startsWith('-')
          ? 'commands'
          : null;
  if (kind === field) return null;
  if (kind !== null) return problem(token, `a ${kind === 'commands' ? 'command' : kind.slice(0, -1)} rule; put it under "${kind}"`);
  if (token.startsWith('(')) return problem(token, 'selectors are not supported; give the user one set of rules');
  const expected =
    field === 'commands'
      ? '+@category, -@category, +command, -command, +command|subcommand, allcommands or nocommands'
      : field === 'keys'
        ? '~pattern, %R~pattern, %W~pattern, %RW~pattern, allkeys or resetkeys'
        : '&pattern, allchannels or resetchannels';
  return problem(token, `${SYNTAX} (expected ${expected})`);
}

/** `commands`: applied left to right by the proxy; command names are checked there. */
export function parseCommandRules(input: RulesInput): Parsed<CommandRule> {
  const rules: CommandRule[] = [];
  const problems: string[] = [];
  for (const token of ruleTokens(input)) {
    const lower = token.toLowerCase();
    if (lower === 'allcommands' || lower === '+@all') {
      rules.push({ kind: 'all', allow: true });
      continue;
    }
    if (lower === 'nocommands' || lower === '-@all') {
      rules.push({ kind: 'all', allow: false });
      continue;
    }
    const wrong = misplaced(token, 'commands');
    if (wrong !== null) {
      problems.push(wrong);
      continue;
    }
    const allow = token[0] === '+';
    if (token[1] === '@') {
      const category = lower.slice(2);
      if (ACL_CATEGORIES.has(category)) rules.push({ kind: 'category', allow, category });
      else problems.push(problem(token, `${UNKNOWN} (categories: ${[...ACL_CATEGORIES].join(', ')})`));
      continue;
    }
    const body = lower.slice(1);
    // Redis splits `+` rules at the last `|` (the rest must be a command) and looks `-` rules up whole.
    const bar = allow ? body.lastIndexOf('|') : body.indexOf('|');
    if (bar < 0) {
      if (body === '') problems.push(problem(token, UNKNOWN));
      else rules.push({ kind: 'command', allow, name: body, sub: null, token });
      continue;
    }
    const name = body.slice(0, bar);
    const sub = body.slice(bar + 1);
    // `-` rules name a command or a `container|sub` that exists; anything else is unknown to Redis.
    if (name === '' || (!allow && (sub === '' || sub.includes('|')))) problems.push(problem(token, UNKNOWN));
    else if (name.includes('|')) problems.push(problem(token, 'Allowing first-arg of a subcommand is not supported'));
    else if (sub === '') problems.push(problem(token, SYNTAX));
    // A first argument keeps its case (compared case-insensitively); a subcommand name is lower case.
    else rules.push({ kind: 'command', allow, name, sub: allow ? token.slice(token.length - sub.length) : sub, token });
  }
  return { rules, problems };
}

/** `keys`: `~pattern` and `%R~`/`%W~`/`%RW~` patterns, `allkeys`, `resetkeys`. */
export function parseKeyRules(input: RulesInput): Parsed<KeyRule> {
  return parsePatterns(input, 'keys', '~*', AFTER_ALLKEYS, (token) => {
    if (token[0] === '~') return { kind: 'pattern', pattern: token.slice(1), flags: KEY_READ | KEY_WRITE };
    let flags = 0;
    for (let offset = 1; offset < token.length; offset++) {
      const c = token[offset].toUpperCase();
      if (c === 'R' && (flags & KEY_READ) === 0) flags |= KEY_READ;
      else if (c === 'W' && (flags & KEY_WRITE) === 0) flags |= KEY_WRITE;
      else if (token[offset] === '~' && flags !== 0) return { kind: 'pattern', pattern: token.slice(offset + 1), flags };
      else return `${SYNTAX} (expected %R~pattern, %W~pattern or %RW~pattern)`;
    }
    // `%R` with no `~`: Redis takes it as `%R~` (an empty pattern); `%` alone has no permission.
    return flags === 0 ? SYNTAX : { kind: 'pattern', pattern: '', flags };
  });
}

/** `channels`: `&pattern`, `allchannels`, `resetchannels`. */
export function parseChannelRules(input: RulesInput): Parsed<ChannelRule> {
  return parsePatterns(input, 'channels', '&*', AFTER_ALLCHANNELS, (token) => ({ kind: 'pattern', pattern: token.slice(1) }));
}

/**
 * The rules of a pattern field: `all<field>` (or `star`), `reset<field>`, and patterns read by
 * `pattern` (a rule, or why it is refused), which Redis refuses after `all<field>` until a reset.
 */
function parsePatterns<R extends { kind: 'pattern' }>(
  input: RulesInput,
  field: 'keys' | 'channels',
  star: string,
  afterAll: string,
  pattern: (token: string) => R | string,
): Parsed<R | { readonly kind: 'all' } | { readonly kind: 'reset' }> {
  const rules: (R | { kind: 'all' } | { kind: 'reset' })[] = [];
  const problems: string[] = [];
  let all = false;
  for (const token of ruleTokens(input)) {
    const lower = token.toLowerCase();
    if (lower === `all${field}` || token === star || lower === `reset${field}`) {
      all = lower !== `reset${field}`;
      rules.push({ kind: all ? 'all' : 'reset' });
      continue;
    }
    const wrong = misplaced(token, field);
    if (wrong !== null) {
      problems.push(wrong);
      continue;
    }
    const rule = all ? afterAll : pattern(token);
    if (typeof rule === 'string') problems.push(problem(token, rule));
    else rules.push(rule);
  }
  return { rules, problems };
}

/** One rule of ACL SETUSER, by the field it belongs to. */
export type SetUserRule =
  | { readonly field: 'commands'; readonly rule: CommandRule }
  | { readonly field: 'keys'; readonly rule: KeyRule }
  | { readonly field: 'channels'; readonly rule: ChannelRule };

/**
 * One ACL SETUSER argument that is a command, key or channel rule: the rule, or Redis's reason for
 * refusing it (the text after "Error in ACL SETUSER modifier '...': "); null when it is none of
 * these (a flag or password rule, or a syntax error). Whether a command exists, and a pattern after
 * `allkeys`/`allchannels` already given, are for the caller to check: they depend on the user.
 */
export function parseSetUserRule(token: string): SetUserRule | string | null {
  const lower = token.toLowerCase();
  if (/\s/.test(token)) return lower[0] === '~' || lower[0] === '%' || lower[0] === '&' ? SYNTAX : null;
  const rulesOf = (field: 'commands' | 'keys' | 'channels'): Parsed<CommandRule | KeyRule | ChannelRule> =>
    field === 'commands' ? parseCommandRules(token) : field === 'keys' ? parseKeyRules(token) : parseChannelRules(token);
  for (const field of ['keys', 'channels', 'commands'] as const) {
    if (misplaced(token, field) !== null) continue;
    const parsed = rulesOf(field);
    // The config's wording is Redis's, then a hint in parentheses: Redis's part only.
    if (parsed.problems.length > 0) return parsed.problems[0].slice(JSON.stringify(token).length + 2).replace(/ \([^]*\)$/, '');
    return { field, rule: parsed.rules[0] } as SetUserRule;
  }
  return null;
}
