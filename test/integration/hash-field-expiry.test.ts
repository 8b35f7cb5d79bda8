// Redis 7.4's hash-field expiry commands through slotproxy: routed by the key specs of the back
// end's COMMAND table, on every master, answering as the node does; where the back end does not
// have them (Redis 7.0, Valkey 8.0), the node's own `ERR unknown command`.
import { useProxy } from '../helpers/proxy';
import { keyPerMaster } from '../helpers/master-keys';
import { errorOf } from '../helpers/reply-error';
import { SERVER, redisAtLeast } from '../helpers/server-version';

const { cluster, connect } = useProxy({}, { masters: 3, replicasPerMaster: 0 });

// HEXPIRE and its family came with Redis 7.4; Valkey 8.0 (a fork of 7.2) has none of them.
const HAS_FIELD_EXPIRY = SERVER.flavor === 'redis' && redisAtLeast(7, 4);

if (HAS_FIELD_EXPIRY) {
  test('HEXPIRE ... HPERSIST on a key of every master: the same replies as its node, the fields expire', async () => {
    const c = connect();
    for (const { key, node } of await keyPerMaster(cluster(), 'hfe')) {
      expect(await c.hset(key, 'a', '1', 'b', '2', 'c', '3')).toBe(3);
      const direct = (args: (string | number)[]): Promise<unknown> => node.command(...args.map(String));
      expect(await c.call('HEXPIRE', key, 100, 'FIELDS', 2, 'a', 'missing')).toEqual([1, -2]);
      expect(await c.call('HPEXPIRE', key, 100_000, 'NX', 'FIELDS', 1, 'b')).toEqual([1]);
      expect(await c.call('HEXPIREAT', key, Math.floor(Date.now() / 1000) + 100, 'FIELDS', 1, 'c')).toEqual([1]);
      expect(await c.call('HPEXPIREAT', key, Date.now() + 100_000, 'GT', 'FIELDS', 1, 'c')).toEqual([1]);
      const ttl = (await c.call('HTTL', key, 'FIELDS', 2, 'a', 'missing')) as number[];
      expect(ttl[0]).toBeGreaterThan(90);
      expect(ttl[1]).toBe(-2);
      expect(((await c.call('HPTTL', key, 'FIELDS', 1, 'b')) as number[])[0]).toBeGreaterThan(90_000);
      expect(await c.call('HEXPIRETIME', key, 'FIELDS', 1, 'a')).toEqual(await direct(['HEXPIRETIME', key, 'FIELDS', 1, 'a']));
      expect(await c.call('HPEXPIRETIME', key, 'FIELDS', 1, 'b')).toEqual(await direct(['HPEXPIRETIME', key, 'FIELDS', 1, 'b']));
      expect(await c.call('HPERSIST', key, 'FIELDS', 2, 'a', 'missing')).toEqual([1, -2]);
      expect(await c.call('HTTL', key, 'FIELDS', 1, 'a')).toEqual([-1]);
      // A field that runs out is gone, as on the node.
      expect(await c.call('HPEXPIRE', key, 50, 'FIELDS', 1, 'a')).toEqual([1]);
      for (const deadline = Date.now() + 5000; (await c.hexists(key, 'a')) === 1; ) {
        if (Date.now() > deadline) throw new Error(`field a of ${key} did not expire`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await c.hgetall(key)).toEqual({ b: '2', c: '3' });
    }
    // Routed by the key: a CROSSSLOT-free command of one key, the node's errors passed on.
    expect(await errorOf(c.call('HEXPIRE', 'hfe:x', 10, 'FIELDS', 0))).toBe(
      String(await cluster().masters[0].command('HEXPIRE', 'hfe:x', '10', 'FIELDS', '0').catch((e: Error) => e.message)),
    );
  });
} else {
  test(`HEXPIRE and its family are unknown to ${SERVER.text}: the proxy answers as the node does`, async () => {
    const c = connect();
    const [{ key, node }] = await keyPerMaster(cluster(), 'hfe');
    for (const args of [['HEXPIRE', key, '10', 'FIELDS', '1', 'a'], ['HTTL', key, 'FIELDS', '1', 'a'], ['HPERSIST', key, 'FIELDS', '1', 'a']]) {
      const onNode = await node.command(...args).then(() => 'answered', (e: Error) => e.message);
      expect(onNode).toMatch(/^ERR unknown command/);
      expect(await errorOf(c.call(args[0], ...args.slice(1)))).toBe(onNode);
    }
  });
}
