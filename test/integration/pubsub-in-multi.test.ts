// (P|S)(UN)SUBSCRIBE inside MULTI, compared with one Redis byte for byte: one Redis queues them
// and writes their confirmations inside EXEC's reply, in their commands' places (one array
// element per command, a confirmation per channel: redis/redis#12207). RESP3 (pushes) and RESP2
// (a client not yet subscribed subscribes at EXEC).

import { useProxy } from '../helpers/proxy';
import { useCluster } from '../helpers/cluster';
import { ScriptStep, runScript, withoutSyncs } from '../helpers/tracking-script';
import { exchange } from '../helpers/raw-exchange';

const { proxy } = useProxy();
/** One Redis: a single-node cluster owning every slot. */
const reference = useCluster({ masters: 1, replicasPerMaster: 0 });

const a = (...args: string[]): ScriptStep => ({ on: 'a', args });
const b = (...args: string[]): ScriptStep => ({ on: 'b', args });
const together = (...requests: string[][]): ScriptStep => ({ on: 'a', args: requests });

const CASES: [string, Record<string, string[][]>, ScriptStep[]][] = [
  // (Publishing to self is left out: Redis 7.0 writes the message before PUBLISH's reply, 7.2 after it.)
  ['RESP3: unsubscribe inside MULTI, then a message', { a: [['HELLO', '3']] }, [
    a('SUBSCRIBE', 'foo', 'bar', 'baz'),
    together(['MULTI'], ['PING', 'abc'], ['UNSUBSCRIBE', 'bar'], ['UNSUBSCRIBE', 'baz'], ['PING', 'def'], ['EXEC']),
    b('PUBLISH', 'foo', 'vaz'), b('PUBLISH', 'bar', 'gone'),
  ]],
  // (Subscribed first: Valkey 8 refuses UNSUBSCRIBE from a client not subscribed, NOSUB.)
  ['RESP3: several channels and patterns in one command inside MULTI, with keys', { a: [['FLUSHALL'], ['HELLO', '3']] }, [
    a('SUBSCRIBE', 'x0'),
    together(['MULTI'], ['SET', '{m}k', 'v'], ['SUBSCRIBE', 'x1', 'x2'], ['PSUBSCRIBE', 'p*'], ['GET', '{m}k'], ['UNSUBSCRIBE', 'x2'], ['EXEC']),
    b('PUBLISH', 'x1', 'one'), b('PUBLISH', 'px', 'two'), b('PING'), a('PUNSUBSCRIBE', 'p*'), a('UNSUBSCRIBE', 'x1'), a('GET', '{m}k'),
  ]],
  // The count of a PUBLISH in a transaction of no key is every subscriber's, as outside one.
  ['PUBLISH inside MULTI counts every subscriber', { b: [['SUBSCRIBE', 'c1']], a: [['HELLO', '3'], ['SUBSCRIBE', 'c2']] }, [
    together(['MULTI'], ['PUBLISH', 'c1', 'm1'], ['PING', 'p'], ['PUBLISH', 'c3', 'none'], ['PUBSUB', 'NUMSUB', 'c1', 'c2'], ['EXEC']),
  ]],
  ['RESP2: a client subscribes inside MULTI and is subscribed after EXEC', { a: [['FLUSHALL']] }, [
    together(['MULTI'], ['PING'], ['SUBSCRIBE', 'r1'], ['ECHO', 'e'], ['EXEC']),
    b('PUBLISH', 'r1', 'hello'), b('PING'), a('UNSUBSCRIBE', 'r1'), a('GET', '{m}k'),
  ]],
  ['RESP2: a subscription queued in a transaction that aborts runs nothing', {}, [
    together(['MULTI'], ['SUBSCRIBE', 'r2'], ['NOSUCHCOMMAND'], ['EXEC']), b('PUBLISH', 'r2', 'x'), a('PING'),
  ]],
];

/**
 * Compared withoutSyncs (the script's sync markers left out): a message another client published may reach the client after
 * a marker that one Redis answers after it (the proxy answers a subscriber's PING itself, the message
 * comes from the home node), and even on one Redis a marker's place is taken as the bytes arrive.
 * Messages are still compared in their place among the client's own replies.
 */
test.each(CASES)('%s: the same bytes as one Redis', async (what, setup, steps) => {
  const want = await runScript(reference().masters[0].port, ['a', 'b'], setup, steps);
  // Three runs: new connections, whose ids fall on each master (a transaction of no key used to run on one by id).
  for (let run = 0; run < 3; run++) {
    const got = await runScript(proxy().address.port, ['a', 'b'], setup, steps, want);
    expect(withoutSyncs(got.streams)).toEqual(withoutSyncs(want.streams));
  }
  // The cases show the confirmations inside EXEC's reply.
  if (what.startsWith('RESP3: unsubscribe')) expect(want.streams.a).toContain('*4\r\n$3\r\nabc\r\n>3\r\n$11\r\nunsubscribe\r\n$3\r\nbar\r\n:2\r\n>3\r\n$11\r\nunsubscribe\r\n$3\r\nbaz\r\n:1\r\n$3\r\ndef\r\n');
});

test('with WATCH, a subscription inside MULTI is refused (the proxy runs it when EXEC is sent, and EXEC may run nothing)', async () => {
  const { replies } = await exchange(proxy().address.port, [['WATCH', '{m}w'], ['MULTI'], ['SUBSCRIBE', 'w1'], ['EXEC']]);
  expect(replies).toBe(
    "+OK\r\n+OK\r\n-ERR slotproxy does not support 'SUBSCRIBE': it cannot run inside a transaction with WATCH through slotproxy\r\n-EXECABORT Transaction discarded because of previous errors.\r\n",
  );
});
