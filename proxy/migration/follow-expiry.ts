/**
 * Side B must not expire a key on its own clock while it follows side A: A expires it and says so
 * in its stream (a DEL), and in between a later command (a renewed TTL, a PERSIST) may keep the key
 * alive. B may lag, so an absolute expiry that is already (nearly) past when B applies it would make
 * B delete a key A still holds, and the renewal after it would find nothing (the way RedisShake's
 * users lose keys). Such an expiry is left out on B: the key lives there until A's own DEL, or a
 * later command, says what became of it. An expiry comfortably in the future applies as it is.
 *
 * What carries an absolute time (Redis 7 rewrites relative ones before they reach the stream):
 * PEXPIREAT, SET ... PXAT, RESTORE ... ABSTTL; and the snapshot's expiries.
 */

/** An expiry closer than this to B's clock is left out (clocks of A and B may differ a little, B may lag). */
export const EXPIRY_MARGIN_MS = 10_000;

/** Whether B should not set this absolute expiry now. */
export function tooSoon(expireAtMs: number, now?: number): boolean {
  return expireAtMs <= (now ?? Date.now()) + EXPIRY_MARGIN_MS;
}

/** The command as B applies it: `args` unchanged, or without an expiry that is too soon. */
export function withoutPastExpiry(name: string, args: Buffer[], now?: number): Buffer[] {
  // B's clock is read only for a command with an expiry (the stream's hot path is SETs without one).
  if (name === 'pexpireat') {
    if (args.length >= 3 && tooSoon(Number(args[2]), now)) return [Buffer.from('PERSIST'), args[1]];
    return args;
  }
  if (name === 'set') {
    for (let i = 3; i + 1 < args.length; i++) {
      if (args[i].length === 4 && args[i].toString('latin1').toLowerCase() === 'pxat' && tooSoon(Number(args[i + 1]), now)) {
        return [...args.slice(0, i), ...args.slice(i + 2)];
      }
    }
    return args;
  }
  if (name === 'restore') {
    const abs = args.findIndex((a, i) => i > 3 && a.length === 6 && a.toString('latin1').toLowerCase() === 'absttl');
    const ttl = Number(args[2]);
    if (abs > 0 && ttl > 0 && tooSoon(ttl, now)) return [args[0], args[1], Buffer.from('0'), ...args.slice(3).filter((_, i) => i + 3 !== abs)];
    return args;
  }
  return args;
}
