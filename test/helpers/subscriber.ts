// Jest helpers for Pub/Sub tests: what an ioredis subscriber received, and waiting for it to settle.

import Redis from 'ioredis';

/** Messages an ioredis subscriber received, as "channel=message" (or "pattern|channel=message", "s:channel=message"). */
export function collect(sub: Redis): string[] {
  const got: string[] = [];
  sub.on('message', (ch: string, msg: string) => got.push(`${ch}=${msg}`));
  sub.on('pmessage', (p: string, ch: string, msg: string) => got.push(`${p}|${ch}=${msg}`));
  sub.on('smessage', (ch: string, msg: string) => got.push(`s:${ch}=${msg}`));
  return got;
}

/**
 * Waits until every list holds at least `atLeast[i]` entries (0 when not given) and then none has
 * grown for `quietMs`; throws after `timeoutMs`. Returns the lengths reached.
 */
export async function settled(lists: string[][], atLeast: number[] = [], quietMs = 300, timeoutMs = 15_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  const lengths = (): number[] => lists.map((l) => l.length);
  let last = lengths();
  let since = Date.now();
  for (;;) {
    const now = lengths();
    if (now.some((n, i) => n !== last[i])) {
      last = now;
      since = Date.now();
    }
    if (now.every((n, i) => n >= (atLeast[i] ?? 0)) && Date.now() - since >= quietMs) return now;
    if (Date.now() > deadline) {
      throw new Error(`messages did not settle: have ${JSON.stringify(now)}, want at least ${JSON.stringify(atLeast)}; ${JSON.stringify(lists)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Clients closed after each test of the enclosing block (before any afterAll stops what they talk
 * to): pass each new client through the returned function.
 */
export function closedAfterEach(): (c: Redis) => Redis {
  const clients: Redis[] = [];
  afterEach(() => {
    for (const c of clients.splice(0)) c.disconnect();
  });
  return (c) => {
    clients.push(c);
    return c;
  };
}
