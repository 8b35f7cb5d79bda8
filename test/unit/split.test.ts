// The pure parts of `crossSlot: split` (dispatch/split.ts): how keys are grouped into parts, the
// shared key-position lists, and the stand-in session a part is dispatched against. End to end
// against real Redis: test/integration/cross-slot-split.test.ts.
import { SPLIT_RULES, SplitCommand, SplitRule, groupByShard, partCommand, partPositions, splitByShard } from '../../proxy/dispatch/split';
import * as encode from '../../proxy/resp/encode';
import { ReplyOwner } from '../../proxy/client/reply-slot';

const b = (s: string): Buffer => Buffer.from(s);
const texts = (args: Buffer[]): string[] => args.map((a) => a.toString());
/** Shard by the key's first letter: a0 and a1 share a shard, b0 does not. */
const byLetter = (key: Buffer): number => key[0];

describe('splitByShard', () => {
  test('MGET: one part per shard in first-seen order, keys in their order, key indexes kept', () => {
    const args = ['MGET', 'a0', 'b0', 'a1', 'c0', 'b1'].map(b);
    const parts = splitByShard(args, [1, 2, 3, 4, 5], 1, byLetter);
    expect(parts.map((p) => p.shard)).toEqual([97, 98, 99]);
    expect(parts.map((p) => texts(p.args))).toEqual([['MGET', 'a0', 'a1'], ['MGET', 'b0', 'b1'], ['MGET', 'c0']]);
    expect(parts.map((p) => p.keyIndexes)).toEqual([[0, 2], [1, 4], [3]]);
  });

  test('MSET: each key takes its value along (stride 2)', () => {
    const args = ['MSET', 'a0', 'v0', 'b0', 'v1', 'a1', 'v2'].map(b);
    const parts = splitByShard(args, [1, 3, 5], 2, byLetter);
    expect(parts.map((p) => texts(p.args))).toEqual([['MSET', 'a0', 'v0', 'a1', 'v2'], ['MSET', 'b0', 'v1']]);
    expect(parts.map((p) => p.keyIndexes)).toEqual([[0, 2], [1]]);
  });

  test('arrays hold exactly their entries (no holes, nothing left over)', () => {
    const args = ['DEL', 'a0', 'b0', 'a1'].map(b);
    for (const part of splitByShard(args, [1, 2, 3], 1, byLetter)) {
      expect(part.args.every((a) => Buffer.isBuffer(a))).toBe(true);
      expect(part.args).toHaveLength(1 + part.keyIndexes.length);
      expect(part.keyIndexes.every((k) => Number.isInteger(k))).toBe(true);
    }
  });

  test('the parts share the request\'s buffers rather than copying them', () => {
    const args = ['MGET', 'a0', 'b0'].map(b);
    const [first, second] = splitByShard(args, [1, 2], 1, byLetter);
    expect(first.args[0]).toBe(args[0]);
    expect(first.args[1]).toBe(args[1]);
    expect(second.args[1]).toBe(args[2]);
  });
});

describe('partPositions', () => {
  test('keys stand at 1, 1 + stride, 1 + 2 * stride ...', () => {
    expect(partPositions(1, 3)).toEqual([1, 2, 3]);
    expect(partPositions(2, 3)).toEqual([1, 3, 5]);
    expect(partPositions(1, 0)).toEqual([]);
  });

  test('small lists are made once and shared; large ones are made per call', () => {
    expect(partPositions(2, 4)).toBe(partPositions(2, 4));
    expect(Object.isFrozen(partPositions(2, 4))).toBe(true);
    expect(partPositions(1, 4)).not.toBe(partPositions(2, 4));
    const big = partPositions(1, 1000);
    expect(big).toHaveLength(1000);
    expect(big[999]).toBe(1000);
    expect(partPositions(1, 1000)).not.toBe(big);
  });
});

describe('PartSession', () => {
  const owner: ReplyOwner = { id: 7, protocol: 3, onSlotFilled: () => undefined };
  const split = (): SplitCommand => new SplitCommand(owner, { stride: 1, merge: 'sum' }, [{ shard: 0, keyIndexes: [0] }], 1);

  test('a signed-in RESP2 client outside MULTI and Pub/Sub, with the client\'s id', () => {
    const part = split().partSession(0);
    expect(part.id).toBe(7);
    expect(part.authenticated).toBe(true);
    expect(part.protocol).toBe(2);
    expect(part.user).toBe('default');
    expect(part.transaction).toBeNull();
    expect(part.subscription).toBeNull();
    expect(part.permissions).toBeNull();
    expect(part.dedicated.size).toBe(0);
  });

  test('its shared defaults live on the prototype: a write changes that part only', () => {
    const one = split().partSession(0);
    const other = split().partSession(0);
    expect(Object.keys(one).sort()).toEqual(['id', 'index', 'split']);
    one.command = 'mget';
    expect(one.command).toBe('mget');
    expect(other.command).toBe('NULL');
  });

  test('its reply completes the split command for its owner', () => {
    const filled: Buffer[] = [];
    const command = new SplitCommand({ id: 1, protocol: 2, onSlotFilled: (slot) => filled.push(slot.reply as Buffer) }, { stride: 1, merge: 'sum' }, [{ shard: 0, keyIndexes: [0] }, { shard: 1, keyIndexes: [1] }], 2);
    command.partSession(1).replyNow(b(':2\r\n'));
    expect(filled).toEqual([]);
    command.partSession(0).replyNow(b(':1\r\n'));
    expect(texts(filled)).toEqual([':3\r\n']);
  });
});

describe('one-key parts sent as GET and SET', () => {
  const mget = SPLIT_RULES.get('mget') as SplitRule;

  test('in cluster mode a part of one key is sent as the single command, a part of more keys keeps the client\'s; a ring keeps it always', () => {
    const args = [b('MGET'), b('a'), b('b'), b('c')];
    const groups = groupByShard(args, [1, 2, 3], (k) => (k.toString() === 'b' ? 1 : 0));
    const sent = (singles: boolean): string[] => groups.map((g) => encode.commandOfKeys(partCommand(mget, args[0], g, singles), args, [1, 2, 3], 1, g.keyIndexes).toString());
    expect(sent(true)).toEqual(['*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nc\r\n', '*2\r\n$3\r\nGET\r\n$1\r\nb\r\n']);
    expect(sent(false)).toEqual(['*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nc\r\n', '*2\r\n$4\r\nMGET\r\n$1\r\nb\r\n']);
    const msetArgs = [b('MSET'), b('a'), b('1'), b('b'), b('2')];
    const mset = SPLIT_RULES.get('mset') as SplitRule;
    const msetSent = groupByShard(msetArgs, [1, 3], (k) => (k.toString() === 'b' ? 1 : 0)).map((g) =>
      encode.commandOfKeys(partCommand(mset, msetArgs[0], g, true), msetArgs, [1, 3], 2, g.keyIndexes).toString(),
    );
    expect(msetSent).toEqual(['*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n', '*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n']);
    // DEL has no single command: its parts keep DEL.
    expect(partCommand(SPLIT_RULES.get('del') as SplitRule, b('DEL'), { shard: 0, keyIndexes: [0] }, true).toString()).toBe('DEL');
  });

  const merged = (protocol: 2 | 3, replies: string[]): string => {
    const filled: Buffer[] = [];
    const keyIndexes = [[0, 2], [1], [3]];
    const parts = replies.map((_, i) => ({ shard: i, keyIndexes: keyIndexes[i] }));
    const command = new SplitCommand({ id: 1, protocol, onSlotFilled: (slot) => filled.push(slot.reply as Buffer) }, mget, parts, replies.length + 1);
    replies.forEach((r, i) => command.partSession(i).replyNow(b(r)));
    return texts(filled)[0];
  };

  test('GET replies merge with MGET replies in key order; WRONGTYPE is MGET\'s nil', () => {
    // keys 0 and 2 on part 0 (MGET), key 1 on part 1 (GET), key 3 on part 2 (GET of a list).
    const replies = ['*2\r\n$1\r\nx\r\n$-1\r\n', '$2\r\nyy\r\n', '-WRONGTYPE Operation against a key holding the wrong kind of value\r\n'];
    expect(merged(2, replies)).toBe('*4\r\n$1\r\nx\r\n$2\r\nyy\r\n$-1\r\n$-1\r\n');
    expect(merged(3, replies)).toBe('*4\r\n$1\r\nx\r\n$2\r\nyy\r\n_\r\n_\r\n');
  });

  test('any other error of a GET part is the reply, as before', () => {
    expect(merged(2, ['*2\r\n$1\r\nx\r\n$-1\r\n', '-NOPERM no\r\n', '$1\r\nz\r\n'])).toBe('-NOPERM no\r\n');
  });
});
