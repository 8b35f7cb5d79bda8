// The snapshot reader (proxy/replication/rdb-reader.ts) against real servers: a node holding every
// value type it has, in small (listpack, intset) and large (hash table, skiplist, quicklist of many
// nodes) encodings, with TTLs, compressed strings and keys, a stream with consumer groups and a
// PEL, and a function library, SAVEs its RDB; every entry the reader cuts out of that file must be
// byte for byte what `DUMP key` answers on that node, its expiry what PEXPIRETIME answers, and
// `RESTORE ... ABSTTL REPLACE` of it on a second node must give the same key back.
//
// Redis 7.0 from PATH always; Redis 7.4.1 and Valkey 8.0.1 when their binaries are on this machine
// (the list of cases is built when the file loads, so no case is ever skipped).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { once } from 'node:events';
import Redis from 'ioredis';
import { freePort } from '../../cmd/sandbox/ports';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { startOnFreePort } from '../../cmd/sandbox/node-group';
import { RdbEntry, RdbReader } from '../../proxy/replication/rdb-reader';

interface Server {
  name: string;
  bin: string;
  rdbVersion: number;
  /** Hash fields with their own TTL (HPEXPIRE), new in Redis 7.4. */
  fieldTtls: boolean;
}

const SERVERS: Server[] = [{ name: 'Redis 7.0 (redis-server on PATH)', bin: 'redis-server', rdbVersion: 10, fieldTtls: false }];
if (fs.existsSync('/work/shared/redis/7.4.1/redis-server')) {
  SERVERS.push({ name: 'Redis 7.4.1', bin: '/work/shared/redis/7.4.1/redis-server', rdbVersion: 12, fieldTtls: true });
}
if (fs.existsSync('/work/shared/valkey/8.0.1/valkey-server')) {
  SERVERS.push({ name: 'Valkey 8.0.1', bin: '/work/shared/valkey/8.0.1/valkey-server', rdbVersion: 11, fieldTtls: false });
}

const LIBRARY = "#!lua name=rdblib\nredis.register_function('rdbecho', function(keys, args) return args[1] end)";
const FAR = Date.now() + 10 * 24 * 3600 * 1000;
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** Writes keys of every type `server` has, in db 0 and (a few) in db 3. */
async function writeKeys(client: Redis, db3: Redis, server: Server): Promise<void> {
  const p = client.pipeline();
  p.set('str:small', 'hello');
  p.set('str:int', '12345');
  p.set('str:neg', '-7');
  p.set('str:int64', '1234567890123');
  p.set('str:empty', '');
  p.set('str:lzf', 'abcdefgh'.repeat(200)); // compresses
  p.set('str:raw', Buffer.from(range(300).map((i) => (i * 7919) % 251))); // does not
  p.set('str:ttl', 'soon', 'PX', 100_000_000);
  p.set('str:ttl-abs', 'later', 'PXAT', FAR);
  p.set('k'.repeat(300), 'a compressible key'); // the key itself is LZF-compressed
  p.set('987654', 'an integer-encoded key');
  p.setbit('bits', 100_000, 1);
  p.pfadd('hll', ...range(200).map((i) => `e${i}`));
  p.rpush('list:small', 'a', 'b', '3', '-4');
  for (const part of range(10)) p.rpush('list:big', ...range(1000).map((i) => `item-${part}-${i}`));
  p.rpush('list:plain', 'x', 'y'.repeat(10_000), 'z'); // a plain quicklist node (threshold lowered below)
  p.sadd('set:int', 1, 2, 3, -100, 70000);
  p.sadd('set:int-big', ...range(1000));
  p.sadd('set:small', 'red', 'green', 'blue');
  p.sadd('set:big', ...range(1000).map((i) => `member-${i}`));
  p.zadd('zset:small', 1, 'one', 2.5, 'two and a half', '-inf', 'bottom');
  p.zadd('zset:big', ...range(1000).flatMap((i) => [i / 3, `z${i}`]));
  p.zadd('zset:inf', '+inf', 'top', '-inf', 'bottom', ...range(200).flatMap((i) => [i, `m${i}`]));
  p.hset('hash:small', 'f1', 'v1', 'f2', '2');
  p.hset('hash:big', ...range(1000).flatMap((i) => [`field-${i}`, `value-${i}`]));
  p.hset('hash:long-value', 'f', 'v'.repeat(100)); // over hash-max-listpack-value: a hash table
  p.hset('hash:ttl', 'a', '1');
  p.pexpireat('hash:ttl', FAR);
  p.xadd('stream:plain', '1-1', 'a', '1');
  for (const i of range(2000)) p.xadd('stream:big', '*', 'n', String(i), 'payload', 'p'.repeat(i % 50));
  for (const i of range(30)) p.xadd('stream:groups', `${1000 + i}-0`, 'field', `v${i}`);
  p.xdel('stream:groups', '1005-0'); // a max deleted id
  p.xgroup('CREATE', 'stream:groups', 'g1', '0');
  p.xgroup('CREATE', 'stream:groups', 'g2', '$');
  p.xreadgroup('GROUP', 'g1', 'alice', 'COUNT', 10, 'STREAMS', 'stream:groups', '>');
  p.xreadgroup('GROUP', 'g1', 'bob', 'COUNT', 5, 'STREAMS', 'stream:groups', '>');
  p.xack('stream:groups', 'g1', '1001-0', '1002-0');
  p.xgroup('CREATECONSUMER', 'stream:groups', 'g2', 'carol');
  await p.exec();
  await db3.set('db3:key', 'in database 3');
  await db3.rpush('db3:list', 'x', 'y');
  if (server.fieldTtls) {
    await client.hset('hash:fttl', 'a', '1', 'b', '2', 'c', '3');
    await client.call('HPEXPIREAT', 'hash:fttl', FAR, 'FIELDS', 1, 'b');
    await client.hset('hash:fttl-big', ...range(1000).flatMap((i) => [`f${i}`, `v${i}`]));
    await client.call('HPEXPIREAT', 'hash:fttl-big', FAR, 'FIELDS', 2, 'f1', 'f999');
  }
}

/** Types whose RDB order is a hash table's: set (2), hash (4), hash with field TTLs (24). */
const HASH_TABLE_TYPES = new Set([2, 4, 24]);

/** A set's or hash's members (with each field's TTL), sorted, as one string. */
async function contents(client: Redis, key: Buffer, type: number): Promise<string> {
  if (type === 2) return (await client.smembersBuffer(key)).map((m) => m.toString('hex')).sort().join(',');
  const flat = await client.hgetallBuffer(key);
  const fields = Object.keys(flat).sort();
  const ttls = type === 24 ? ((await client.call('HPEXPIRETIME', key, 'FIELDS', fields.length, ...fields)) as number[]) : [];
  return fields.map((f, i) => `${f}=${flat[f].toString('hex')}@${ttls[i] ?? ''}`).join(',');
}

interface SnapshotRead {
  version: number;
  entries: RdbEntry[];
  functions: Buffer[];
  checksum: bigint | null;
}

function newRead(): { read: SnapshotRead; reader: RdbReader } {
  const read: SnapshotRead = { version: 0, entries: [], functions: [], checksum: null };
  const reader = new RdbReader({
    onHeader: (v) => (read.version = v),
    onEntry: (e) => read.entries.push(e),
    onFunction: (code) => read.functions.push(code),
    onEnd: (checksum) => (read.checksum = checksum),
  });
  return { read, reader };
}

/** Reads an RDB file through the reader as the file system hands it out. */
async function readFile(file: string): Promise<SnapshotRead> {
  const { read, reader } = newRead();
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 64 * 1024 })) reader.push(chunk as Buffer);
  reader.end();
  return read;
}

/** Reads an RDB's bytes through the reader in pieces of `size` bytes. */
function readInPieces(bytes: Buffer, size: number): SnapshotRead {
  const { read, reader } = newRead();
  for (let at = 0; at < bytes.length; at += size) reader.push(bytes.subarray(at, at + size));
  reader.end();
  return read;
}

/** How a full sync framed its snapshot: a length first, or (diskless) a 40-byte mark after it. */
type SyncFraming = 'length' | 'eof-mark';

interface FullSync {
  read: SnapshotRead;
  framing: SyncFraming;
  /** The RDB's length as announced ($<len>) or as the reader found it (before the mark). */
  rdbLength: number;
  consumed: number;
  /** For the mark: the 40 bytes that followed the RDB equal the mark announced. */
  markFollows: boolean;
}

/**
 * Asks the node on `port` for a full sync as a replica does (REPLCONF capa eof, PSYNC ? -1) and
 * pushes what arrives after the "$..." line through the reader, as a follower's link would.
 */
async function fullSync(port: number): Promise<FullSync> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  // One at a time: a node refuses PSYNC while a reply to the connection is still pending.
  socket.write('REPLCONF capa eof capa psync2\r\n');
  const [ok] = (await once(socket, 'data')) as [Buffer];
  if (ok.toString() !== '+OK\r\n') throw new Error(`REPLCONF answered ${JSON.stringify(ok.toString())}`);
  socket.write('PSYNC ? -1\r\n');
  const { read, reader } = newRead();
  let head = Buffer.alloc(0);
  let framing: SyncFraming | null = null;
  let mark = Buffer.alloc(0);
  let announced = -1;
  let consumed = 0;
  let after = Buffer.alloc(0);
  try {
    return await new Promise<FullSync>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no snapshot within 30 s; head ${JSON.stringify(head.toString('latin1'))}`)), 30_000);
      const settle = (): void => {
        if (framing === 'eof-mark' && after.length < mark.length) return;
        clearTimeout(timer);
        const rdbLength = framing === 'length' ? announced : consumed;
        resolve({ read, framing: framing ?? 'length', rdbLength, consumed, markFollows: framing === 'eof-mark' && after.subarray(0, 40).equals(mark) });
      };
      socket.on('error', reject);
      socket.on('data', (data: Buffer) => {
        try {
          let chunk = data;
          if (framing === null) {
            head = Buffer.concat([head, chunk]);
            // +FULLRESYNC <replid> <offset>, newlines while the snapshot is made, then $...
            for (;;) {
              while (head.length > 0 && head[0] === 0x0a) head = head.subarray(1);
              const eol = head.indexOf('\r\n');
              if (eol < 0) return;
              const line = head.toString('latin1', 0, eol);
              head = head.subarray(eol + 2);
              if (line.startsWith('+')) continue;
              if (!line.startsWith('$')) throw new Error(`unexpected line ${JSON.stringify(line)}`);
              framing = line.startsWith('$EOF:') ? 'eof-mark' : 'length';
              if (framing === 'eof-mark') mark = Buffer.from(line.slice(5), 'latin1');
              else announced = Number(line.slice(1));
              chunk = head;
              break;
            }
          }
          if (!reader.done) {
            const used = reader.push(chunk);
            consumed += used;
            if (!reader.done) return;
            reader.end();
            chunk = chunk.subarray(used);
          }
          after = Buffer.concat([after, chunk]);
          settle();
        } catch (err) {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
  } finally {
    socket.destroy();
  }
}

describe.each(SERVERS)('an RDB that $name saved, cut into entries', (server) => {
  let source: RedisNode | undefined;
  let target: RedisNode | undefined;
  const clients: Redis[] = [];
  let read: SnapshotRead;
  const connect = (node: RedisNode | undefined, db = 0): Redis => {
    if (node === undefined) throw new Error('the node did not start');
    const c = new Redis({ port: node.port, db, maxRetriesPerRequest: 0 });
    clients.push(c);
    return c;
  };
  const start = (): Promise<RedisNode> =>
    startOnFreePort(freePort, (port) => ({ port, serverBin: server.bin, extraArgs: ['--enable-debug-command', 'yes'] }));

  beforeAll(async () => {
    [source, target] = await Promise.all([start(), start()]);
    const client = connect(source);
    await client.call('DEBUG', 'QUICKLIST-PACKED-THRESHOLD', '1000');
    await writeKeys(client, connect(source, 3), server);
    await client.call('FUNCTION', 'LOAD', LIBRARY);
    expect(await client.call('SAVE')).toBe('OK');
    read = await readFile(path.join(source.dir, 'dump.rdb'));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all([source?.destroy(), target?.destroy()]);
  }, 30_000);

  test(`the header's version is ${server.rdbVersion} and the checksum was verified`, () => {
    expect(read.version).toBe(server.rdbVersion);
    expect(read.checksum).not.toBe(0n);
  });

  test('one entry per key of every database, and nothing else', async () => {
    for (const db of [0, 3]) {
      const keys = (await connect(source, db).keysBuffer('*')).map((k) => k.toString('hex')).sort();
      const found = read.entries.filter((e) => e.db === db).map((e) => e.key.toString('hex')).sort();
      expect(found).toEqual(keys);
    }
    expect(read.entries.every((e) => e.db === 0 || e.db === 3)).toBe(true);
  });

  test('every dump is byte for byte what DUMP answers, and every expiry what PEXPIRETIME answers', async () => {
    const byDb = new Map([0, 3].map((db) => [db, connect(source, db)]));
    const mismatches: string[] = [];
    for (const e of read.entries) {
      const client = byDb.get(e.db);
      if (client === undefined) throw new Error(`db ${e.db}`);
      const dump = await client.dumpBuffer(e.key);
      if (dump === null || !dump.equals(e.dump)) mismatches.push(`${e.key.toString()}: dump differs (type ${e.type})`);
      const expireAt = Number(await client.call('PEXPIRETIME', e.key));
      if (expireAt !== (e.expireAtMs ?? -1)) mismatches.push(`${e.key.toString()}: expiry ${e.expireAtMs} != ${expireAt}`);
    }
    expect(mismatches).toEqual([]);
    expect(read.entries.filter((e) => e.expireAtMs !== null).map((e) => e.key.toString()).sort()).toEqual(
      ['hash:ttl', 'str:ttl', 'str:ttl-abs'],
    );
  });

  test('the encodings asked for are there: compact and large, a plain list node, streams with groups', () => {
    const types = new Map(read.entries.map((e) => [e.key.toString(), e.type]));
    const want: [string, number][] = [
      ['str:lzf', 0],
      ['list:small', 18],
      ['list:big', 18],
      ['set:int', 11],
      ['set:big', 2],
      ['zset:small', 17],
      ['zset:big', 5],
      ['hash:small', 16],
      ['hash:big', 4],
      ['stream:groups', server.rdbVersion >= 11 ? 21 : 19],
    ];
    if (server.rdbVersion >= 11) want.push(['set:small', 20]);
    if (server.fieldTtls) want.push(['hash:fttl', 25], ['hash:fttl-big', 24]);
    for (const [key, type] of want) expect([key, types.get(key)]).toEqual([key, type]);
    // 3 nodes: the 10,000-byte element is a plain node of its own between two packed ones (type 18:
    // node count, then per node its container, 2 packed or 1 plain, and its string).
    const plain = read.entries.find((e) => e.key.toString() === 'list:plain');
    expect(plain?.dump.subarray(0, 3)).toEqual(Buffer.from([18, 3, 2]));
  });

  test('the function library is there, as FUNCTION LOAD takes it', () => {
    expect(read.functions.map((code) => code.toString())).toEqual([LIBRARY]);
  });

  test('read 1 byte and 1,000 bytes at a time, the same entries', async () => {
    if (source === undefined) throw new Error('no source');
    const file = fs.readFileSync(path.join(source.dir, 'dump.rdb'));
    const text = (r: SnapshotRead): string[] => r.entries.map((e) => `${e.db} ${e.key.toString('hex')} ${e.expireAtMs} ${e.dump.toString('hex')}`);
    for (const size of [1, 1000]) {
      const again = readInPieces(file, size);
      expect(text(again)).toEqual(text(read));
      expect(again.functions).toEqual(read.functions);
    }
  });

  test('RESTORE ... ABSTTL REPLACE of every entry on a second node gives the same key: the same DUMP and expiry', async () => {
    const byDb = new Map([0, 3].map((db) => [db, connect(target, db)]));
    const sourceDb0 = connect(source);
    const mismatches: string[] = [];
    for (const e of read.entries) {
      const client = byDb.get(e.db);
      if (client === undefined) throw new Error(`db ${e.db}`);
      await client.call('RESTORE', e.key, e.expireAtMs ?? 0, e.dump, ...(e.expireAtMs === null ? [] : ['ABSTTL']), 'REPLACE');
      const expireAt = Number(await client.call('PEXPIRETIME', e.key));
      if (expireAt !== (e.expireAtMs ?? -1)) mismatches.push(`${e.key.toString()}: expiry ${expireAt} != ${e.expireAtMs}`);
      if (HASH_TABLE_TYPES.has(e.type)) {
        // A hash table's order follows the hash seed of the process that built it, so the second
        // node's DUMP lists the same members in another order: compare the members instead.
        const [here, there] = await Promise.all([contents(sourceDb0, e.key, e.type), contents(client, e.key, e.type)]);
        if (here !== there) mismatches.push(`${e.key.toString()}: members on the second node differ (type ${e.type})`);
        continue;
      }
      const dump = await client.dumpBuffer(e.key);
      if (dump === null || !dump.equals(e.dump)) mismatches.push(`${e.key.toString()}: DUMP on the second node differs (type ${e.type})`);
    }
    expect(mismatches).toEqual([]);
  });
  test.each([
    ['diskless, the RDB followed by its 40-byte mark', 'yes', 'eof-mark'],
    ['from disk, its length announced', 'no', 'length'],
  ] as const)('the snapshot of a full sync (PSYNC ? -1), %s: the same entries, and push says where the RDB ends', async (_name, diskless, framing) => {
    const admin = connect(source);
    await admin.config('SET', 'repl-diskless-sync', diskless);
    await admin.config('SET', 'repl-diskless-sync-delay', '0');
    if (source === undefined) throw new Error('no source');
    const sync = await fullSync(source.port);
    expect(sync.framing).toBe(framing);
    expect(sync.consumed).toBe(sync.rdbLength);
    if (framing === 'eof-mark') expect(sync.markFollows).toBe(true);
    const text = (r: SnapshotRead): string[] =>
      r.entries.map((e) => `${e.db} ${e.key.toString('hex')} ${e.expireAtMs} ${e.dump.toString('hex')}`).sort();
    expect(text(sync.read)).toEqual(text(read));
    expect(sync.read.functions).toEqual(read.functions);
    expect(sync.read.version).toBe(server.rdbVersion);
  });
});
