// Which SUBSCRIBE channels and PSUBSCRIBE patterns may receive keyspace notifications (issue 12):
// those are subscribed on every master, the rest on the Pub/Sub home only.
import { isKeyspaceChannel, mayMatchKeyspace } from '../../proxy/pubsub/keyspace-channels';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

test('channels: __keyspace@ and __keyevent@ prefixes only', () => {
  for (const c of ['__keyspace@0__:foo', '__keyevent@0__:set', '__keyspace@', '__keyevent@15__:expired', '__keyspace@0__:keymiss']) {
    expect([c, isKeyspaceChannel(b(c))]).toEqual([c, true]);
  }
  for (const c of ['news', '__keyspace', '__keyevent', '_keyspace@0__:x', '__KEYSPACE@0__:x', '', '__key*']) {
    expect([c, isKeyspaceChannel(b(c))]).toEqual([c, false]);
  }
});

test('patterns that can match a keyspace or keyevent channel', () => {
  const yes = [
    '*',
    '**',
    '_*',
    '__key*',
    '__keys*',
    '__keyspace@*',
    '__keyspace@0__:*',
    '__keyevent@0__:set',
    '__keyevent@*__:expired',
    '__keyspace@0__:user:*',
    '*:foo',
    '*set',
    '?_keyspace*',
    '??????????@*',
    '[_]_key*',
    '[a-z_]_keyevent@*',
    '[z-a_]*', // a reversed range is still a range, as in Redis
    '[^a]*',
    '\\_\\_keyspace@*',
    '__key[se]*',
    '__key[\\s]pace@*',
    '*[', // an unterminated class: "may match", to be safe
    '__keyspace@', // exactly the prefix
  ];
  for (const p of yes) expect([p, mayMatchKeyspace(b(p))]).toEqual([p, true]);
});

test('patterns that cannot match one', () => {
  const no = [
    'news',
    'news.*',
    'weather.*',
    '__key',
    '__keyspace',
    '__keyspacex*',
    '__keyevent#*',
    '_',
    '?',
    '???',
    '[^_]*',
    '[a-z]*',
    '_[^_]*',
    'a*',
    '\\*',
    '__KEY*',
    '__[', // an unterminated class matches one character at most
    '__key[^se]*',
    '',
  ];
  for (const p of no) expect([p, mayMatchKeyspace(b(p))]).toEqual([p, false]);
});

test('a long pattern of stars is answered at once', () => {
  const p = b(`${'*a'.repeat(5000)}x`);
  const t = Date.now();
  expect(mayMatchKeyspace(p)).toBe(true);
  expect(mayMatchKeyspace(b(`${'?'.repeat(5)}${'*'.repeat(200_000)}Q`))).toBe(true);
  expect(mayMatchKeyspace(b(`x${'*'.repeat(200_000)}`))).toBe(false);
  // A backtracking matcher takes longer than the universe's age on these; a linear one milliseconds
  // (1.6 s seen on a machine loaded by other test runs): the bound only tells the two apart.
  expect(Date.now() - t).toBeLessThan(10_000);
}, 30_000);
