// Scripts and functions as one server (issue 31, items 3-6), through slotproxy in front of 3 masters,
// compared byte for byte with one Redis (a single-node cluster owning every slot): INFO's counts of
// scripts and libraries, FUNCTION STATS merged over the masters, MULTI on a node busy with a script,
// and a busy script never cut off by the default command timeout.

import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { useReferenceNode } from '../helpers/reference-node';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { client, startProxy, useProxy } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';
import net from 'node:net';
import { encodeRequest } from '../helpers/raw-exchange';
import { ReplyFramer } from '../../proxy/resp/reply-framer';
import { busyText } from '../helpers/server-version';

// The default backend.commandTimeoutMs (10000): nothing set on purpose.
const h = useProxy({}, { masters: 3, replicasPerMaster: 0 });

const one = useReferenceNode();
const refNode = one.node;
const refConnect = one.connect;
/** A client of the proxy and one of the reference node. */
let c: Redis;
let r: Redis;

beforeAll(async () => {
  c = h.connect();
  r = refConnect();
}, 60_000);

/**
 * The proxy (with `node`, the master of the test's key) and the reference node, each with a client
 * to run a script and one to kill it, both connected.
 */
async function bothSides(node: RedisNode): Promise<{ port: number; node: RedisNode; runner: Redis; killer: Redis }[]> {
  const sides = [
    { port: h.proxy().address.port, node, runner: h.connect(), killer: h.connect() },
    { port: refNode().port, node: refNode(), runner: refConnect(), killer: refConnect() },
  ];
  for (const side of sides) await Promise.all([side.runner.ping(), side.killer.ping()]);
  return sides;
}

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');

/** The `field:value` lines of an INFO reply whose names match `names`, in order. */
function infoFields(text: string, names: RegExp): string[] {
  return String(text).split('\r\n').filter((l) => names.test(l.slice(0, l.indexOf(':'))));
}

// ---------------------------------------------------------------------------
describe('INFO counts distinct scripts and libraries (item 4)', () => {
  const COUNTS = /^number_of_(cached_scripts|functions|libraries)$/;

  /** The three counts from INFO with `sections`, through the proxy and on one Redis. */
  async function counts(...sections: string[]): Promise<[string[], string[]]> {
    return [infoFields(String(await c.call('INFO', ...sections)), COUNTS), infoFields(String(await r.call('INFO', ...sections)), COUNTS)];
  }

  test('100 SCRIPT LOADs read 100, EVALs spread over the masters count once each, one library with two functions reads 1 and 2', async () => {
    for (const x of [c, r]) {
      expect(await x.call('SCRIPT', 'FLUSH')).toBe('OK');
      expect(await x.call('FUNCTION', 'FLUSH')).toBe('OK');
    }
    const tag = Date.now();
    const loaded = Array.from({ length: 100 }, (_, i) => `return 'loaded-${tag}-${i}'`);
    for (const x of [c, r]) {
      const shas = await Promise.all(loaded.map((body) => x.call('SCRIPT', 'LOAD', body)));
      expect(shas).toEqual(loaded.map(sha1));
    }
    const [viaProxy, onOne] = await counts('memory');
    expect(viaProxy).toEqual(onOne);
    expect(viaProxy).toEqual(['number_of_cached_scripts:100', 'number_of_functions:0', 'number_of_libraries:0']);

    // 30 scripts each run once by EVAL, on keys of every master: each is cached where it ran.
    const keys = (await keyPerMaster(h.cluster(), 'counted')).map((k) => k.key);
    for (const x of [c, r]) {
      for (let i = 0; i < 30; i++) expect(await x.call('EVAL', `return KEYS[1] .. '-${tag}-${i}'`, 1, keys[i % 3])).toBe(`${keys[i % 3]}-${tag}-${i}`);
      // One of the loaded scripts run by EVAL again: still one script.
      expect(await x.call('EVAL', loaded[0], 1, keys[1])).toBe(`loaded-${tag}-0`);
    }
    const lib = `#!lua name=countlib\nredis.register_function('one', function() return 1 end)\nredis.register_function('two', function() return 2 end)`;
    for (const x of [c, r]) expect(await x.call('FUNCTION', 'LOAD', lib)).toBe('countlib');
    for (const sections of [[], ['memory'], ['everything']]) {
      const [p, one] = await counts(...sections);
      expect([sections, p]).toEqual([sections, one]);
    }
    expect((await counts())[0]).toEqual(['number_of_cached_scripts:130', 'number_of_functions:2', 'number_of_libraries:1']);
    // The masters hold them as the proxy put them: every loaded script everywhere, each EVAL on one.
    const perMaster = await Promise.all(h.cluster().masters.map(async (m) => (await m.info('memory')).get('number_of_cached_scripts')));
    expect(perMaster.map(Number).reduce((a, b) => a + b, 0)).toBe(330);

    for (const x of [c, r]) expect(await x.call('SCRIPT', 'FLUSH')).toBe('OK');
    const [p, one] = await counts('memory');
    expect(p).toEqual(one);
    expect(p[0]).toBe('number_of_cached_scripts:0');
  });
});

// ---------------------------------------------------------------------------
/** Scripts that run until killed (they write nothing, so SCRIPT KILL and FUNCTION KILL can). */
const SPIN = 'local i = 0 while true do i = i + 1 end';
const SPIN_LIB = "#!lua name=spinlib\nredis.register_function('spin', function() local i = 0 while true do i = i + 1 end end)\nredis.register_function('noop', function() return 1 end)";
const BUSY_SCRIPT = busyText('SCRIPT');

/** Resolves once `node` answers BUSY (its script runs past busy-reply-threshold). */
async function busy(node: RedisNode): Promise<void> {
  await waitFor(
    `${node.address} to be busy`,
    async () => {
      try {
        await node.command('PING');
        return false;
      } catch (err) {
        return (err as Error).message.startsWith('BUSY');
      }
    },
    10_000,
  );
}

/** A reply, or `{ err: text }` for an error reply. */
async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return await p;
  } catch (err) {
    return { err: (err as Error).message };
  }
}

/**
 * A raw connection whose replies are kept byte for byte, read by count (no sentinel: a busy node
 * would refuse it). Closed by close(), which the tests call in `finally`.
 */
class Conversation {
  private readonly socket: net.Socket;
  private readonly frames: string[] = [];
  private readonly framer = new ReplyFramer();
  private wake: () => void = () => undefined;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.on('data', (chunk) => this.framer.push(chunk, (frame) => {
      this.frames.push(frame.toString('latin1'));
      this.wake();
    }));
    this.socket.on('error', () => this.wake());
  }

  /** Sends `requests`; resolves with their replies (one each), within 10 s. */
  async send(requests: string[][]): Promise<string[]> {
    this.socket.write(requests.map(encodeRequest).join(''));
    const deadline = Date.now() + 10_000;
    while (this.frames.length < requests.length) {
      if (Date.now() > deadline || this.socket.destroyed) throw new Error(`${requests.length} replies not in; got ${JSON.stringify(this.frames)}`);
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 100);
      });
    }
    return this.frames.splice(0, requests.length);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** The replies to `requests` on a new connection, every byte. */
async function rawReplies(port: number, requests: string[][]): Promise<string[]> {
  const conversation = new Conversation(port);
  try {
    return await conversation.send(requests);
  } finally {
    conversation.close();
  }
}

/** The last reply of a raw exchange, every byte, with `duration_ms`'s value (a clock reading) masked. */
async function lastReply(port: number, requests: string[][]): Promise<string> {
  const frames = await rawReplies(port, requests);
  return frames[frames.length - 1].replace(/(duration_ms\r\n:)\d+/, '$1<ms>');
}

describe('busy scripts as one Redis', () => {
  beforeAll(async () => {
    // A short busy threshold on every node (the proxy learns it from the CONFIG SET), and on one Redis.
    for (const x of [c, r]) {
      expect(await x.call('CONFIG', 'SET', 'busy-reply-threshold', '100')).toBe('OK');
      expect(await x.call('FUNCTION', 'FLUSH')).toBe('OK');
      expect(await x.call('FUNCTION', 'LOAD', SPIN_LIB)).toBe('spinlib');
    }
  });

  describe('FUNCTION STATS merged over the masters (item 3)', () => {
    const STATS = [['FUNCTION', 'STATS']];
    const RESP3_STATS = [['HELLO', '3'], ['FUNCTION', 'STATS']];

    test('nothing running: nil, and the engines counted as one server\'s, RESP2 and RESP3', async () => {
      for (const requests of [STATS, RESP3_STATS]) {
        expect(await lastReply(h.proxy().address.port, requests)).toBe(await lastReply(refNode().port, requests));
      }
      expect(await lastReply(h.proxy().address.port, STATS)).toBe(
        '*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n',
      );
    });

    test('a function running on one master: its name, command and duration, RESP2 and RESP3; an EVAL running: BUSY', async () => {
      const [, { key, node }] = await keyPerMaster(h.cluster(), 'stats');
      const seen: unknown[][] = [];
      for (const side of await bothSides(node)) {
        const running = outcome(side.runner.call('FCALL', 'spin', '1', key));
        await busy(side.node);
        seen.push([await lastReply(side.port, STATS), await lastReply(side.port, RESP3_STATS)]);
        expect(await side.killer.call('FUNCTION', 'KILL')).toBe('OK');
        seen.push([await running]);

        const evalRunning = outcome(side.runner.call('EVAL', SPIN, '1', key));
        await busy(side.node);
        seen.push([await lastReply(side.port, STATS), await lastReply(side.port, RESP3_STATS)]);
        expect(await side.killer.call('SCRIPT', 'KILL')).toBe('OK');
        seen.push([await evalRunning]);
      }
      expect(seen.slice(0, 4)).toEqual(seen.slice(4));
      const [fcallViaProxy, fcallKilled, evalViaProxy] = seen;
      // Redis 7.0's own words for a killed function.
      expect(fcallKilled).toEqual([{ err: 'ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.' }]);
      expect(fcallViaProxy[0]).toBe(
        `*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*4\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n1\r\n$${key.length}\r\n${key}\r\n` +
          '$11\r\nduration_ms\r\n:<ms>\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n',
      );
      expect(evalViaProxy).toEqual([`-${BUSY_SCRIPT}\r\n`, `-${BUSY_SCRIPT}\r\n`]);
    });
  });

  describe('MULTI on a node busy with a script (item 5)', () => {
    const BUSY_FUNCTION = busyText('FUNCTION');

    test('queued while the script runs: BUSY, and EXEC answers EXECABORT naming it; after the script: previous errors', async () => {
      const [{ key, node }, other] = await keyPerMaster(h.cluster(), 'txbusy');
      const seen: unknown[][] = [];
      for (const side of await bothSides(node)) {
        // Busy at queue time and at EXEC: an EVAL.
        const evalRunning = outcome(side.runner.call('EVAL', SPIN, '1', key));
        await busy(side.node);
        seen.push(await rawReplies(side.port, [['MULTI'], ['SET', `{${key}}:a`, '1'], ['GET', `{${key}}:a`], ['EXEC']]));
        expect(await side.killer.call('SCRIPT', 'KILL')).toBe('OK');
        await evalRunning;
        // Busy at queue time, not at EXEC: a function, killed between them.
        const fcallRunning = outcome(side.runner.call('FCALL', 'spin', '1', key));
        await busy(side.node);
        const conversation = new Conversation(side.port);
        try {
          const queuedWhileBusy = await conversation.send([['MULTI'], ['SET', `{${key}}:a`, '2']]);
          expect(await side.killer.call('FUNCTION', 'KILL')).toBe('OK');
          await fcallRunning;
          seen.push([...queuedWhileBusy, ...(await conversation.send([['GET', `{${key}}:a`], ['EXEC']]))]);
        } finally {
          conversation.close();
        }
        expect(await side.runner.call('GET', `{${key}}:a`)).toBeNull();
      }
      expect(seen.slice(0, 2)).toEqual(seen.slice(2));
      expect(seen[0]).toEqual(['+OK\r\n', `-${BUSY_SCRIPT}\r\n`, `-${BUSY_SCRIPT}\r\n`, `-EXECABORT Transaction discarded because of: ${BUSY_SCRIPT}\r\n`]);
      expect(seen[1]).toEqual(['+OK\r\n', `-${BUSY_FUNCTION}\r\n`, '+QUEUED\r\n', '-EXECABORT Transaction discarded because of previous errors.\r\n']);

      // Only the busy node refuses: a transaction on another master's keys runs meanwhile.
      const runner = h.connect();
      await runner.ping();
      const running = outcome(runner.call('EVAL', SPIN, '1', key));
      await busy(node);
      try {
        expect(await rawReplies(h.proxy().address.port, [['MULTI'], ['SET', other.key, 'x'], ['GET', other.key], ['EXEC']])).toEqual([
          '+OK\r\n',
          '+QUEUED\r\n',
          '+QUEUED\r\n',
          '*2\r\n+OK\r\n$1\r\nx\r\n',
        ]);
      } finally {
        expect(await c.call('SCRIPT', 'KILL')).toBe('OK');
      }
      await running;
    });
  });

  describe('the default command timeout never cuts off a running script (item 6)', () => {
    /** Writes, so SCRIPT KILL cannot kill it, then runs ARGV[1] ms and answers. */
    const LONG =
      "redis.call('SET', KEYS[1], 'started') local function now() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end " +
      "local from = now() while now() - from < tonumber(ARGV[1]) do end return redis.call('GET', KEYS[1]) .. ' then done'";

    /** Four clients of `connect`, connected (ioredis's ready check would meet a busy node). */
    async function clients(connect: () => Redis): Promise<Redis[]> {
      const list = [connect(), connect(), connect(), connect()];
      await Promise.all(list.map((x) => x.ping()));
      return list;
    }

    // The timeout fails a connection once 4 checks in a row, one every 2.5 s, saw no reply: 10 to
    // 12.5 s after the request. So the script runs 13 s, and the others are killed after 12.6 s.
    test('a 13 s script gets its own reply and the request behind it its own; scripts killed past the timeout their kill errors', async () => {
      const keys = await keyPerMaster(h.cluster(), 'long');
      const [k0, k1, k2] = keys.map((k) => k.key);
      const behindKey = `{${k0}}:w`;

      // Through the proxy: the three at once, one per master, all past the timeout.
      const proxySide = (async (): Promise<unknown[]> => {
        const [runner, spinner, fspinner, killer] = await clients(() => h.connect());
        await killer.call('SET', behindKey, 'written behind');
        const started = Date.now();
        const long = outcome(runner.call('EVAL', LONG, '1', k0, '13000'));
        // Pipelined on the same lane right behind the script: it waits for the script's end.
        const behind = outcome(runner.call('GET', behindKey));
        const spin = outcome(spinner.call('EVAL', SPIN, '1', k1));
        const fspin = outcome(fspinner.call('FCALL', 'spin', '1', k2));
        await Promise.all(keys.map((k) => busy(k.node)));
        // Past the default command timeout (10 s) for each: they still run, and are killed now.
        await new Promise((resolve) => setTimeout(resolve, started + 12_600 - Date.now()));
        const kills = [await outcome(killer.call('SCRIPT', 'KILL')), await outcome(killer.call('FUNCTION', 'KILL'))];
        return [kills, await spin, await fspin, await long, await behind, Date.now() - started];
      })();

      // One Redis meanwhile, one script at a time, short ones.
      const [runner, spinner, fspinner, killer] = await clients(refConnect);
      await killer.call('SET', behindKey, 'written behind');
      const long = outcome(runner.call('EVAL', LONG, '1', k0, '300'));
      const behind = outcome(runner.call('GET', behindKey));
      const onOne: unknown[] = [[], undefined, undefined, await long, await behind];
      const spin = outcome(spinner.call('EVAL', SPIN, '1', k1));
      await busy(refNode());
      (onOne[0] as unknown[]).push(await outcome(killer.call('SCRIPT', 'KILL')));
      onOne[1] = await spin;
      const fspin = outcome(fspinner.call('FCALL', 'spin', '1', k2));
      await busy(refNode());
      (onOne[0] as unknown[]).push(await outcome(killer.call('FUNCTION', 'KILL')));
      onOne[2] = await fspin;

      const viaProxy = await proxySide;
      expect(viaProxy.slice(0, 5)).toEqual(onOne);
      expect(onOne).toEqual([
        ['OK', 'OK'],
        { err: expect.stringMatching(/^ERR Script killed by user with SCRIPT KILL\.\.\. script: [0-9a-f]{40}, on @user_script:1\.$/) },
        { err: 'ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.' },
        'started then done',
        'written behind',
      ]);
      expect(viaProxy[5]).toBeGreaterThanOrEqual(13_000);
    }, 30_000);

    test("a timeout set on purpose still cuts off a request behind a busy script, as twemproxy's timeout: does", async () => {
      const [{ key, node }] = await keyPerMaster(h.cluster(), 'strict');
      const strict = await startProxy(h.cluster().seeds, { backend: { commandTimeoutMs: 1000 } });
      const x = client(strict);
      try {
        await x.ping();
        const started = Date.now();
        expect(await outcome(x.call('EVAL', LONG, '1', key, '2500'))).toEqual({ err: `ERR slotproxy: node ${node.address} timed out (no reply within 1000 ms)` });
        expect(Date.now() - started).toBeLessThan(2500);
      } finally {
        x.disconnect();
        await strict.close(500);
      }
      await waitFor('the script to end', async () => (await outcome(node.command('PING'))) === 'PONG', 10_000);
    });
  });
});
