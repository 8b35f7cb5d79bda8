/**
 * Redis's glob matching (`stringmatchlen` of util.c, Redis 7.0, case-sensitive), over bytes: the
 * matcher ACL key and channel patterns use. `*`, `?`, `[...]` with `^`, ranges and `\` escapes, and
 * Redis's corner cases kept: an unterminated class ends at the pattern's end, a range's bounds are
 * compared as C's signed `char`, a lone trailing `\` is a literal, `*` does not match an empty string.
 * Once the rest of a pattern after a `*` matches nowhere in the string, longer matches for that `*`
 * are not tried (Redis's skipLongerMatches), so the time stays polynomial; nesting is capped at 1000
 * stars, as in Redis.
 */
const STAR = 0x2a;
const QUESTION = 0x3f;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const CARET = 0x5e;
const BACKSLASH = 0x5c;
const DASH = 0x2d;

/** True when `pattern` matches the whole of `text`. */
export function globMatch(pattern: Buffer, text: Buffer): boolean {
  return matchFrom(pattern, 0, text, 0, { skipLonger: false }, 0);
}

/** A byte as C's signed `char`. */
function signed(b: number): number {
  return (b << 24) >> 24;
}

function matchFrom(p: Buffer, pi: number, s: Buffer, si: number, state: { skipLonger: boolean }, nesting: number): boolean {
  if (nesting > 1000) return false;
  const plen = p.length;
  const slen = s.length;
  while (pi < plen && si < slen) {
    const c = p[pi];
    if (c === STAR) {
      while (pi + 1 < plen && p[pi + 1] === STAR) pi++;
      if (pi + 1 === plen) return true;
      for (; si < slen; si++) {
        if (matchFrom(p, pi + 1, s, si, state, nesting + 1)) return true;
        if (state.skipLonger) return false;
      }
      state.skipLonger = true;
      return false;
    } else if (c === QUESTION) {
      si++;
    } else if (c === OPEN) {
      pi++;
      const not = pi < plen && p[pi] === CARET;
      if (not) pi++;
      let match = false;
      for (;;) {
        if (pi < plen && p[pi] === BACKSLASH && plen - pi >= 2) {
          pi++;
          if (p[pi] === s[si]) match = true;
        } else if (pi < plen && p[pi] === CLOSE) {
          break;
        } else if (pi >= plen) {
          pi--; // unterminated: the class ends with the pattern
          break;
        } else if (plen - pi >= 3 && p[pi + 1] === DASH) {
          let start = signed(p[pi]);
          let end = signed(p[pi + 2]);
          if (start > end) [start, end] = [end, start];
          const ch = signed(s[si]);
          pi += 2;
          if (ch >= start && ch <= end) match = true;
        } else if (p[pi] === s[si]) {
          match = true;
        }
        pi++;
      }
      if (not) match = !match;
      if (!match) return false;
      si++;
    } else {
      if (c === BACKSLASH && plen - pi >= 2) pi++;
      if (p[pi] !== s[si]) return false;
      si++;
    }
    pi++;
    if (si === slen) {
      while (pi < plen && p[pi] === STAR) pi++;
      break;
    }
  }
  return pi === plen && si === slen;
}
