// A client's pipelined requests reach the nodes in its order when one of them goes on another
// back-end connection than those before it (dispatch/order-barrier.ts): a HELLO that switches the
// protocol, a WATCH, a blocking command. Each case is pipelined in one write, many times over,
// since a request that overtakes does so only sometimes.
import { useProxy } from '../helpers/proxy';
import { exchange, splitReplies } from '../helpers/raw-exchange';

const { proxy } = useProxy();
const ROUNDS = 50;
/** What goes first in each pipeline: a FLUSHALL to every master and writes, as the differential test's fixtures. */
const BEFORE = [['FLUSHALL'], ['SCRIPT', 'FLUSH'], ['FUNCTION', 'FLUSH']];

test('writes then HELLO 3 then reads: the reads see the writes', async () => {
  for (let i = 0; i < ROUNDS; i++) {
    const key = `order:hello:${i}`;
    const replies = splitReplies((await exchange(proxy().address.port, [...BEFORE, ['SET', key, 'v'], ['RPUSH', `${key}:l`, 'a', 'b'], ['HELLO', '3'], ['GET', key], ['LLEN', `${key}:l`]])).replies);
    expect(replies.slice(BEFORE.length + 3)).toEqual(['$1\r\nv\r\n', ':2\r\n']);
  }
});

test('a write then a WATCH of its key: EXEC runs, the write came first', async () => {
  for (let i = 0; i < ROUNDS; i++) {
    const key = `order:watch:${i}`;
    const replies = splitReplies((await exchange(proxy().address.port, [...BEFORE, ['SET', key, '1'], ['WATCH', key], ['MULTI'], ['INCR', key], ['EXEC']])).replies);
    expect(replies.slice(BEFORE.length)).toEqual(['+OK\r\n', '+OK\r\n', '+OK\r\n', '+QUEUED\r\n', '*1\r\n:2\r\n']);
  }
});

test('an RPUSH then a BLPOP of its list: the pop finds the element at once', async () => {
  for (let i = 0; i < ROUNDS; i++) {
    const key = `order:blpop:${i}`;
    const replies = splitReplies((await exchange(proxy().address.port, [...BEFORE, ['RPUSH', key, 'x'], ['BLPOP', key, '1']])).replies);
    expect(replies.slice(BEFORE.length)).toEqual([':1\r\n', `*2\r\n$${key.length}\r\n${key}\r\n$1\r\nx\r\n`]);
  }
});
