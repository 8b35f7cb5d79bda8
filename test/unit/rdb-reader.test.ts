// The snapshot reader (proxy/replication/rdb-reader.ts) on an RDB that Redis 7.4.1 wrote
// (test/fixtures/rdb/README.md): every key cut out of it must carry exactly the DUMP payload and
// PEXPIRETIME that server answered, however the file is cut into chunks; and what it cannot carry
// (a truncated file, an unknown type, a newer version) must stop it with a message naming it.
import fs from 'node:fs';
import path from 'node:path';
import { RdbEntry, RdbFormatError, RdbReader } from '../../proxy/replication/rdb-reader';
import { crc64 } from '../../proxy/replication/crc64';
import { randInt, xorshift32 } from '../helpers/random';

const FIXTURES = path.join(__dirname, '../fixtures/rdb');
const RDB = fs.readFileSync(path.join(FIXTURES, 'rdb-7.4.1.rdb'));
interface FixtureKey {
  key: string;
  type: string;
  pexpiretime: number;
  dump: string;
}
const FIXTURE = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'rdb-7.4.1.keys.json'), 'utf8')) as {
  rdbVersion: number;
  keys: FixtureKey[];
  functions: string[];
};

interface Read {
  version: number;
  aux: Map<string, string>;
  dbs: number[];
  resizes: [number, number][];
  entries: RdbEntry[];
  functions: string[];
  checksum: bigint | null;
  consumed: number;
}

/** Reads `file` pushed in the chunks `cut` gives (sizes), then ends it. */
function readInChunks(file: Buffer, nextSize: () => number): Read {
  const read: Read = { version: 0, aux: new Map(), dbs: [], resizes: [], entries: [], functions: [], checksum: null, consumed: 0 };
  const reader = new RdbReader({
    onHeader: (v) => (read.version = v),
    onAux: (name, value) => read.aux.set(name.toString(), value.toString()),
    onSelectDb: (db) => read.dbs.push(db),
    onResizeDb: (size, expires) => read.resizes.push([size, expires]),
    onEntry: (e) => read.entries.push(e),
    onFunction: (code) => read.functions.push(code.toString()),
    onEnd: (checksum) => (read.checksum = checksum),
  });
  for (let at = 0; at < file.length; ) {
    const size = Math.min(nextSize(), file.length - at);
    // A copy the test then scribbles over: the reader must keep no reference to a pushed chunk.
    const chunk = Buffer.from(file.subarray(at, at + size));
    read.consumed += reader.push(chunk);
    chunk.fill(0xee);
    at += size;
  }
  reader.end();
  return read;
}

function errorOf(file: Buffer, nextSize: () => number = () => file.length): RdbFormatError {
  try {
    readInChunks(file, nextSize);
  } catch (err) {
    if (err instanceof RdbFormatError) return err;
    throw err;
  }
  throw new Error('the reader accepted the file');
}

const whole = readInChunks(RDB, () => RDB.length);

describe('the RDB of Redis 7.4.1, read whole', () => {
  test('version 12, its AUX fields, db 0 with its size hint, the checksum verified', () => {
    expect(whole.version).toBe(12);
    expect(FIXTURE.rdbVersion).toBe(12);
    expect(whole.aux.get('redis-ver')).toBe('7.4.1');
    expect(whole.dbs).toEqual([0]);
    expect(whole.resizes).toEqual([[FIXTURE.keys.length, 1]]);
    expect(whole.checksum).toBe(RDB.readBigUInt64LE(RDB.length - 8));
    expect(whole.checksum).toBe(crc64(RDB, 0, RDB.length - 8));
    expect(whole.consumed).toBe(RDB.length);
  });

  test.each(FIXTURE.keys.map((k) => [k.key, k] as const))('%s: the DUMP payload byte for byte and PEXPIRETIME', (_name, want) => {
    const found = whole.entries.filter((e) => e.key.toString() === want.key);
    expect(found).toHaveLength(1);
    const [entry] = found;
    expect(entry.dump.toString('hex')).toBe(want.dump);
    expect(entry.type).toBe(Buffer.from(want.dump, 'hex')[0]);
    expect(entry.expireAtMs).toBe(want.pexpiretime === -1 ? null : want.pexpiretime);
    expect(entry.db).toBe(0);
  });

  test('no entry besides the keys of the fixture', () => {
    expect(whole.entries.map((e) => e.key.toString()).sort()).toEqual(FIXTURE.keys.map((k) => k.key).sort());
  });

  test('the function library, as FUNCTION LOAD takes it', () => {
    expect(whole.functions).toHaveLength(FIXTURE.functions.length);
    for (const name of FIXTURE.functions) {
      expect(whole.functions.some((code) => code.startsWith(`#!lua name=${name}`))).toBe(true);
    }
  });

  test('the value types the fixture promises are all there: 0 2 5 11 16 17 18 20 21 25', () => {
    expect([...new Set(whole.entries.map((e) => e.type))].sort((a, b) => a - b)).toEqual([0, 2, 5, 11, 16, 17, 18, 20, 21, 25]);
  });
});

/** Entries as comparable text. */
const summary = (read: Read): string[] =>
  read.entries.map((e) => `${e.db} ${e.key.toString('hex')} ${String(e.expireAtMs)} ${e.dump.toString('hex')}`);

describe('the same RDB cut into chunks', () => {
  test('byte by byte: the same entries, functions and checksum', () => {
    const bytes = readInChunks(RDB, () => 1);
    expect(summary(bytes)).toEqual(summary(whole));
    expect(bytes.functions).toEqual(whole.functions);
    expect(bytes.aux).toEqual(whole.aux);
    expect(bytes.checksum).toBe(whole.checksum);
    expect(bytes.consumed).toBe(RDB.length);
  });

  test.each([1, 2, 3, 4, 5])('random chunk sizes (seed %i): the same entries', (seed) => {
    const rng = xorshift32(seed);
    const maxSize = [7, 64, 700, 4096, 20000][seed - 1];
    const cut = readInChunks(RDB, () => randInt(rng, 1, maxSize));
    expect(summary(cut)).toEqual(summary(whole));
    expect(cut.functions).toEqual(whole.functions);
    expect(cut.checksum).toBe(whole.checksum);
  });

  test('bytes after the RDB are not consumed: push answers where the RDB ended', () => {
    const tail = Buffer.from('0123456789012345678901234567890123456789+PING\r\n');
    const reader = new RdbReader({ onEntry: () => undefined, onFunction: () => undefined, onEnd: () => undefined });
    expect(reader.push(RDB.subarray(0, 100))).toBe(100);
    expect(reader.push(Buffer.concat([RDB.subarray(100), tail]))).toBe(RDB.length - 100);
    expect(reader.done).toBe(true);
    expect(reader.push(tail)).toBe(0);
    reader.end();
  });
});

/** The offset of the type byte of `key`'s entry in the fixture (the key is stored plainly). */
function entryOffset(key: string): number {
  const plain = Buffer.concat([Buffer.from([key.length]), Buffer.from(key)]);
  const at = RDB.indexOf(plain);
  if (at < 1) throw new Error(`${key} not found plainly in the fixture`);
  return at - 1;
}

describe('what the reader refuses, naming it', () => {
  test('a file cut short, in the middle of a value: truncated, at which byte, in which key', () => {
    const at = entryOffset('zset:big') + 500;
    for (const size of [at, 1]) {
      const err = errorOf(RDB.subarray(0, at), () => size);
      expect(err.message).toBe(
        `RDB truncated at byte ${at}: in the value of key 'zset:big' (type 5, zset 2) that starts at byte ${entryOffset('zset:big')}`,
      );
    }
  });

  test('a file cut short before its checksum, and one cut in its header', () => {
    expect(errorOf(RDB.subarray(0, RDB.length - 3)).message).toBe(
      `RDB truncated at byte ${RDB.length - 3}: in the checksum after the EOF opcode`,
    );
    expect(errorOf(RDB.subarray(0, 4)).message).toBe('RDB truncated at byte 4: in the header');
  });

  test('an unknown type byte: the opcode and its offset (checksum off, so the type is what stops it)', () => {
    const at = entryOffset('str:raw');
    const file = Buffer.from(RDB);
    file[at] = 0x1a;
    const reader = new RdbReader({ onEntry: () => undefined, onFunction: () => undefined, onEnd: () => undefined }, { verifyChecksum: false });
    expect(() => reader.push(file)).toThrow(`unknown RDB opcode 0x1a (26) at byte ${at}`);
    expect(() => reader.push(file)).toThrow(`unknown RDB opcode 0x1a (26) at byte ${at}`);
  });

  test('a module value: its type, module name and id', () => {
    // type 7, key "m", module id of "ReJSON-RL" encver 3, then whatever
    const id = moduleId('ReJSON-RL', 3);
    const idBytes = Buffer.alloc(9);
    idBytes[0] = 0x81;
    idBytes.writeBigUInt64BE(id, 1);
    const file = Buffer.concat([Buffer.from('REDIS0010'), Buffer.from([7, 1, 0x6d]), idBytes, Buffer.alloc(20)]);
    expect(errorOf(file).message).toBe(`RDB type 7 (module 'ReJSON-RL' encver 3, id ${id}) of key 'm' cannot be carried`);
  });

  test('version 13 in the header', () => {
    const file = Buffer.from(RDB);
    file.write('0013', 5, 'latin1');
    expect(errorOf(file).message).toBe('RDB version 13 is not supported (this reader knows versions 1 to 12)');
  });

  test('not an RDB at all', () => {
    expect(errorOf(Buffer.from('+FULLRESYNC abc 0\r\n')).message).toMatch(/^not an RDB file/);
  });

  test('a changed byte inside a value: the file checksum mismatch', () => {
    const file = Buffer.from(RDB);
    file[entryOffset('str:raw') + 12] ^= 0x01;
    expect(errorOf(file).message).toMatch(/^RDB checksum mismatch: the file says 0x[0-9a-f]{16}, its bytes give 0x[0-9a-f]{16}$/);
  });

  test('a file saved without a checksum (0) is read without one', () => {
    const file = Buffer.from(RDB);
    file.fill(0, RDB.length - 8);
    expect(readInChunks(file, () => 1000).checksum).toBe(0n);
  });

  test('a handler that throws stops the reader with its error', () => {
    const reader = new RdbReader({
      onEntry: () => {
        throw new Error('B refused');
      },
      onFunction: () => undefined,
      onEnd: () => undefined,
    });
    expect(() => reader.push(RDB)).toThrow('B refused');
    expect(() => reader.end()).toThrow('B refused');
  });
});

describe('layouts the fixture does not hold', () => {
  test('module AUX data is skipped exactly, and old-style EXPIRETIME in seconds becomes ms', () => {
    const moduleAux = Buffer.concat([
      Buffer.from([247, 0x05, 0x02, 0x02]), // module id 5, when-opcode UINT, when 2
      Buffer.from([0x01, 0x3f, 0x02, 0x40, 0x80, 0x03, 1, 2, 3, 4, 0x04, 1, 2, 3, 4, 5, 6, 7, 8, 0x05, 0x02, 0x61, 0x62, 0x00]),
    ]);
    const expire = Buffer.from([253, 0, 0, 0, 0]);
    expire.writeInt32LE(1_800_000_000, 1);
    const entry = Buffer.from([0x00, 0x01, 0x6b, 0x02, 0x76, 0x76]); // string "k" = "vv"
    const file = Buffer.concat([Buffer.from('REDIS0004'), moduleAux, expire, entry, Buffer.from([255])]);
    const read = readInChunks(file, () => 1);
    expect(read.entries).toHaveLength(1);
    expect(read.entries[0].key.toString()).toBe('k');
    expect(read.entries[0].expireAtMs).toBe(1_800_000_000_000);
    expect(read.entries[0].dump.subarray(0, 6)).toEqual(Buffer.from([0x00, 0x02, 0x76, 0x76, 4, 0]));
    expect(read.checksum).toBe(0n);
  });

  test('an integer-encoded and an LZF-compressed key are decoded', () => {
    // key 12345 (int16), then key "aaaa..." (40 bytes) compressed: literal "a", then a back reference of 38 bytes
    const intKey = Buffer.from([0x00, 0xc1, 0x39, 0x30, 0x01, 0x78]);
    const lzf = Buffer.from([0x00, 0x61, 0xe0, 0x1e, 0x00]); // literal "a"; then 7 + 30 + 2 = 39 bytes from 1 back
    const lzfKey = Buffer.concat([Buffer.from([0x00, 0xc3, lzf.length, 40]), lzf, Buffer.from([0x01, 0x79])]);
    const file = Buffer.concat([Buffer.from('REDIS0004'), intKey, lzfKey, Buffer.from([255])]);
    const read = readInChunks(file, () => 3);
    expect(read.entries.map((e) => e.key.toString())).toEqual(['12345', 'a'.repeat(40)]);
  });
});

/** A module type id as Redis makes it from its 9-character name and encoding version. */
function moduleId(name: string, encver: number): bigint {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  let id = 0n;
  for (const c of name) id = (id << 6n) | BigInt(chars.indexOf(c));
  return (id << 10n) | BigInt(encver);
}
