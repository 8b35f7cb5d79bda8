/**
 * Which subscriptions may receive keyspace notifications. A node publishes them (on
 * `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`) only to its own subscribers, the cluster
 * bus does not carry them, so a subscription that may receive them must be made on every master
 * (dispatch/pubsub.ts). Everything else is enough on one node.
 */

const PREFIXES = [Buffer.from('__keyspace@', 'latin1'), Buffer.from('__keyevent@', 'latin1')];

/** A channel a node publishes keyspace notifications on. */
export function isKeyspaceChannel(channel: Buffer): boolean {
  return PREFIXES.some((p) => channel.length >= p.length && channel.compare(p, 0, p.length, 0, p.length) === 0);
}

/**
 * True when the glob `pattern` (Redis's `stringmatchlen` syntax: `*`, `?`, `[...]` with `^` and
 * ranges, `\` escapes) could match some keyspace notification channel. Errs on the side of true: a
 * pattern wrongly said to match only costs links that never deliver anything.
 */
export function mayMatchKeyspace(pattern: Buffer): boolean {
  return PREFIXES.some((p) => mayMatchSomethingStartingWith(pattern, p));
}

/**
 * Whether some string beginning with `prefix` matches `pattern`: the set of pattern positions the
 * prefix can lead to, one prefix byte at a time (no recursion, linear in the pattern per byte).
 */
function mayMatchSomethingStartingWith(pattern: Buffer, prefix: Buffer): boolean {
  let states = withStars(pattern, new Set([0]));
  for (const c of prefix) {
    const next = new Set<number>();
    for (const pi of states) {
      if (pi >= pattern.length) continue; // the pattern ended before the prefix did
      if (pattern[pi] === 42 /* * */) next.add(pi);
      else {
        const one = singleChar(pattern, pi);
        if (one.matches(c)) next.add(one.next);
      }
    }
    if (next.size === 0) return false;
    states = withStars(pattern, next);
  }
  // The prefix is consumed: whatever is left of the pattern can match something after it.
  return true;
}

/** Adds the position after every `*` reachable (a star may match nothing). */
function withStars(pattern: Buffer, states: Set<number>): Set<number> {
  for (const pi of states) if (pattern[pi] === 42 /* * */) states.add(pi + 1);
  return states;
}

/** The pattern element at `pi` that matches exactly one character: `?`, a class, an escape or a literal. */
function singleChar(pattern: Buffer, pi: number): { matches: (c: number) => boolean; next: number } {
  const c = pattern[pi];
  if (c === 63 /* ? */) return { matches: () => true, next: pi + 1 };
  if (c === 92 /* \ */ && pi + 1 < pattern.length) {
    const lit = pattern[pi + 1];
    return { matches: (x) => x === lit, next: pi + 2 };
  }
  if (c !== 91 /* [ */) return { matches: (x) => x === c, next: pi + 1 };
  // A class, read as stringmatchlen reads it.
  let i = pi + 1;
  const negate = pattern[i] === 94; /* ^ */
  if (negate) i++;
  const tests: ((x: number) => boolean)[] = [];
  for (;;) {
    if (i >= pattern.length) {
      // Unterminated: Redis ends the class at the pattern's end. Say "may match" to stay safe.
      return { matches: () => true, next: pattern.length };
    }
    const ch = pattern[i];
    if (ch === 92 /* \ */ && i + 1 < pattern.length) {
      const lit = pattern[i + 1];
      tests.push((x) => x === lit);
      i += 2;
    } else if (ch === 93 /* ] */) {
      break;
    } else if (i + 2 < pattern.length && pattern[i + 1] === 45 /* - */) {
      const lo = Math.min(ch, pattern[i + 2]);
      const hi = Math.max(ch, pattern[i + 2]);
      tests.push((x) => x >= lo && x <= hi);
      i += 3;
    } else {
      tests.push((x) => x === ch);
      i++;
    }
  }
  return { matches: (x) => tests.some((t) => t(x)) !== negate, next: i + 1 };
}
