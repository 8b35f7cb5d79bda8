// twemproxy's key hashes (sharding/hash.ts) against the vectors of twemproxy's own tests
// (src/test_all.c) and of libmemcached's tests/hash_results.h, which twemproxy matches.
import { KEY_HASHES, KeyHash, crc16, fnv1_32, fnv1_64, fnv1a_32, fnv1a_64, hsieh, md5, oneAtATime } from '../../sharding/hash';
import { HASH_NAMES, HashName } from '../../config/schema';
import { crc16 as xmodem } from '../../sharding/slot';
import { md5Words } from '../../sharding/md5';
import { createHash } from 'node:crypto';

const h = (fn: KeyHash, s: string | Buffer): number => {
  const b = typeof s === 'string' ? Buffer.from(s, 'latin1') : s;
  return fn(b, 0, b.length);
};

// twemproxy src/test_all.c: every hash of "apple".
const APPLE: Record<HashName, number> = {
  one_at_a_time: 2297466611,
  md5: 3195025439,
  crc16: 3662830516,
  crc32: 10542,
  crc32a: 2838417488,
  fnv1_32: 67176023,
  fnv1a_32: 280767167,
  fnv1_64: 473199127,
  fnv1a_64: 1488911807,
  hsieh: 3738850110,
  jenkins: 1442444624,
  murmur: 4142305122,
};

const WORDS = [
  'apple', 'beat', 'carrot', 'daikon', 'eggplant', 'flower', 'green', 'hide', 'ick', 'jack', 'kick', 'lime', 'mushrooms',
  'nectarine', 'orange', 'peach', 'quant', 'ripen', 'strawberry', 'tang', 'up', 'volumne', 'when', 'yellow', 'zip',
];

// libmemcached tests/hash_results.h, in the order of WORDS.
const LIBMEMCACHED: [string, KeyHash, number[]][] = [
  ['fnv1_32', fnv1_32, [67176023, 1190179409, 2043204404, 3221866419, 2567703427, 3787535528, 4147287986, 3500475733, 344481048, 3865235296, 2181839183, 119581266, 510234242, 4248244304, 1362796839, 103389328, 1449620010, 182962511, 3554262370, 3206747549, 1551306158, 4127558461, 1889140833, 2774173721, 1180552018]],
  ['fnv1a_32', fnv1a_32, [280767167, 2421315013, 3072375666, 855001899, 459261019, 3521085446, 18738364, 1625305005, 2162232970, 777243802, 3323728671, 132336572, 3654473228, 260679466, 1169454059, 2698319462, 1062177260, 235516991, 2218399068, 405302637, 1128467232, 3579622413, 2138539289, 96429129, 2877453236]],
  ['fnv1_64', fnv1_64, [473199127, 4148981457, 3971873300, 3257986707, 1722477987, 2991193800, 4147007314, 3633179701, 1805162104, 3503289120, 3395702895, 3325073042, 2345265314, 3340346032, 2722964135, 1173398992, 2815549194, 2562818319, 224996066, 2680194749, 3035305390, 246890365, 2395624193, 4145193337, 1801941682]],
  ['fnv1a_64', fnv1a_64, [1488911807, 2500855813, 1510099634, 1390325195, 3647689787, 3241528582, 1669328060, 2604311949, 734810122, 1516407546, 560948863, 1767346780, 561034892, 4156330026, 3716417003, 3475297030, 1518272172, 227211583, 3938128828, 126112909, 3043416448, 3131561933, 1328739897, 2455664041, 2272238452]],
  ['md5', md5, [3195025439, 2556848621, 3724893440, 3332385401, 245758794, 2550894432, 121710495, 3053817768, 1250994555, 1862072655, 2631955953, 2951528551, 1451250070, 2820856945, 2060845566, 3646985608, 2138080750, 217675895, 2230934345, 1234361223, 3968582726, 2455685270, 1293568479, 199067604, 2042482093]],
  ['hsieh', hsieh, [3738850110, 3636226060, 3821074029, 3489929160, 3485772682, 80540287, 1805464076, 1895033657, 409795758, 979934958, 3634096985, 1284445480, 2265380744, 707972988, 353823508, 1549198350, 1327930172, 9304163, 4220749037, 2493964934, 2777873870, 2057831732, 1510213931, 2027828987, 3395453351]],
];

describe('twemproxy key hashes', () => {
  test('every config hash name has a function', () => {
    expect(Object.keys(KEY_HASHES).sort()).toEqual([...HASH_NAMES].sort());
  });

  test.each(HASH_NAMES.map((n) => [n]))('%s("apple") matches twemproxy', (name) => {
    expect(h(KEY_HASHES[name], 'apple')).toBe(APPLE[name]);
  });

  test.each(LIBMEMCACHED)('%s matches libmemcached on 25 words', (_name, fn, expected) => {
    expect(WORDS.map((w) => h(fn, w))).toEqual(expected);
  });

  test('hashes cover only [start, end) of the buffer', () => {
    const buf = Buffer.from('xxappleyy');
    for (const name of HASH_NAMES) expect(KEY_HASHES[name](buf, 2, 7)).toBe(APPLE[name]);
  });

  test.each(HASH_NAMES.map((n) => [n]))('%s returns an unsigned 32-bit integer for binary keys', (name) => {
    for (let len = 0; len < 40; len++) {
      const key = Buffer.alloc(len, 0);
      for (let i = 0; i < len; i++) key[i] = (i * 97 + 200) & 0xff;
      const v = h(KEY_HASHES[name], key);
      expect(Number.isInteger(v) && v >= 0 && v <= 0xffffffff).toBe(true);
    }
  });

  // Bytes >= 0x80 enter as sign-extended C chars on x86-64 (proved against a real nutcracker in
  // test/integration/ring-twemproxy.test.ts); these pin the arithmetic.
  test('fnv1a_64 reads a byte >= 0x80 as a sign-extended char', () => {
    expect(h(fnv1a_64, Buffer.from([0x80]))).toBe(Number((BigInt((0x84222325 ^ 0xffffff80) >>> 0) * 0x1b3n) & 0xffffffffn));
    expect(h(fnv1a_64, Buffer.from([0x7f]))).toBe(Number((BigInt(0x84222325 ^ 0x7f) * 0x1b3n) & 0xffffffffn));
  });

  test('one_at_a_time reads a byte >= 0x80 as a sign-extended char', () => {
    let v = 0xffffffff;
    v = (v + (v << 10)) >>> 0;
    v = (v ^ (v >>> 6)) >>> 0;
    v = (v + (v << 3)) >>> 0;
    v = (v ^ (v >>> 11)) >>> 0;
    v = (v + (v << 15)) >>> 0;
    expect(h(oneAtATime, Buffer.from([0xff]))).toBe(v);
  });

  test("crc16 is twemproxy's (32-bit register), not Redis Cluster's", () => {
    // Its low 16 bits are CRC16-XMODEM (Redis Cluster's); the bits shifted out stay above them.
    for (const w of WORDS) expect(h(crc16, w) & 0xffff).toBe(xmodem(Buffer.from(w)));
    expect(h(crc16, 'apple')).toBeGreaterThan(0xffff);
  });

  test('empty keys', () => {
    expect(h(fnv1a_32, '')).toBe(2166136261);
    expect(h(fnv1_64, '')).toBe(2216829733);
    expect(h(hsieh, '')).toBe(0);
  });
});

describe('md5 in JS', () => {
  test('equals node:crypto on every length from 0 to 200 and on random bytes', () => {
    for (let len = 0; len <= 200; len++) {
      const b = Buffer.alloc(len + 3);
      for (let i = 0; i < b.length; i++) b[i] = (i * 131 + len * 7) & 0xff;
      const d = createHash('md5').update(b.subarray(2, 2 + len)).digest();
      expect(md5Words(b, 2, 2 + len)).toEqual([d.readUInt32LE(0), d.readUInt32LE(4), d.readUInt32LE(8), d.readUInt32LE(12)]);
    }
  });
});
