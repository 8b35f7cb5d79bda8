// Commands that one Redis Cluster node answers from its own state, through slotproxy as through one
// node: CLUSTER COUNTKEYSINSLOT/GETKEYSINSLOT at the master serving the slot, MOVE by its key and
// SWAPDB at any master (a cluster node refuses both in its own words), ACL WHOAMI naming the proxy
// user the client signed in as, compared byte for byte with a real Redis that has the same user.
// In ring mode (standalone nodes) MOVE and SWAPDB never reach a node, and the slot commands are refused.

import Redis from 'ioredis';
import { withoutPipelinedWrongpass } from '../helpers/server-version';
import { RedisCluster } from '../../cmd/sandbox/redis-cluster';
import { keySlot } from '../../sharding/slot';
import { useProxy, useRingProxy } from '../helpers/proxy';
import { keyPerMaster } from '../helpers/master-keys';
import { RawRequest, exchange } from '../helpers/raw-exchange';

const USER = ['--user', 'app', 'on', '>app-secret', '~*', '&*', '+@all'];

describe('cluster mode', () => {
  const { cluster, proxy, connect } = useProxy(
    { auth: { password: 'pw', users: [{ name: 'app', password: 'app-secret' }] } },
    { replicasPerMaster: 0 },
  );
  let reference: RedisCluster | undefined;
  beforeAll(async () => {
    reference = await RedisCluster.start({ masters: 1, replicasPerMaster: 0, extraArgs: USER });
  }, 60_000);
  afterAll(async () => {
    await reference?.stop();
  }, 30_000);

  /** The replies of the proxy and of the reference node (whose default user needs no password) to the same requests. */
  async function both(requests: RawRequest[]): Promise<[string, string]> {
    if (reference === undefined) throw new Error('the reference node did not start');
    const [got, want] = await Promise.all([exchange(proxy().address.port, requests), exchange(reference.masters[0].port, requests)]);
    return [got.replies, want.replies];
  }

  test('ACL WHOAMI names the user of the last AUTH or HELLO AUTH, as Redis does', async () => {
    const [got, want] = await both([
      ['AUTH', 'default', 'pw'], ['ACL', 'WHOAMI'], ['AUTH', 'app', 'app-secret'], ['ACL', 'WHOAMI'], ['AUTH', 'app', 'wrong'], ['ACL', 'WHOAMI'],
      ['AUTH', 'default', 'pw'], ['ACL', 'WHOAMI'], ['CLIENT', 'REPLY', 'SKIP'], ['HELLO', '2', 'AUTH', 'app', 'app-secret'], ['ACL', 'WHOAMI'],
      ['ACL', 'WHOAMI', 'x'], ['RESET'], ['AUTH', 'app', 'app-secret'], ['ACL', 'WHOAMI'],
    ]);
    expect(withoutPipelinedWrongpass(got)).toBe(want);
    // A failed AUTH leaves the client signed in as it was; always answered (Redis 7.2 and later write
    // nothing for a failed AUTH pipelined behind replies not yet written, leaving the client waiting).
    const wrongPass = '-WRONGPASS invalid username-password pair or user is disabled.\r\n';
    expect(got).toContain(`$3\r\napp\r\n${wrongPass}$3\r\napp\r\n`);
  });

  test('ACL CAT, HELP and GENPASS answer as one Redis', async () => {
    const [got, want] = await both([
      ['AUTH', 'default', 'pw'], ['ACL', 'CAT'], ['ACL', 'CAT', 'nope'], ['ACL', 'HELP'], ['ACL', 'GENPASS', '5000'], ['ACL', 'GENPASS', 'x'],
    ]);
    expect(got).toBe(want);
    const c = connect({ password: 'pw' });
    expect(await c.call('ACL', 'GENPASS')).toMatch(/^[0-9a-f]{64}$/);
    expect(await c.call('ACL', 'GENPASS', '10')).toMatch(/^[0-9a-f]{3}$/);
  });

  test('CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT answer from the master serving the slot, on every master', async () => {
    const c = connect({ password: 'pw' });
    const keys = await keyPerMaster(cluster(), 'inslot');
    for (const { key, node } of keys) {
      const tagged = [`{${key}}a`, `{${key}}b`, `{${key}}c`];
      for (const k of tagged) await c.set(k, '1');
      const slot = String(keySlot(Buffer.from(key)));
      expect(await c.call('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(3);
      expect(await node.command('CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(3);
      const listed = (await c.call('CLUSTER', 'GETKEYSINSLOT', slot, '10')) as string[];
      expect([...listed].sort()).toEqual(tagged);
      expect(listed).toEqual(await node.command('CLUSTER', 'GETKEYSINSLOT', slot, '10'));
      // In a transaction the slot binds it, as a key of that slot would.
      expect(await c.multi().set(tagged[0], '2').call('CLUSTER', 'COUNTKEYSINSLOT', slot).exec()).toEqual([[null, 'OK'], [null, 3]]);
      await c.del(...tagged);
    }
    const [got, want] = await both([
      ['AUTH', 'default', 'pw'], ['CLUSTER', 'COUNTKEYSINSLOT', '16384'], ['CLUSTER', 'COUNTKEYSINSLOT', '-1'], ['CLUSTER', 'COUNTKEYSINSLOT', 'x'],
      ['CLUSTER', 'GETKEYSINSLOT', '0', '-1'], ['CLUSTER', 'GETKEYSINSLOT', '0', 'x'], ['CLUSTER', 'GETKEYSINSLOT', '16384', '1'], ['CLUSTER', 'GETKEYSINSLOT', '0'],
    ]);
    expect(got).toBe(want);
  });

  test('MOVE and SWAPDB: the cluster node\'s own refusal, after Redis\'s arity checks, inside MULTI too', async () => {
    const requests: RawRequest[] = [
      ['AUTH', 'default', 'pw'], ['SET', 'mv', '1'], ['MOVE', 'mv', '1'], ['MOVE', 'mv', 'x'], ['MOVE', 'mv'], ['SWAPDB', '0', '1'], ['SWAPDB', 'a', 'b'],
      ['SWAPDB', '0'], ['MULTI'], ['MOVE', 'mv', '1'], ['SWAPDB', '0', '1'], ['EXEC'], ['GET', 'mv'], ['DEL', 'mv'],
    ];
    const [got, want] = await both(requests);
    expect(got).toBe(want);
    expect(got).toContain('-ERR MOVE is not allowed in cluster mode\r\n');
    expect(got).toContain('-ERR SWAPDB is not allowed in cluster mode\r\n');
  });
});

describe('ring mode', () => {
  const ring = useRingProxy(2);

  test('MOVE and SWAPDB get a cluster node\'s answer from the proxy; no node moves or swaps anything', async () => {
    const c = ring.connect();
    await c.set('ring-mv', 'v');
    await expect(c.call('MOVE', 'ring-mv', '1')).rejects.toThrow(/^ERR MOVE is not allowed in cluster mode$/);
    await expect(c.call('SWAPDB', '0', '1')).rejects.toThrow(/^ERR SWAPDB is not allowed in cluster mode$/);
    await expect(c.call('MOVE', 'ring-mv')).rejects.toThrow("ERR wrong number of arguments for 'move' command");
    expect(await c.get('ring-mv')).toBe('v');
    for (const node of ring.backend().nodes) {
      const direct = new Redis({ port: node.port, db: 1, maxRetriesPerRequest: 0 });
      try {
        expect(await direct.dbsize()).toBe(0);
      } finally {
        direct.disconnect();
      }
    }
    await c.del('ring-mv');
  });

  test('CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT are refused: a ring keeps no keys by slot', async () => {
    const c = ring.connect();
    const refusal = "ERR slotproxy does not support 'CLUSTER': in ring mode keys are placed on a hash ring, not in hash slots; no node keeps them by slot";
    await expect(c.call('CLUSTER', 'COUNTKEYSINSLOT', '0')).rejects.toThrow(refusal);
    await expect(c.call('CLUSTER', 'GETKEYSINSLOT', '0', '1')).rejects.toThrow(refusal);
    expect(await c.call('ACL', 'WHOAMI')).toBe('default');
  });
});
