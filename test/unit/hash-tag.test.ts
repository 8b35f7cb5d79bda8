// Hash tags (SPEC 2) and slot numbers: sharding/hash-tag.ts and sharding/slot.ts (routing, CLUSTER
// KEYSLOT, `slotproxy slot`), cross-checked against an independent transcription of Redis's
// keyHashSlot and against cluster-key-slot (on the keys that package hashes right).
import calculateSlot from 'cluster-key-slot';
import { BRACES, hashTag, hashTagged, hashedRange, taggedRange } from '../../sharding/hash-tag';
import { SLOT_COUNT, crc16 as crc16Table, keySlot } from '../../sharding/slot';

/** CRC16-XMODEM bit by bit (poly 0x1021, init 0), independent of any lookup table. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** Redis's keyHashSlot (cluster.c), transcribed independently of the code under test. */
function redisSlot(key: Buffer): number {
  let s = 0;
  while (s < key.length && key[s] !== 0x7b) s++;
  if (s === key.length) return crc16(key) & 0x3fff;
  let e = s + 1;
  while (e < key.length && key[e] !== 0x7d) e++;
  if (e === key.length || e === s + 1) return crc16(key) & 0x3fff;
  return crc16(key.subarray(s + 1, e)) & 0x3fff;
}

const k = (s: string): Buffer => Buffer.from(s, 'latin1');

describe('CRC16 reference', () => {
  test('XMODEM check value of "123456789" is 0x31C3', () => {
    expect(crc16(k('123456789'))).toBe(0x31c3);
  });
});

describe('hashedRange and hashTag', () => {
  // [key, hashed bytes, hash tag (null: the whole key is hashed)]
  test.each<[string, string, string | null]>([
    // SPEC 2's examples
    ['foo{}{bar}', 'foo{}{bar}', null],
    ['foo{{bar}}', '{bar', '{bar'],
    ['limit{yes}_10.0.0.1{yes}', 'yes', 'yes'],
    ['{user1000}.following', 'user1000', 'user1000'],
    ['{user1000}.followers', 'user1000', 'user1000'],
    // more
    ['foo', 'foo', null],
    ['', '', null],
    ['{', '{', null],
    ['}', '}', null],
    ['{}', '{}', null],
    ['}{', '}{', null],
    ['a{b', 'a{b', null],
    ['a}b{', 'a}b{', null],
    ['{a}', 'a', 'a'],
    ['x{a}y', 'a', 'a'],
    ['}{a}', 'a', 'a'],
    ['{}{a}', '{}{a}', null],
    ['{{}}', '{', '{'],
    ['{a}{b}', 'a', 'a'],
    ['a{b}c{d}', 'b', 'b'],
    ['a{b{c}d}', 'b{c', 'b{c'],
    ['{ }', ' ', ' '],
    ['x{}}', 'x{}}', null],
  ])('%j hashes %j (tag %j)', (key, hashed, tag) => {
    const buf = k(key);
    const [start, end] = hashedRange(buf);
    expect(buf.subarray(start, end).toString('latin1')).toBe(hashed);
    const t = hashTag(buf);
    expect(t === null ? null : t.toString('latin1')).toBe(tag);
  });

  test('binary keys: the tag is found by bytes', () => {
    const key = Buffer.from([0xff, 0x7b, 0x00, 0x80, 0x7d, 0x7b, 0x01, 0x7d]);
    expect(hashedRange(key)).toEqual([2, 4]);
    expect([...(hashTag(key) as Buffer)]).toEqual([0x00, 0x80]);
  });

  test('long keys (scanned natively past 64 bytes) find the same tag as short ones', () => {
    for (const pad of [0, 30, 63, 64, 65, 200]) {
      const before = 'p'.repeat(pad);
      expect(hashTag(k(`${before}{tag}rest`))?.toString('latin1')).toBe('tag');
      expect(hashTag(k(`x{${before}}`))?.toString('latin1')).toBe(pad === 0 ? undefined : before);
      expect(hashTag(k(`${before}{}{tag}`))).toBeNull();
      expect(hashTag(k(`${before}{open`))).toBeNull();
    }
  });

  test('hashTagged hashes the range taggedRange names, for either delimiters or none', () => {
    const range = (_key: Buffer, start: number, end: number): number => start * 1000 + end;
    const keys = ['foo{}{bar}', 'foo{{bar}}', '{a}', 'x{}}', '', '{', 'a}b{', `${'p'.repeat(70)}{t}`, 'a[b]c', 'a[]b[c]'];
    for (const tag of [BRACES, { open: 91, close: 93 }, null]) {
      for (const key of keys.map(k)) {
        const [start, end] = taggedRange(key, tag);
        expect([key.toString(), hashTagged(key, tag, range)]).toEqual([key.toString(), range(key, start, end)]);
      }
    }
  });

  test('the tag is a view of the key, not a copy', () => {
    const key = k('x{tag}y');
    const tag = hashTag(key) as Buffer;
    expect(tag.buffer).toBe(key.buffer);
    expect(tag.byteOffset).toBe(key.byteOffset + 2);
  });
});

/** cluster-key-slot keeps looking for a tag after an empty `{}` (foo{}{bar} hashes "{bar", x{}} hashes ""). */
function clusterKeySlotMisHashes(key: Buffer): boolean {
  const open = key.indexOf(0x7b);
  return open >= 0 && key[open + 1] === 0x7d;
}

describe('keySlot', () => {
  test('SLOT_COUNT is 16384', () => {
    expect(SLOT_COUNT).toBe(16384);
  });

  test.each<[string, Buffer, number]>([
    ['empty', k(''), 0x0000],
    ['"123456789" (the XMODEM check value)', k('123456789'), 0x31c3],
    ['"a"', k('a'), crc16(k('a'))],
    ['binary', Buffer.from([0xff, 0x00, 0x80, 0x7b]), crc16(Buffer.from([0xff, 0x00, 0x80, 0x7b]))],
  ])('crc16 of %s', (_name, buf, expected) => {
    expect(crc16Table(buf)).toBe(expected);
  });

  test('crc16 of a range is the crc16 of that slice', () => {
    const buf = k('xx123456789yy');
    expect(crc16Table(buf, 2, 11)).toBe(0x31c3);
  });

  test.each<[string, number]>([
    ['foo', 12182],
    ['bar', 5061],
    ['123456789', 12739],
    ['', 0],
    ['{user1000}.following', 3443],
    ['{user1000}.followers', 3443],
    ['user1000', 3443],
    ['limit{yes}_10.0.0.1{yes}', 15538],
    ['yes', 15538],
    ['foo{{bar}}', 4015],
    ['{bar', 4015],
    // Values from redis-server 7.0 (`CLUSTER KEYSLOT`): an empty first tag hashes the whole key,
    // even when a non-empty {...} or another } follows.
    ['foo{}{bar}', 8363],
    ['{}{a}', 13650],
    ['{}x{a}', 684],
    ['x{}}', 15984],
    ['user{}}:1', 15600],
    ['user{}}:2', 3219],
  ])('slot(%j) = %i', (key, slot) => {
    expect(redisSlot(k(key))).toBe(slot);
    expect(keySlot(k(key))).toBe(slot);
    if (!clusterKeySlotMisHashes(k(key))) expect(calculateSlot(k(key))).toBe(slot);
  });

  test('keys sharing a tag share a slot', () => {
    expect(keySlot(k('{user1000}.following'))).toBe(keySlot(k('{user1000}.followers')));
    expect(keySlot(k('a{x}b'))).toBe(keySlot(k('c{x}d')));
    expect(keySlot(k('a{x}b'))).toBe(keySlot(k('x')));
  });

  test('random keys full of braces: keySlot is the CRC16 of hashedRange, as in Redis', () => {
    let x = 0x2545f491;
    const next = (): number => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return x >>> 0;
    };
    const alphabet = k('{}{}ab\x00\xff');
    const mismatches: string[] = [];
    let crossChecked = 0;
    for (let i = 0; i < 20000 && mismatches.length < 5; i++) {
      const key = Buffer.alloc(next() % 9);
      for (let j = 0; j < key.length; j++) key[j] = alphabet[next() % alphabet.length];
      const [start, end] = hashedRange(key);
      const expected = redisSlot(key);
      if ((crc16(key.subarray(start, end)) & 0x3fff) !== expected) mismatches.push(`hashedRange ${key.toString('hex')}`);
      if (keySlot(key) !== expected) mismatches.push(`keySlot ${key.toString('hex')}: ${keySlot(key)} != ${expected}`);
      if (!clusterKeySlotMisHashes(key)) {
        crossChecked++;
        if (calculateSlot(key) !== expected) mismatches.push(`cluster-key-slot ${key.toString('hex')}`);
      }
    }
    expect(mismatches).toEqual([]);
    expect(crossChecked).toBeGreaterThan(10000);
  });
});
