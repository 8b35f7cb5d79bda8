// SlotMap: built from a decoded CLUSTER SLOTS reply (numbers and strings as redis-parser gives them),
// frozen, and copied on MOVED.
import { Reply } from '../../proxy/resp/decode-reply';
import { SLOT_COUNT, SlotMap } from '../../proxy/cluster/slot-map';

/** The shape of a 3-master, 3-replica sandbox, ranges deliberately out of order. */
const THREE_MASTERS: Reply = [
  [10923, 16383, ['127.0.0.1', 7003, 'id3'], ['127.0.0.1', 7006, 'id6']],
  [0, 5460, ['127.0.0.1', 7001, 'id1'], ['127.0.0.1', 7004, 'id4']],
  [5461, 10922, ['127.0.0.1', 7002, 'id2'], ['127.0.0.1', 7005, 'id5']],
];

function owners(map: SlotMap, slots: readonly number[]): Array<string | null> {
  return slots.map((s) => map.ownerOf(s));
}

describe('SlotMap.fromClusterSlots', () => {
  const map = SlotMap.fromClusterSlots(THREE_MASTERS, '127.0.0.1');

  test.each<[number, string]>([
    [0, '127.0.0.1:7001'],
    [1, '127.0.0.1:7001'],
    [5460, '127.0.0.1:7001'],
    [5461, '127.0.0.1:7002'],
    [10922, '127.0.0.1:7002'],
    [10923, '127.0.0.1:7003'],
    [16383, '127.0.0.1:7003'],
    [12182, '127.0.0.1:7003'], // "foo"
    [5061, '127.0.0.1:7001'], // "bar"
  ])('slot %i is served by %s', (slot, address) => {
    expect(map.ownerOf(slot)).toBe(address);
  });

  test('masters are ordered by the first slot they serve, with their replicas', () => {
    expect(map.masters).toEqual([
      { address: '127.0.0.1:7001', replicas: ['127.0.0.1:7004'] },
      { address: '127.0.0.1:7002', replicas: ['127.0.0.1:7005'] },
      { address: '127.0.0.1:7003', replicas: ['127.0.0.1:7006'] },
    ]);
    expect(map.servedSlots).toBe(SLOT_COUNT);
  });

  test('addresses() names every master and replica', () => {
    expect([...map.addresses()].sort()).toEqual([7001, 7002, 7003, 7004, 7005, 7006].map((p) => `127.0.0.1:${p}`));
  });

  test('a master with several ranges is one master; its replicas are merged without duplicates', () => {
    const m = SlotMap.fromClusterSlots(
      [
        [200, 299, ['10.0.0.2', 6379, 'b'], ['10.0.0.12', 6379, 'b1']],
        [0, 99, ['10.0.0.1', 6379, 'a'], ['10.0.0.11', 6379, 'a1']],
        [100, 199, ['10.0.0.1', 6379, 'a'], ['10.0.0.11', 6379, 'a1'], ['10.0.0.21', 6379, 'a2']],
        [300, 16383, ['10.0.0.1', 6379, 'a']],
      ],
      '10.0.0.1',
    );
    expect(m.masters).toEqual([
      { address: '10.0.0.1:6379', replicas: ['10.0.0.11:6379', '10.0.0.21:6379'] },
      { address: '10.0.0.2:6379', replicas: ['10.0.0.12:6379'] },
    ]);
    expect(owners(m, [0, 99, 100, 199, 200, 299, 300, 16383])).toEqual([
      '10.0.0.1:6379', '10.0.0.1:6379', '10.0.0.1:6379', '10.0.0.1:6379',
      '10.0.0.2:6379', '10.0.0.2:6379', '10.0.0.1:6379', '10.0.0.1:6379',
    ]);
  });

  test('a master without replicas has an empty replica list', () => {
    const m = SlotMap.fromClusterSlots([[0, 16383, ['127.0.0.1', 7001, 'id1']]], '127.0.0.1');
    expect(m.masters).toEqual([{ address: '127.0.0.1:7001', replicas: [] }]);
  });

  test('unserved slots give null and are not counted', () => {
    const m = SlotMap.fromClusterSlots(
      [
        [0, 99, ['127.0.0.1', 7001, 'id1']],
        [16000, 16383, ['127.0.0.1', 7002, 'id2']],
      ],
      '127.0.0.1',
    );
    expect(owners(m, [0, 99, 100, 8000, 15999, 16000, 16383])).toEqual([
      '127.0.0.1:7001', '127.0.0.1:7001', null, null, null, '127.0.0.1:7002', '127.0.0.1:7002',
    ]);
    expect(m.servedSlots).toBe(100 + 384);
  });

  test('an empty reply serves nothing', () => {
    const m = SlotMap.fromClusterSlots([], '127.0.0.1');
    expect(m.servedSlots).toBe(0);
    expect(m.masters).toEqual([]);
    expect(m.ownerOf(0)).toBeNull();
  });

  test.each<[string, Reply, string]>([
    ['empty host (Redis 7: "the node you asked")', '', '10.1.2.3:7001'],
    ['"?" host (unknown endpoint)', '?', '10.1.2.3:7001'],
    ['host as a Buffer (returnBuffers)', Buffer.from('10.9.9.9'), '10.9.9.9:7001'],
    ['hostname', 'redis-1.internal', 'redis-1.internal:7001'],
    ['IPv6 address', '::1', '[::1]:7001'],
  ])('%s', (_name, host, address) => {
    const m = SlotMap.fromClusterSlots([[0, 16383, [host, 7001, 'id1'], [host, 7004, 'id4']]], '10.1.2.3');
    expect(m.ownerOf(0)).toBe(address);
    expect(m.masters[0].replicas).toEqual([address.replace('7001', '7004')]);
  });

  test('extra node fields (Redis 7 hostname metadata) are ignored', () => {
    const m = SlotMap.fromClusterSlots(
      [[0, 16383, ['127.0.0.1', 7001, 'id1', ['hostname', 'node-1']], ['127.0.0.1', 7004, 'id4', []]]],
      '127.0.0.1',
    );
    expect(m.masters).toEqual([{ address: '127.0.0.1:7001', replicas: ['127.0.0.1:7004'] }]);
  });

  test.each<[string, Reply, string]>([
    ['start after end', [[5, 4, ['127.0.0.1', 7001, 'id1']]], 'CLUSTER SLOTS range 5-4 is invalid'],
    ['negative start', [[-1, 4, ['127.0.0.1', 7001, 'id1']]], 'CLUSTER SLOTS range -1-4 is invalid'],
    ['end past the last slot', [[0, 16384, ['127.0.0.1', 7001, 'id1']]], 'CLUSTER SLOTS range 0-16384 is invalid'],
    ['entry without a master', [[0, 16383]], 'CLUSTER SLOTS entry without a master'],
    ['range bounds as strings', [['0', '16383', ['127.0.0.1', 7001, 'id1']]], 'expected an integer in a back-end reply, got string'],
    ['port as a string', [[0, 16383, ['127.0.0.1', '7001', 'id1']]], 'expected an integer in a back-end reply, got string'],
    ['not an array', 'OK', 'expected an array in a back-end reply, got string'],
    ['null', null, 'expected an array in a back-end reply, got null'],
    ['an entry that is not an array', [5], 'expected an array in a back-end reply, got number'],
  ])('invalid: %s throws', (_name, reply, message) => {
    expect(() => SlotMap.fromClusterSlots(reply, '127.0.0.1')).toThrow(new Error(message));
  });

  test('the map and what it hands out are frozen', () => {
    expect(Object.isFrozen(map)).toBe(true);
    expect(Object.isFrozen(map.masters)).toBe(true);
    for (const m of map.masters) {
      expect(Object.isFrozen(m)).toBe(true);
      expect(Object.isFrozen(m.replicas)).toBe(true);
    }
  });

  test('changing a returned addresses() set does not change the map', () => {
    map.addresses().add('1.2.3.4:5');
    expect(map.addresses().has('1.2.3.4:5')).toBe(false);
  });
});

describe('SlotMap.empty', () => {
  test('serves nothing', () => {
    const m = SlotMap.empty();
    expect(m.servedSlots).toBe(0);
    expect(m.masters).toEqual([]);
    expect(owners(m, [0, 8191, 16383])).toEqual([null, null, null]);
    expect([...m.addresses()]).toEqual([]);
  });
});

describe('SlotMap.withSlotMoved', () => {
  const original = SlotMap.fromClusterSlots(THREE_MASTERS, '127.0.0.1');
  const before = Array.from({ length: SLOT_COUNT }, (_, s) => original.ownerOf(s));

  function unchanged(): void {
    expect(Array.from({ length: SLOT_COUNT }, (_, s) => original.ownerOf(s))).toEqual(before);
    expect(original.masters.map((m) => m.address)).toEqual(['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7003']);
  }

  test('to a known master: a copy with that one slot changed', () => {
    const moved = original.withSlotMoved(100, '127.0.0.1:7002');
    expect(moved).not.toBe(original);
    expect(owners(moved, [99, 100, 101])).toEqual(['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7001']);
    expect(moved.masters).toBe(original.masters);
    expect(moved.servedSlots).toBe(SLOT_COUNT);
    for (let s = 0; s < SLOT_COUNT; s++) if (s !== 100) expect(moved.ownerOf(s)).toBe(before[s]);
    expect(Object.isFrozen(moved)).toBe(true);
    unchanged();
  });

  test('to a new master: the master is added, without replicas', () => {
    const moved = original.withSlotMoved(16383, '127.0.0.1:7010');
    expect(moved.ownerOf(16383)).toBe('127.0.0.1:7010');
    expect(moved.ownerOf(16382)).toBe('127.0.0.1:7003');
    expect(moved.masters.map((m) => m.address)).toEqual(['127.0.0.1:7001', '127.0.0.1:7002', '127.0.0.1:7003', '127.0.0.1:7010']);
    expect(moved.masters[3].replicas).toEqual([]);
    expect(Object.isFrozen(moved.masters[3])).toBe(true);
    expect(moved.addresses().has('127.0.0.1:7010')).toBe(true);
    unchanged();
  });

  test('to the master that already serves it: the same map', () => {
    expect(original.withSlotMoved(0, '127.0.0.1:7001')).toBe(original);
    unchanged();
  });

  test('an unserved slot becomes served', () => {
    const partial = SlotMap.fromClusterSlots([[0, 99, ['127.0.0.1', 7001, 'id1']]], '127.0.0.1');
    const moved = partial.withSlotMoved(500, '127.0.0.1:7001');
    expect(moved.ownerOf(500)).toBe('127.0.0.1:7001');
    expect(moved.servedSlots).toBe(101);
    expect(partial.ownerOf(500)).toBeNull();
    expect(partial.servedSlots).toBe(100);
  });

  test('moves chain, each map keeping its own view', () => {
    const a = original.withSlotMoved(1, '127.0.0.1:7003');
    const b = a.withSlotMoved(2, '127.0.0.1:7003');
    const c = b.withSlotMoved(1, '127.0.0.1:7001');
    expect(owners(original, [1, 2])).toEqual(['127.0.0.1:7001', '127.0.0.1:7001']);
    expect(owners(a, [1, 2])).toEqual(['127.0.0.1:7003', '127.0.0.1:7001']);
    expect(owners(b, [1, 2])).toEqual(['127.0.0.1:7003', '127.0.0.1:7003']);
    expect(owners(c, [1, 2])).toEqual(['127.0.0.1:7001', '127.0.0.1:7003']);
  });
});
