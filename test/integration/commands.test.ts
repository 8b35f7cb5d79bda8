// Commands through a real slotproxy in front of a real 3-master/3-replica Redis Cluster: hash tags,
// every data type on every master, CROSSSLOT, local answers, fan-outs, refusals, pipelining order,
// redis-cli and many concurrent clients (SPEC sections 1-3).

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import Redis from 'ioredis';
import RedisParser from 'redis-parser';
import { SlotRange } from '../../cmd/sandbox/cluster-slots';
import { useProxy } from '../helpers/proxy';
import { errorOf } from '../helpers/reply-error';
import { HELLO_SERVER, REDIS_VERSION, SERVER, redisAtLeast } from '../helpers/server-version';
import { redisCliBin } from '../../cmd/sandbox/helpers';

// ---------------------------------------------------------------------------
// Raw RESP helpers (byte-exact checks, and binary-safe commands sent to one node directly).

type Arg = string | number | Buffer;

/** A decoded reply; error replies (top level or nested) become `{ err: text }`. */
type Reply = string | number | null | Buffer | { err: string } | Reply[];

function resp(args: readonly Arg[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
    parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

function toReply(value: unknown): Reply {
  if (value === null || typeof value === 'string' || typeof value === 'number' || Buffer.isBuffer(value)) return value;
  if (Array.isArray(value)) return value.map(toReply);
  if (value instanceof Error) return { err: value.message };
  throw new Error(`unexpected RESP value ${String(value)}`);
}

const RAW_TIMEOUT_MS = 20_000;

/** One TCP connection whose bytes the test reads itself. */
class RawConn {
  private data = Buffer.alloc(0);
  private ended = false;
  private wake: (() => void) | null = null;
  private sink: ((chunk: Buffer) => void) | null = null;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      if (this.sink !== null) this.sink(chunk);
      else this.data = Buffer.concat([this.data, chunk]);
      this.notify();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.ended = true;
      this.notify();
    });
  }

  static async open(port: number): Promise<RawConn> {
    const socket = net.connect({ host: '127.0.0.1', port });
    await once(socket, 'connect');
    return new RawConn(socket);
  }

  write(payload: Buffer | string): void {
    this.socket.write(payload);
  }

  close(): void {
    this.socket.destroy();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Resolves once `done()` holds or the connection has closed; rejects after RAW_TIMEOUT_MS. */
  private async waitFor(done: () => boolean, what: () => string): Promise<void> {
    const deadline = Date.now() + RAW_TIMEOUT_MS;
    while (!done() && !this.ended) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await new Promise<boolean>((resolve) => {
        this.wake = () => resolve(false);
        timer = setTimeout(() => resolve(true), Math.max(0, deadline - Date.now()));
      });
      clearTimeout(timer);
      if (timedOut && !done()) throw new Error(`raw connection: timed out waiting for ${what()}`);
    }
  }

  /** The next `n` bytes (fewer only if the connection closed first). */
  async readBytes(n: number): Promise<Buffer> {
    await this.waitFor(
      () => this.data.length >= n,
      () => `${n} bytes, got ${JSON.stringify(this.data.toString('latin1'))}`,
    );
    const out = this.data.subarray(0, n);
    this.data = this.data.subarray(n);
    return out;
  }

  /** Everything until the peer closes the connection. */
  async readUntilClose(): Promise<Buffer> {
    await this.waitFor(
      () => false,
      () => `the connection to close, got ${JSON.stringify(this.data.toString('latin1'))}`,
    );
    return this.data;
  }

  get isClosed(): boolean {
    return this.ended;
  }

  /** The next `n` replies, decoded (the connection is read by a parser from here on). */
  async readReplies(n: number, returnBuffers = false): Promise<Reply[]> {
    const replies: Reply[] = [];
    let fatal: Error | null = null;
    const parser = new RedisParser({
      returnReply: (reply: unknown) => replies.push(toReply(reply)),
      returnError: (err: Error) => replies.push({ err: err.message }),
      returnFatalError: (err: Error) => {
        fatal = err;
      },
      returnBuffers,
    });
    this.sink = (chunk) => parser.execute(chunk);
    const pending = this.data;
    this.data = Buffer.alloc(0);
    if (pending.length > 0) parser.execute(pending);
    await this.waitFor(
      () => replies.length >= n || fatal !== null,
      () => `${n} replies, got ${replies.length}`,
    );
    if (fatal !== null) throw fatal;
    return replies;
  }
}

/** Sends one command on a fresh connection and resolves its decoded reply. */
async function rawCommand(port: number, args: readonly Arg[], returnBuffers = false): Promise<Reply> {
  const conn = await RawConn.open(port);
  try {
    conn.write(resp(args));
    const [reply] = await conn.readReplies(1, returnBuffers);
    return reply;
  } finally {
    conn.close();
  }
}

/** Writes `payload` and resolves exactly `expected.length` bytes of what comes back, as latin1 text. */
async function rawExchange(port: number, payload: Buffer | string, expected: string): Promise<string> {
  const conn = await RawConn.open(port);
  try {
    conn.write(payload);
    return (await conn.readBytes(Buffer.byteLength(expected, 'latin1'))).toString('latin1');
  } finally {
    conn.close();
  }
}

/** redis-cli's stdout for `args` through the proxy (with `stdin` fed to it); rejects on a non-zero exit. */
function runCli(port: number, args: string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      redisCliBin(),
      ['-h', '127.0.0.1', '-p', String(port), ...args],
      { timeout: 20_000, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        if (err !== null) reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
    // A command without -x never reads stdin and may exit first: EPIPE there is no failure (its exit code and output are).
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(stdin ?? '');
  });
}

const sorted = (xs: readonly string[]): string[] => [...xs].sort();

const CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot";
/** Redis 7.4's keyspace lines count the keys with expiring hash fields (not Valkey 8, a fork of 7.2). */
const SUBEXPIRY = SERVER.flavor === 'redis' && redisAtLeast(7, 4) ? ',subexpiry=0' : '';

// ---------------------------------------------------------------------------

describe('commands through slotproxy (cluster mode)', () => {
  const h = useProxy();

  let client: Redis;
  let proxyPort: number;
  let ranges: SlotRange[];
  /** Hash tags whose slots are served by three different masters, one each. */
  let tags: string[];
  /** Ports of the masters serving tags[0], tags[1], tags[2]. */
  let tagOwners: number[];
  /** A tag in another slot than tags[0] but on the same master. */
  let sameMasterTag: string;

  /** CLUSTER KEYSLOT asked of a real master directly (binary-safe). */
  async function nodeSlot(key: string | Buffer): Promise<number> {
    const reply = await rawCommand(h.cluster().masters[0].port, ['CLUSTER', 'KEYSLOT', key]);
    if (typeof reply !== 'number') throw new Error(`CLUSTER KEYSLOT: unexpected reply ${JSON.stringify(reply)}`);
    return reply;
  }

  function ownerOfSlot(slot: number): number {
    const r = ranges.find((x) => x.start <= slot && slot <= x.end);
    if (r === undefined) throw new Error(`slot ${slot} is not served`);
    return r.master.port;
  }

  async function ownerOf(key: string | Buffer): Promise<number> {
    return ownerOfSlot(await nodeSlot(key));
  }

  /** TYPE of `key` asked of the master that owns it, bypassing the proxy. */
  async function typeOnOwner(key: string | Buffer): Promise<Reply> {
    return rawCommand(await ownerOf(key), ['TYPE', key]);
  }

  /** A counter from the proxy's own INFO section. */
  async function proxyStat(name: string): Promise<string | undefined> {
    const lines = String(await client.call('INFO', 'proxy')).split('\r\n');
    return lines.find((l) => l.startsWith(`${name}:`));
  }

  beforeAll(async () => {
    client = h.connect();
    proxyPort = h.proxy().address.port;
    await h.cluster().refreshRoles();
    ranges = await h.cluster().slots();
    tags = [];
    tagOwners = [];
    const firstSlots: number[] = [];
    let sameMaster: string | undefined;
    for (let i = 0; tags.length < 3 || sameMaster === undefined; i++) {
      const tag = `t${i}`;
      const slot = await nodeSlot(`{${tag}}`);
      const owner = ownerOfSlot(slot);
      if (!tagOwners.includes(owner) && tags.length < 3) {
        tags.push(tag);
        tagOwners.push(owner);
        firstSlots.push(slot);
      } else if (tags.length > 0 && owner === tagOwners[0] && slot !== firstSlots[0] && sameMaster === undefined) {
        sameMaster = tag;
      }
    }
    sameMasterTag = sameMaster;
  });

  // -------------------------------------------------------------------------
  describe('hash tags and CLUSTER KEYSLOT', () => {
    test('CLUSTER KEYSLOT through the proxy equals a real node\'s answer (redis-cli -p <node>)', async () => {
      const keys = [
        'foo{}{bar}',
        'foo{{bar}}',
        'limit{yes}_10.0.0.1{yes}',
        '{bar',
        'yes',
        'foo',
        'bar',
        'user:1000',
        '{user1000}.following',
        '{user1000}.followers',
        'a{b}c',
        '{}',
        '}{x}',
      ];
      const node = h.cluster().masters[0];
      const fromProxy: number[] = [];
      const fromNode: number[] = [];
      for (const key of keys) {
        fromProxy.push(Number(await client.call('CLUSTER', 'KEYSLOT', key)));
        fromNode.push(Number(await node.cli('CLUSTER', 'KEYSLOT', key)));
      }
      expect(fromProxy).toEqual(fromNode);
      // The SPEC's examples: which bytes are hashed.
      const slot = (k: string): number => fromProxy[keys.indexOf(k)];
      expect(slot('foo{{bar}}')).toEqual(slot('{bar'));
      expect(slot('limit{yes}_10.0.0.1{yes}')).toEqual(slot('yes'));
      expect(slot('{user1000}.following')).toEqual(slot('{user1000}.followers'));
      expect(await client.call('CLUSTER', 'KEYSLOT', 'foo')).toEqual(12182);
    });

    test('a key with an empty hash tag (foo{}{bar}) is routed by its real slot, without a MOVED', async () => {
      const key = 'foo{}{bar}';
      const movedBefore = await proxyStat('redirections_moved');
      expect(await client.call('SET', key, 'v')).toEqual('OK');
      expect(await client.call('GET', key)).toEqual('v');
      expect(await rawCommand(await ownerOf(key), ['GET', key])).toEqual('v');
      expect(await proxyStat('redirections_moved')).toEqual(movedBefore);
    });

    test('CLUSTER KEYSLOT of a binary key (all bytes 0x00-0xff) equals the node\'s', async () => {
      const key = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      // The bytes hold '{' (0x7b), '|' (0x7c), '}' (0x7d): the hash tag is '|'.
      const viaProxy = await client.call('CLUSTER', 'KEYSLOT', key);
      expect(viaProxy).toEqual(await nodeSlot(key));
      expect(viaProxy).toEqual(await nodeSlot('|'));
    });

    test('the test keys are spread over all three masters', async () => {
      const proxySlots: number[] = [];
      for (const tag of tags) proxySlots.push(Number(await client.call('CLUSTER', 'KEYSLOT', `{${tag}}:x`)));
      const nodeSlots: number[] = [];
      for (const tag of tags) nodeSlots.push(await nodeSlot(`{${tag}}:x`));
      expect(proxySlots).toEqual(nodeSlots);
      expect(sorted(proxySlots.map((s) => String(ownerOfSlot(s))))).toEqual(
        sorted(h.cluster().masters.map((m) => String(m.port))),
      );
      expect(new Set(tagOwners).size).toEqual(3);
    });
  });

  // -------------------------------------------------------------------------
  describe('data types on every master', () => {
    test('strings: SET/GET/INCR/APPEND/GETRANGE/SETEX+TTL', async () => {
      for (const tag of tags) {
        const s = `{${tag}}:str`;
        const n = `{${tag}}:num`;
        const e = `{${tag}}:exp`;
        expect(await client.call('SET', s, 'hello')).toEqual('OK');
        expect(await client.call('GET', s)).toEqual('hello');
        expect(await client.call('APPEND', s, ' world')).toEqual(11);
        expect(await client.call('GET', s)).toEqual('hello world');
        expect(await client.call('GETRANGE', s, 0, 4)).toEqual('hello');
        expect(await client.call('GETRANGE', s, -5, -1)).toEqual('world');
        expect(await errorOf(client.call('INCR', s))).toEqual('ERR value is not an integer or out of range');
        expect(await client.call('INCR', n)).toEqual(1);
        expect(await client.call('INCR', n)).toEqual(2);
        expect(await client.call('INCRBY', n, 40)).toEqual(42);
        expect(await client.call('GET', n)).toEqual('42');
        expect(await client.call('SETEX', e, 1000, 'v')).toEqual('OK');
        expect(await client.call('TTL', e)).toEqual(1000);
        expect(await client.call('GET', e)).toEqual('v');
        // The data really is on the master that owns the slot.
        expect(await typeOnOwner(s)).toEqual('string');
        expect(await rawCommand(await ownerOf(n), ['GET', n])).toEqual('42');
      }
    });

    test('lists: LPUSH/RPUSH/LRANGE/LPOP', async () => {
      for (const tag of tags) {
        const l = `{${tag}}:list`;
        expect(await client.call('LPUSH', l, 'a', 'b')).toEqual(2);
        expect(await client.call('RPUSH', l, 'c')).toEqual(3);
        expect(await client.call('LRANGE', l, 0, -1)).toEqual(['b', 'a', 'c']);
        expect(await typeOnOwner(l)).toEqual('list');
        expect(await client.call('LPOP', l)).toEqual('b');
        expect(await client.call('LPOP', l, 5)).toEqual(['a', 'c']);
        expect(await client.call('LPOP', l)).toEqual(null);
        expect(await client.call('EXISTS', l)).toEqual(0);
      }
    });

    test('hashes: HSET/HGETALL/HINCRBY', async () => {
      for (const tag of tags) {
        const k = `{${tag}}:hash`;
        expect(await client.call('HSET', k, 'f1', 'v1', 'f2', 'v2')).toEqual(2);
        expect(await client.call('HGETALL', k)).toEqual(['f1', 'v1', 'f2', 'v2']);
        expect(await client.call('HINCRBY', k, 'cnt', 5)).toEqual(5);
        expect(await client.call('HINCRBY', k, 'cnt', -2)).toEqual(3);
        expect(await client.call('HGET', k, 'cnt')).toEqual('3');
        expect(await client.call('HGET', k, 'missing')).toEqual(null);
        expect(await client.call('HGETALL', `{${tag}}:nohash`)).toEqual([]);
        expect(await typeOnOwner(k)).toEqual('hash');
      }
    });

    test('sets: SADD/SMEMBERS/SINTER with hash tags', async () => {
      for (const tag of tags) {
        const s1 = `{${tag}}:set1`;
        const s2 = `{${tag}}:set2`;
        expect(await client.call('SADD', s1, 'a', 'b', 'c')).toEqual(3);
        expect(await client.call('SADD', s2, 'b', 'c', 'd')).toEqual(3);
        expect(await client.call('SADD', s2, 'd')).toEqual(0);
        expect(sorted((await client.call('SMEMBERS', s1)) as string[])).toEqual(['a', 'b', 'c']);
        expect(sorted((await client.call('SINTER', s1, s2)) as string[])).toEqual(['b', 'c']);
        expect(await client.call('SINTERSTORE', `{${tag}}:set3`, s1, s2)).toEqual(2);
        expect(await typeOnOwner(s1)).toEqual('set');
        expect(await typeOnOwner(`{${tag}}:set3`)).toEqual('set');
      }
    });

    test('sorted sets: ZADD/ZRANGE WITHSCORES/ZINCRBY/ZUNIONSTORE with hash tags', async () => {
      for (const tag of tags) {
        const z1 = `{${tag}}:z1`;
        const z2 = `{${tag}}:z2`;
        const zu = `{${tag}}:zu`;
        expect(await client.call('ZADD', z1, 1, 'a', 2, 'b')).toEqual(2);
        expect(await client.call('ZADD', z2, 10, 'b', 20, 'c')).toEqual(2);
        expect(await client.call('ZRANGE', z1, 0, -1, 'WITHSCORES')).toEqual(['a', '1', 'b', '2']);
        expect(await client.call('ZINCRBY', z1, 5, 'a')).toEqual('6');
        expect(await client.call('ZUNIONSTORE', zu, 2, z1, z2)).toEqual(3);
        expect(await client.call('ZRANGE', zu, 0, -1, 'WITHSCORES')).toEqual(['a', '6', 'b', '12', 'c', '20']);
        expect(await client.call('ZSCORE', zu, 'missing')).toEqual(null);
        expect(await typeOnOwner(zu)).toEqual('zset');
      }
    });

    test('streams: XADD/XRANGE/XREAD/XGROUP CREATE/XREADGROUP/XACK (no BLOCK)', async () => {
      for (const tag of tags) {
        const st = `{${tag}}:stream`;
        const entries = [
          ['1-1', ['f', 'v1']],
          ['2-1', ['f', 'v2']],
        ];
        expect(await client.call('XADD', st, '1-1', 'f', 'v1')).toEqual('1-1');
        expect(await client.call('XADD', st, '2-1', 'f', 'v2')).toEqual('2-1');
        expect(await client.call('XLEN', st)).toEqual(2);
        expect(await client.call('XRANGE', st, '-', '+')).toEqual(entries);
        expect(await client.call('XREAD', 'COUNT', 10, 'STREAMS', st, '0')).toEqual([[st, entries]]);
        expect(await client.call('XREAD', 'COUNT', 10, 'STREAMS', st, '2-1')).toEqual(null);
        expect(await client.call('XGROUP', 'CREATE', st, 'g', '0')).toEqual('OK');
        expect(await client.call('XREADGROUP', 'GROUP', 'g', 'c1', 'COUNT', 10, 'STREAMS', st, '>')).toEqual([
          [st, entries],
        ]);
        expect(await client.call('XPENDING', st, 'g')).toEqual([2, '1-1', '2-1', [['c1', '2']]]);
        expect(await client.call('XACK', st, 'g', '1-1', '2-1')).toEqual(2);
        expect(await client.call('XPENDING', st, 'g')).toEqual([0, null, null, null]);
        expect(await typeOnOwner(st)).toEqual('stream');
      }
    });

    test('HyperLogLog: PFADD/PFCOUNT/PFMERGE with hash tags', async () => {
      for (const tag of tags) {
        const h1 = `{${tag}}:hll1`;
        const h2 = `{${tag}}:hll2`;
        const h3 = `{${tag}}:hll3`;
        expect(await client.call('PFADD', h1, 'a', 'b', 'c')).toEqual(1);
        expect(await client.call('PFADD', h1, 'a')).toEqual(0);
        expect(await client.call('PFADD', h2, 'c', 'd')).toEqual(1);
        expect(await client.call('PFCOUNT', h1)).toEqual(3);
        expect(await client.call('PFCOUNT', h1, h2)).toEqual(4);
        expect(await client.call('PFMERGE', h3, h1, h2)).toEqual('OK');
        expect(await client.call('PFCOUNT', h3)).toEqual(4);
        expect(await typeOnOwner(h3)).toEqual('string');
      }
    });

    test('geo: GEOADD/GEODIST/GEOSEARCH', async () => {
      for (const tag of tags) {
        const g = `{${tag}}:geo`;
        expect(await client.call('GEOADD', g, '13.361389', '38.115556', 'Palermo', '15.087269', '37.502669', 'Catania')).toEqual(2);
        expect(await client.call('GEODIST', g, 'Palermo', 'Catania')).toEqual('166274.1516');
        expect(await client.call('GEODIST', g, 'Palermo', 'Catania', 'km')).toEqual('166.2742');
        expect(await client.call('GEODIST', g, 'Palermo', 'Nowhere')).toEqual(null);
        expect(await client.call('GEOSEARCH', g, 'FROMLONLAT', 15, 37, 'BYRADIUS', 200, 'km', 'ASC')).toEqual([
          'Catania',
          'Palermo',
        ]);
        expect(await client.call('GEOSEARCH', g, 'FROMMEMBER', 'Palermo', 'BYRADIUS', 100, 'km')).toEqual(['Palermo']);
        expect(await typeOnOwner(g)).toEqual('zset');
      }
    });

    test('bitmaps: SETBIT/GETBIT/BITCOUNT/BITOP with hash tags', async () => {
      for (const tag of tags) {
        const b1 = `{${tag}}:bits1`;
        const b2 = `{${tag}}:bits2`;
        expect(await client.call('SETBIT', b1, 7, 1)).toEqual(0);
        expect(await client.call('SETBIT', b1, 7, 1)).toEqual(1);
        expect(await client.call('GETBIT', b1, 7)).toEqual(1);
        expect(await client.call('GETBIT', b1, 100)).toEqual(0);
        expect(await client.call('BITCOUNT', b1)).toEqual(1);
        expect(await client.call('SETBIT', b2, 0, 1)).toEqual(0);
        expect(await client.call('BITOP', 'OR', `{${tag}}:bor`, b1, b2)).toEqual(1);
        expect(await client.callBuffer('GET', `{${tag}}:bor`)).toEqual(Buffer.from([0x81]));
        expect(await client.call('BITCOUNT', `{${tag}}:bor`)).toEqual(2);
        expect(await client.call('BITOP', 'AND', `{${tag}}:band`, b1, b2)).toEqual(1);
        expect(await client.callBuffer('GET', `{${tag}}:band`)).toEqual(Buffer.from([0x00]));
        expect(await typeOnOwner(`{${tag}}:bor`)).toEqual('string');
      }
    });

    test('binary-safe keys and values (every byte 0x00-0xff)', async () => {
      const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const value = Buffer.concat([allBytes, Buffer.from('\r\n$-1\r\n'), Buffer.from(allBytes).reverse()]);
      const keys = [...tags.map((tag) => Buffer.concat([Buffer.from(`{${tag}}:bin:`), allBytes])), allBytes];
      for (const key of keys) {
        expect(await client.call('SET', key, value)).toEqual('OK');
        expect(await client.callBuffer('GET', key)).toEqual(value);
        expect(await client.call('STRLEN', key)).toEqual(value.length);
        expect(await client.call('EXISTS', key)).toEqual(1);
        // Through a raw socket too, and stored byte for byte on the owner.
        expect(await rawCommand(proxyPort, ['GET', key], true)).toEqual(value);
        expect(await rawCommand(await ownerOf(key), ['GET', key], true)).toEqual(value);
      }
      expect(await ownerOf(allBytes)).toEqual(await ownerOf('|'));
      expect(await client.call('DEL', allBytes)).toEqual(1);
      expect(await client.call('EXISTS', allBytes)).toEqual(0);
    });

    test('a 1 MiB value on every master', async () => {
      for (const tag of tags) {
        const key = `{${tag}}:big`;
        const value = randomBytes(1024 * 1024);
        expect(await client.call('SET', key, value)).toEqual('OK');
        expect(await client.call('STRLEN', key)).toEqual(1024 * 1024);
        const got = await client.callBuffer('GET', key);
        expect(Buffer.isBuffer(got) ? got.length : got).toEqual(value.length);
        expect(Buffer.isBuffer(got) && got.equals(value)).toEqual(true);
        expect(await rawCommand(await ownerOf(key), ['STRLEN', key])).toEqual(1024 * 1024);
      }
    });

    test('OBJECT ENCODING and TYPE', async () => {
      for (const tag of tags) {
        const k = (name: string): string => `{${tag}}:enc:${name}`;
        await client.call('SET', k('int'), '12345');
        await client.call('SET', k('embstr'), 'hello');
        await client.call('SET', k('raw'), 'x'.repeat(100));
        await client.call('RPUSH', k('list'), 'a');
        await client.call('HSET', k('hash'), 'f', 'v');
        await client.call('SADD', k('intset'), 1, 2, 3);
        await client.call('ZADD', k('zset'), 1, 'a');
        await client.call('XADD', k('stream'), '1-1', 'f', 'v');
        const names = ['int', 'embstr', 'raw', 'list', 'hash', 'intset', 'zset', 'stream', 'missing'];
        const encodings: unknown[] = [];
        const types: unknown[] = [];
        const direct: Reply[] = [];
        for (const name of names) {
          encodings.push(await client.call('OBJECT', 'ENCODING', k(name)));
          types.push(await client.call('TYPE', k(name)));
          direct.push(await rawCommand(await ownerOf(k(name)), ['OBJECT', 'ENCODING', k(name)]));
        }
        // Redis 7.2 keeps a small list in one listpack (7.0: a quicklist of one).
        expect(encodings).toEqual(['int', 'embstr', 'raw', redisAtLeast(7, 2) ? 'listpack' : 'quicklist', 'listpack', 'intset', 'listpack', 'stream', null]);
        expect(encodings).toEqual(direct);
        expect(types).toEqual(['string', 'string', 'string', 'list', 'hash', 'set', 'zset', 'stream', 'none']);
      }
    });

    test('EXPIRE/TTL/PERSIST', async () => {
      for (const tag of tags) {
        const k = `{${tag}}:ttl`;
        expect(await client.call('SET', k, 'v')).toEqual('OK');
        expect(await client.call('TTL', k)).toEqual(-1);
        expect(await client.call('EXPIRE', k, 1000)).toEqual(1);
        expect(await client.call('TTL', k)).toEqual(1000);
        expect(await rawCommand(await ownerOf(k), ['TTL', k])).toEqual(1000);
        expect(await client.call('PERSIST', k)).toEqual(1);
        expect(await client.call('PERSIST', k)).toEqual(0);
        expect(await client.call('TTL', k)).toEqual(-1);
        expect(await client.call('TTL', `{${tag}}:ttl-missing`)).toEqual(-2);
        expect(await client.call('EXPIRE', `{${tag}}:ttl-missing`, 10)).toEqual(0);
      }
    });

    test('EXISTS/DEL/MSET/MGET of several keys in one slot', async () => {
      for (const tag of tags) {
        const [a, b, c, missing] = ['m1', 'm2', 'm3', 'missing'].map((x) => `{${tag}}:${x}`);
        expect(await client.call('MSET', a, '1', b, '2', c, '3')).toEqual('OK');
        expect(await client.call('MGET', a, b, missing, c)).toEqual(['1', '2', null, '3']);
        expect(await client.call('EXISTS', a, b, missing, a)).toEqual(3);
        expect(await client.call('DEL', a, b, missing)).toEqual(2);
        expect(await client.call('EXISTS', a, b, c)).toEqual(1);
        expect(await client.call('UNLINK', c, missing)).toEqual(1);
        expect(await client.call('EXISTS', a, b, c)).toEqual(0);
      }
    });

    test('nil replies stay nil and +OK stays a simple string (byte-exact)', async () => {
      expect(await client.call('GET', `{${tags[0]}}:nothing`)).toEqual(null);
      for (const tag of tags) {
        const payload = Buffer.concat([
          resp(['SET', `{${tag}}:rawset`, 'v']),
          resp(['GET', `{${tag}}:nothing`]),
          resp(['LPOP', `{${tag}}:nolist`]),
          resp(['LPOP', `{${tag}}:nolist`, 2]),
          resp(['MGET', `{${tag}}:nothing`, `{${tag}}:rawset`]),
          resp(['GET', `{${tag}}:rawset`]),
          resp(['PING']),
        ]);
        const expected = '+OK\r\n$-1\r\n$-1\r\n*-1\r\n*2\r\n$-1\r\n$1\r\nv\r\n$1\r\nv\r\n+PONG\r\n';
        expect(await rawExchange(proxyPort, payload, expected)).toEqual(expected);
      }
    });
  });

  // -------------------------------------------------------------------------
  describe('CROSSSLOT', () => {
    /** [x, y] pairs in different slots: on different masters, and on the same master. */
    const pairs = (name: string): [string, string][] => [
      [`{${tags[0]}}:${name}:x`, `{${tags[1]}}:${name}:y`],
      [`{${tags[0]}}:${name}:x`, `{${sameMasterTag}}:${name}:y`],
    ];

    test('the key pairs are in different slots (one pair on one master)', async () => {
      const [[x1, y1], [x2, y2]] = pairs('cs');
      expect(await ownerOf(x1)).not.toEqual(await ownerOf(y1));
      expect(await ownerOf(x2)).toEqual(await ownerOf(y2));
      expect(await nodeSlot(x2)).not.toEqual(await nodeSlot(y2));
    });

    test('MGET and SUNION across slots are refused', async () => {
      for (const [x, y] of pairs('mget')) {
        expect(await errorOf(client.call('MGET', x, y))).toEqual(CROSSSLOT);
        expect(await errorOf(client.call('SUNION', x, y))).toEqual(CROSSSLOT);
      }
    });

    test('a refused MSET writes nothing', async () => {
      for (const [x, y] of pairs('mset')) {
        expect(await errorOf(client.call('MSET', x, '1', y, '2'))).toEqual(CROSSSLOT);
        expect(await client.call('EXISTS', x)).toEqual(0);
        expect(await client.call('EXISTS', y)).toEqual(0);
        expect(await rawCommand(await ownerOf(x), ['EXISTS', x])).toEqual(0);
        expect(await rawCommand(await ownerOf(y), ['EXISTS', y])).toEqual(0);
      }
    });

    test('a refused DEL deletes nothing', async () => {
      for (const [x, y] of pairs('del')) {
        expect(await client.call('SET', x, 'vx')).toEqual('OK');
        expect(await client.call('SET', y, 'vy')).toEqual('OK');
        expect(await errorOf(client.call('DEL', x, y))).toEqual(CROSSSLOT);
        expect(await client.call('GET', x)).toEqual('vx');
        expect(await client.call('GET', y)).toEqual('vy');
      }
    });

    test('a refused RENAME renames nothing', async () => {
      for (const [x, y] of pairs('ren')) {
        expect(await client.call('SET', x, 'vx')).toEqual('OK');
        expect(await errorOf(client.call('RENAME', x, y))).toEqual(CROSSSLOT);
        expect(await client.call('GET', x)).toEqual('vx');
        expect(await client.call('EXISTS', y)).toEqual(0);
      }
    });
  });

  // -------------------------------------------------------------------------
  describe('answered by the proxy itself', () => {
    test('PING, PING msg, ECHO', async () => {
      expect(await client.call('PING')).toEqual('PONG');
      expect(await client.call('PING', 'hello there')).toEqual('hello there');
      expect(await client.call('ECHO', 'hi')).toEqual('hi');
      const bin = Buffer.from([0, 13, 10, 255]);
      expect(await client.callBuffer('ECHO', bin)).toEqual(bin);
    });

    test('PING in RESP and inline form (byte-exact)', async () => {
      const expected = '+PONG\r\n$2\r\nhi\r\n+PONG\r\n$3\r\nabc\r\n';
      expect(await rawExchange(proxyPort, `${resp(['PING']).toString()}${resp(['PING', 'hi']).toString()}PING\r\nECHO abc\r\n`, expected)).toEqual(expected);
    });

    test('SELECT 0 is OK, SELECT 1 is refused', async () => {
      expect(await client.call('SELECT', 0)).toEqual('OK');
      expect(await errorOf(client.call('SELECT', 1))).toEqual('ERR SELECT is not allowed in cluster mode');
      expect(await client.call('PING')).toEqual('PONG');
    });

    test('HELLO, HELLO 2, HELLO 4 (HELLO 3: resp3.test.ts)', async () => {
      const c = h.connect();
      const id = await c.call('CLIENT', 'ID');
      for (const args of [[], ['2']]) {
        const reply = await c.call('HELLO', ...args);
        if (!Array.isArray(reply)) throw new Error(`HELLO: not an array: ${JSON.stringify(reply)}`);
        const fields = new Map<unknown, unknown>();
        for (let i = 0; i + 1 < reply.length; i += 2) fields.set(reply[i], reply[i + 1]);
        expect({
          server: fields.get('server'),
          version: fields.get('version'),
          proto: fields.get('proto'),
          id: fields.get('id'),
        }).toEqual({ ...HELLO_SERVER, proto: 2, id });
      }
      expect(await errorOf(c.call('HELLO', '4'))).toEqual('NOPROTO unsupported protocol version');
      expect(await c.call('PING')).toEqual('PONG');
    });

    test('CLIENT SETNAME/GETNAME/ID', async () => {
      const c1 = h.connect();
      const c2 = h.connect();
      expect(await c1.call('CLIENT', 'GETNAME')).toEqual(null);
      expect(await c1.call('CLIENT', 'SETNAME', 'conn-one')).toEqual('OK');
      expect(await c1.call('CLIENT', 'GETNAME')).toEqual('conn-one');
      expect(await c2.call('CLIENT', 'GETNAME')).toEqual(null);
      const id1 = await c1.call('CLIENT', 'ID');
      const id2 = await c2.call('CLIENT', 'ID');
      expect(typeof id1).toEqual('number');
      expect(typeof id2).toEqual('number');
      expect(id1).not.toEqual(id2);
      expect(await c1.call('CLIENT', 'ID')).toEqual(id1);
    });

    test('CLIENT SETINFO is answered by the proxy although Redis 7.0 does not know it', async () => {
      const c = h.connect();
      expect(await c.call('CLIENT', 'SETINFO', 'LIB-NAME', 'slotproxy-test')).toEqual('OK');
      expect(await errorOf(c.call('CLIENT', 'SETINFO', 'LIB-NAME'))).toEqual("ERR wrong number of arguments for 'client|setinfo' command");
      expect(await errorOf(c.call('CLIENT', 'NOSUCH'))).toEqual("ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.");
    });

    test('QUIT answers +OK and closes the connection (byte-exact)', async () => {
      const conn = await RawConn.open(proxyPort);
      try {
        conn.write(Buffer.concat([resp(['QUIT']), resp(['PING'])]));
        expect((await conn.readUntilClose()).toString('latin1')).toEqual('+OK\r\n');
        expect(conn.isClosed).toEqual(true);
      } finally {
        conn.close();
      }
    });

    test('unknown command and wrong arity use Redis\'s exact texts', async () => {
      expect(await errorOf(client.call('foo', 'bar'))).toEqual("ERR unknown command 'foo', with args beginning with: 'bar' ");
      expect(await errorOf(client.call('foo'))).toEqual("ERR unknown command 'foo', with args beginning with: ");
      expect(await errorOf(client.call('GET'))).toEqual("ERR wrong number of arguments for 'get' command");
      expect(await errorOf(client.call('SET', 'k'))).toEqual("ERR wrong number of arguments for 'set' command");
      expect(await client.call('PING')).toEqual('PONG');
    });
  });

  // -------------------------------------------------------------------------
  describe('refused commands name the command', () => {
    const PREFIX = 'ERR slotproxy does not support';

    test('LATENCY GRAPH', async () => {
      const msg = await errorOf(client.call('LATENCY', 'GRAPH', 'command'));
      const want = `${PREFIX} 'LATENCY'`;
      expect(msg.slice(0, want.length)).toEqual(want);
    });

    test('DEBUG, MEMORY MALLOC-STATS are refused at once and the connection goes on', async () => {
      const conn = await RawConn.open(proxyPort);
      try {
        conn.write(
          Buffer.concat([
            resp(['DEBUG', 'SLEEP', '0']),
            resp(['MEMORY', 'MALLOC-STATS']),
            resp(['PING']),
            resp(['GET', `{${tags[0]}}:nothing`]),
          ]),
        );
        const replies = await conn.readReplies(4);
        const errs = replies.slice(0, 2).map((r) => (r !== null && typeof r === 'object' && 'err' in r ? r.err : JSON.stringify(r)));
        const wants = [`${PREFIX} 'DEBUG'`, `${PREFIX} 'MEMORY'`];
        expect(errs.map((e, i) => e.slice(0, wants[i].length))).toEqual(wants);
        expect(replies.slice(2)).toEqual(['PONG', null]);
      } finally {
        conn.close();
      }
    });
  });

  // -------------------------------------------------------------------------
  describe('fan-outs over every master', () => {
    const KEYS = Array.from({ length: 300 }, (_, i) => `fan:${i}`);

    async function masterDbsizes(): Promise<Reply[]> {
      return Promise.all(h.cluster().masters.map((m) => rawCommand(m.port, ['DBSIZE'])));
    }

    beforeAll(async () => {
      // A clean slate, without relying on the proxy's FLUSHALL (tested below).
      for (const m of h.cluster().masters) await rawCommand(m.port, ['FLUSHALL']);
      const p = client.pipeline();
      for (const k of KEYS) p.call('SET', k, `v:${k}`);
      const results = await p.exec();
      expect((results ?? []).filter(([err]) => err !== null)).toEqual([]);
    });

    test('the 300 keys are on all three masters; DBSIZE is their sum', async () => {
      const sizes = (await masterDbsizes()).map(Number);
      expect(sizes.length).toEqual(3);
      expect(sizes.every((n) => n > 0)).toEqual(true);
      expect(sizes.reduce((a, b) => a + b, 0)).toEqual(300);
      expect(await client.call('DBSIZE')).toEqual(300);
    });

    test('KEYS * returns exactly the 300 keys', async () => {
      expect(sorted((await client.call('KEYS', '*')) as string[])).toEqual(sorted(KEYS));
      expect(sorted((await client.call('KEYS', 'fan:1?')) as string[])).toEqual(sorted(KEYS.filter((k) => /^fan:1\d$/.test(k))));
    });

    async function scanAll(extra: Arg[]): Promise<string[]> {
      const keys: string[] = [];
      let cursor = '0';
      let calls = 0;
      do {
        const reply = await client.call('SCAN', cursor, ...extra);
        if (!Array.isArray(reply) || typeof reply[0] !== 'string' || !Array.isArray(reply[1])) {
          throw new Error(`SCAN: unexpected reply ${JSON.stringify(reply)}`);
        }
        cursor = reply[0];
        keys.push(...(reply[1] as string[]));
        calls++;
        if (calls > 2000) throw new Error('SCAN did not come back to cursor 0');
      } while (cursor !== '0');
      return keys;
    }

    test('SCAN with COUNT 50 walks every master once: exactly the 300 keys, no duplicates', async () => {
      const keys = await scanAll(['COUNT', 50]);
      expect(keys.length).toEqual(300);
      expect(sorted(keys)).toEqual(sorted(KEYS));
    });

    test('SCAN with MATCH', async () => {
      const keys = await scanAll(['MATCH', 'fan:1*', 'COUNT', 50]);
      expect(sorted(keys)).toEqual(sorted(KEYS.filter((k) => k.startsWith('fan:1'))));
    });

    test('ioredis scanStream', async () => {
      const stream = client.scanStream({ count: 50 });
      const keys: string[] = [];
      stream.on('data', (batch: string[]) => keys.push(...batch));
      await once(stream, 'end');
      expect(sorted(keys)).toEqual(sorted(KEYS));
    });

    test('INFO: a master\'s sections, the summed keyspace and a Proxy section', async () => {
      const info = String(await client.call('INFO'));
      const lines = info.split('\r\n');
      expect(lines).toContain(`redis_version:${REDIS_VERSION}`);
      expect(lines.filter((l) => l.startsWith('maxmemory_policy:'))).toEqual(['maxmemory_policy:noeviction']);
      expect(lines).toContain('# Proxy');
      expect(lines).toContain('proxy_name:slotproxy');
      expect(lines.filter((l) => l.startsWith('db0:'))).toEqual([`db0:keys=300,expires=0,avg_ttl=0${SUBEXPIRY}`]);
    });

    test('INFO keyspace shows db0 summed over the masters', async () => {
      expect(await client.call('INFO', 'keyspace')).toEqual(`# Keyspace\r\ndb0:keys=300,expires=0,avg_ttl=0${SUBEXPIRY}\r\n`);
    });

    test('INFO proxy returns only the proxy section', async () => {
      const lines = String(await client.call('INFO', 'proxy')).split('\r\n');
      expect(lines.filter((l) => l.startsWith('#'))).toEqual(['# Proxy']);
      expect(lines[0]).toEqual('# Proxy');
      expect(lines).toContain('proxy_name:slotproxy');
      expect(lines.filter((l) => l.startsWith('redis_version:'))).toEqual([]);
    });

    test('FLUSHDB empties every master', async () => {
      expect(await client.call('FLUSHDB')).toEqual('OK');
      expect(await client.call('DBSIZE')).toEqual(0);
      expect(await masterDbsizes()).toEqual([0, 0, 0]);
      expect(await client.call('KEYS', '*')).toEqual([]);
      expect(await scanAll([])).toEqual([]);
    });

    test('FLUSHALL empties every master', async () => {
      for (const tag of tags) expect(await client.call('SET', `{${tag}}:flushme`, 'v')).toEqual('OK');
      expect(await masterDbsizes()).toEqual([1, 1, 1]);
      expect(await client.call('FLUSHALL')).toEqual('OK');
      expect(await client.call('DBSIZE')).toEqual(0);
      expect(await masterDbsizes()).toEqual([0, 0, 0]);
    });
  });

  // -------------------------------------------------------------------------
  describe('redis-cli through the proxy', () => {
    test('SET, GET, -x SET from stdin', async () => {
      expect(await runCli(proxyPort, ['SET', 'cli:k', 'v'])).toEqual('OK\n');
      expect(await runCli(proxyPort, ['GET', 'cli:k'])).toEqual('v\n');
      expect(await runCli(proxyPort, ['-x', 'SET', 'cli:k2'], 'hello\nworld')).toEqual('OK\n');
      expect(await client.call('GET', 'cli:k2')).toEqual('hello\nworld');
      // redis-cli prints an error reply and a blank line, as it does for a real node's CROSSSLOT.
      const x = `{${tags[0]}}:cli:a`;
      const y = `{${sameMasterTag}}:cli:b`;
      const fromNode = await runCli(await ownerOf(x), ['MGET', x, y]);
      expect(fromNode).toEqual(`${CROSSSLOT}\n\n`);
      expect(await runCli(proxyPort, ['MGET', x, y])).toEqual(fromNode);
      expect(await runCli(proxyPort, ['MGET', x, `{${tags[1]}}:cli:c`])).toEqual(fromNode);
    });

    test('--scan lists every key written', async () => {
      const written = Array.from({ length: 60 }, (_, i) => `cli:scan:${i}`);
      for (const k of written) await client.call('SET', k, 'v');
      const all = (await runCli(proxyPort, ['--scan'])).split('\n').filter((l) => l !== '');
      expect(sorted(all)).toEqual(sorted((await client.call('KEYS', '*')) as string[]));
      expect(sorted(all.filter((k) => k.startsWith('cli:scan:')))).toEqual(sorted(written));
      const matched = (await runCli(proxyPort, ['--scan', '--pattern', 'cli:scan:*'])).split('\n').filter((l) => l !== '');
      expect(sorted(matched)).toEqual(sorted(written));
    });
  });

  // -------------------------------------------------------------------------
  describe('pipelining keeps request order', () => {
    const N = 10_000;

    /** N mixed commands over keys on all three masters, with the reply each must get. */
    function plan(prefix: string, dbsizeBefore: number): { args: Arg[]; expected: Reply }[] {
      const keys = new Set<string>();
      const counters = new Map<string, number>();
      const lists = new Map<string, number>();
      const out: { args: Arg[]; expected: Reply }[] = [];
      for (let i = 0; i < N; i++) {
        const tag = tags[Math.floor(i / 9) % 3];
        switch (i % 9) {
          case 0: {
            const k = `{${tag}}:${prefix}:s:${i}`;
            keys.add(k);
            out.push({ args: ['SET', k, `v${i}`], expected: 'OK' });
            break;
          }
          case 1:
            out.push({ args: ['GET', `{${tag}}:${prefix}:s:${i - 1}`], expected: `v${i - 1}` });
            break;
          case 2: {
            const k = `{${tag}}:${prefix}:ctr`;
            keys.add(k);
            const n = (counters.get(k) ?? 0) + 1;
            counters.set(k, n);
            out.push({ args: ['INCR', k], expected: n });
            break;
          }
          case 3: {
            const k = `{${tag}}:${prefix}:list`;
            keys.add(k);
            const n = (lists.get(k) ?? 0) + 1;
            lists.set(k, n);
            out.push({ args: ['LPUSH', k, `e${i}`], expected: n });
            break;
          }
          case 4:
            out.push({ args: ['PING'], expected: 'PONG' });
            break;
          case 5:
            out.push({ args: ['ECHO', `echo-${i}`], expected: `echo-${i}` });
            break;
          case 6:
            out.push({ args: ['DBSIZE'], expected: dbsizeBefore + keys.size });
            break;
          case 7:
            out.push({
              args: ['MGET', `{${tags[0]}}:${prefix}:s:0`, `{${tags[1]}}:${prefix}:s:0`],
              expected: { err: CROSSSLOT },
            });
            break;
          default:
            out.push({
              args: ['NOSUCHCMD', `arg${i}`],
              expected: { err: `ERR unknown command 'NOSUCHCMD', with args beginning with: 'arg${i}' ` },
            });
        }
      }
      return out;
    }

    /** Equal replies; on a difference, shows the first one with its index and command. */
    function expectReplies(got: Reply[], steps: { args: Arg[]; expected: Reply }[]): void {
      expect(got.length).toEqual(steps.length);
      const i = steps.findIndex((s, j) => !isEqual(got[j], s.expected));
      const at = (j: number): unknown => (j < 0 ? null : { index: j, command: steps[j].args.map(String), reply: got[j] });
      expect(at(i)).toEqual(i < 0 ? null : { index: i, command: steps[i].args.map(String), reply: steps[i].expected });
    }

    function isEqual(a: Reply, b: Reply): boolean {
      return JSON.stringify(a) === JSON.stringify(b);
    }

    test('10,000 mixed commands in an ioredis pipeline', async () => {
      const before = Number(await client.call('DBSIZE'));
      const steps = plan('pio', before);
      const p = client.pipeline();
      for (const s of steps) p.call(String(s.args[0]), ...s.args.slice(1));
      const results = await p.exec();
      const got = (results ?? []).map(([err, value]): Reply => (err !== null ? { err: err.message } : toReply(value)));
      expectReplies(got, steps);
    });

    test('10,000 mixed commands written to a raw socket at once', async () => {
      const before = Number(await client.call('DBSIZE'));
      const steps = plan('praw', before);
      const conn = await RawConn.open(proxyPort);
      try {
        conn.write(Buffer.concat(steps.map((s) => resp(s.args))));
        expectReplies(await conn.readReplies(N), steps);
      } finally {
        conn.close();
      }
    });
  });

  // -------------------------------------------------------------------------
  describe('many concurrent clients', () => {
    test('50 clients x 200 INCRs on a shared counter and on their own keys', async () => {
      const CLIENTS = 50;
      const PER = 200;
      const shared = `{${tags[0]}}:shared-counter`;
      const clients = Array.from({ length: CLIENTS }, () => h.connect());
      const results = await Promise.all(
        clients.map(async (c, ci) => {
          const own = `own:${ci}`;
          const sharedReplies: Promise<unknown>[] = [];
          const ownReplies: Promise<unknown>[] = [];
          for (let i = 0; i < PER; i++) {
            sharedReplies.push(c.call('INCR', shared));
            ownReplies.push(c.call('INCR', own));
          }
          return { shared: await Promise.all(sharedReplies), own: await Promise.all(ownReplies) };
        }),
      );
      const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
      for (const r of results) expect(r.own).toEqual(oneTo(PER));
      const allShared = results.flatMap((r) => r.shared as number[]).sort((a, b) => a - b);
      expect(allShared).toEqual(oneTo(CLIENTS * PER));
      expect(await client.call('GET', shared)).toEqual(String(CLIENTS * PER));
      const owns = await Promise.all(clients.map((_, ci) => client.call('GET', `own:${ci}`)));
      expect(owns).toEqual(Array.from({ length: CLIENTS }, () => String(PER)));
      // The own keys really are spread over the masters.
      const owners = new Set<number>();
      for (let ci = 0; ci < CLIENTS; ci++) owners.add(await ownerOf(`own:${ci}`));
      expect(owners.size).toEqual(3);
    });
  });
});
