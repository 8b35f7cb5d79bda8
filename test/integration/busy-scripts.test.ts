// Scripts and functions as one server (issue 31, items 3-6), through slotproxy in front of 3 masters,
// compared byte for byte with one Redis (a single-node cluster owning every slot): INFO's counts of
// scripts and libraries, FUNCTION STATS merged over the masters, MULTI on a node busy with a script,
// and a busy script never cut off by the default command timeout.

import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { RedisNode } from '../../cmd/sandbox/redis-node';
import { useProxy } from '../helpers/proxy';
import { keyPerMaster, waitFor } from '../helpers/master-keys';

// The default backend.commandTimeoutMs (10000): nothing set on purpose.
const h = useProxy({}, { masters: 3, replicasPerMaster: 0 });

let ref: RedisCluster | undefined;
const refClients: Redis[] = [];
/** A client of the proxy and one of the reference node. */
let c: Redis;
let r: Redis;

beforeAll(async () => {
  ref = await RedisCluster.start({ masters: 1, replicasPerMaster: 0 });
  c = h.connect();
  r = refConnect();
}, 60_000);

afterAll(async () => {
  for (const x of refClients) x.disconnect();
  await ref?.stop();
}, 30_000);

function refNode(): RedisNode {
  if (ref === undefined) throw new Error('the reference node did not start');
  return ref.nodes[0];
}

/** A client of the reference single-node cluster, closed in afterAll. */
function refConnect(): Redis {
  const x = new Redis({ port: refNode().port, maxRetriesPerRequest: 0 });
  refClients.push(x);
  return x;
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
