// Jest helper for issue 12: one scenario of Pub/Sub client actions, run against "one Redis" and
// through slotproxies, whose transcripts (confirmation counts, PUBLISH counts, messages) must match.

import Redis from 'ioredis';
import { collect, settled } from './subscriber';

/** Where a scenario's clients connect: one Redis, or alternately two proxies (even: A, odd: B). */
export interface Side {
  /** The i-th client (subscriber or publisher). */
  connect(i: number): Redis;
}

export interface Transcript {
  confirmations: number[];
  counts: number[];
  messages: string[][];
}

/**
 * Six subscribers (even ones on proxy A, odd on B), PUBLISHes from both, writes to a key on every
 * master (`keys`), then unsubscriptions and more of the same. `checkpoint` waits for the messages
 * of one phase to arrive before the next phase starts.
 */
export async function scenario(side: Side, keys: string[], checkpoint: (phase: number, got: string[][]) => Promise<void>): Promise<Transcript> {
  const subs = Array.from({ length: 6 }, (_, i) => side.connect(i));
  const got = subs.map(collect);
  const [pubA, pubB, writer] = [side.connect(0), side.connect(1), side.connect(0)];
  const confirmations = [
    await subs[0].subscribe('news'),
    await subs[1].psubscribe('n*'),
    await subs[2].subscribe('news'),
    await subs[2].psubscribe('*'),
    await subs[3].psubscribe('__keyspace@0__:*'),
    await subs[4].subscribe('__keyevent@0__:set', '__keyevent@0__:del'),
    await subs[5].psubscribe('__key*'),
    await subs[5].subscribe('news'),
  ].map(Number);
  const counts = [
    await pubA.publish('news', 'm1'),
    await pubB.publish('news', 'm2'),
    await pubA.publish('nothing', 'm3'),
    await pubB.publish('other', 'm4'),
    await pubB.publish('zzz', 'm5'),
  ];
  for (const k of keys) await writer.set(k, 'v');
  await writer.del(keys[0]);
  await checkpoint(0, got);
  confirmations.push(
    Number(await subs[2].punsubscribe('*')),
    Number(await subs[4].unsubscribe('__keyevent@0__:set')),
    Number(await subs[3].psubscribe('other')),
  );
  counts.push(await pubA.publish('news', 'm6'), await pubB.publish('other', 'm7'), await pubA.publish('zzz', 'm8'));
  for (const k of keys) await writer.set(k, 'w');
  await checkpoint(1, got);
  return { confirmations, counts, messages: got.map((m) => [...m].sort()) };
}

/** Runs the scenario on one Redis, then through the proxies, and expects the same transcript. */
export async function expectOneRedis(oneRedis: Side, proxies: Side, keys: string[]): Promise<void> {
  const reached: number[][] = [];
  const expected = await scenario(oneRedis, keys, async (_phase, got) => {
    reached.push(await settled(got));
  });
  // What one Redis says, spelled out: news reaches subs 0, 1 (n*), 2 twice (news and *) and 5.
  expect(expected.confirmations).toEqual([1, 1, 1, 2, 1, 2, 1, 2, 1, 1, 2]);
  expect(expected.counts).toEqual([5, 5, 2, 1, 1, 4, 1, 0]);
  expect(expected.messages[3].filter((m) => m.startsWith('__keyspace@0__:*|'))).toHaveLength(2 * keys.length + 1);
  const through = await scenario(proxies, keys, async (phase, got) => {
    await settled(got, reached[phase]);
  });
  expect(through).toEqual(expected);
}
