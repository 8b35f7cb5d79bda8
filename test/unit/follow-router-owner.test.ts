import { FollowRouter } from '../../proxy/migration/follow-router';
import { CommandTable } from '../../proxy/commands/table';
import { Ring } from '../../sharding/ring';
import { ownerOfKey } from '../../sharding/key-space';

const node = (port: number): { addr: string; weight: number } => ({ addr: `127.0.0.1:${port}`, weight: 1 });
const table = {} as CommandTable; // ownerInB reads no command

/** What ownerInB must answer: the key's node in B when it is the source's in A and moves. */
function expected(from: Ring, to: Ring, source: string, key: Buffer): string | null {
  if (ownerOfKey(from, key) !== source) return null;
  const b = ownerOfKey(to, key);
  return b === source ? null : b;
}

test.each([
  ['a ring grown, hashing alike (one hash for both sides)', 'md5', 'md5', '{}'],
  ['rings hashing differently', 'md5', 'fnv1a_64', '{}'],
  ['whole keys hashed on A, tags on B', 'md5', 'md5', null],
] as const)('%s: each key\'s owner in B as both sides place it', (_name, hashA, hashB, tagB) => {
  const from = new Ring({ hash: hashA, hashTag: '{}', nodes: [node(7000), node(7001)] });
  const to = new Ring({ hash: hashB, hashTag: tagB, nodes: [node(7000), node(7001), node(7002)] });
  for (const source of from.masters()) {
    const router = new FollowRouter(table, from, to, source);
    let moving = 0;
    for (let i = 0; i < 3000; i++) {
      const key = Buffer.from(i % 3 === 0 ? `{tag${i % 97}}:k${i}` : `key:${i}`);
      const want = expected(from, to, source, key);
      if (want !== null) moving++;
      expect([key.toString(), router.ownerInB(key)]).toEqual([key.toString(), want]);
    }
    expect(moving).toBeGreaterThan(100);
  }
});
