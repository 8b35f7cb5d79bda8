/**
 * Before a migration starts: side B must run the same Redis version as side A or a newer one. Keys
 * move by DUMP and RESTORE, and a node refuses the payload of a newer version ("DUMP payload
 * version or checksum are wrong": Redis 7.4 writes RDB version 12, which 7.0 does not read), so a
 * newer A into an older B would fail key by key; it is refused before double-write, naming both.
 * Versions are INFO server's redis_version (Valkey 8 says 7.2.4, the Redis it reads and writes
 * the RDB of); a node that does not answer is left to the other checks.
 */
import { BackendPool } from '../backend/pool';
import { request } from '../backend/request';
import { decodeReply, errorText } from '../resp/decode-reply';
import { Placement } from '../../sharding/migration';

interface NodeVersion {
  address: string;
  /** [major, minor, patch] of redis_version. */
  version: number[];
  text: string;
}

async function nodeVersion(pool: BackendPool, address: string, timeoutMs: number): Promise<NodeVersion | null> {
  try {
    const reply = await request(pool.connection(address, 0), ['INFO', 'server'], timeoutMs);
    if (errorText(reply) !== null) return null;
    const info = String(decodeReply(reply));
    const redis = /(?:^|\r\n)redis_version:([^\r\n]+)/.exec(info)?.[1];
    if (redis === undefined) return null;
    const name = /(?:^|\r\n)server_name:([^\r\n]+)/.exec(info)?.[1];
    const own = name === undefined ? undefined : new RegExp(`(?:^|\\r\\n)${name}_version:([^\\r\\n]+)`).exec(info)?.[1];
    const text = name !== undefined && own !== undefined ? `${name} ${own} (redis_version ${redis})` : `Redis ${redis}`;
    return { address, version: redis.split('.').map((p) => Number.parseInt(p, 10) || 0), text };
  } catch {
    return null;
  }
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/** Why the migration must not start (a node of A newer than a node of B), or null. */
export async function versionProblem(pool: BackendPool, placement: Placement, timeoutMs: number): Promise<string | null> {
  if (placement.to === null) return null;
  const ask = (nodes: readonly string[]): Promise<NodeVersion[]> =>
    Promise.all(nodes.map((n) => nodeVersion(pool, n, timeoutMs))).then((vs) => vs.filter((v): v is NodeVersion => v !== null));
  const [a, b] = await Promise.all([ask(placement.from.masters()), ask(placement.to.masters())]);
  if (a.length === 0 || b.length === 0) return null;
  const newestA = a.reduce((x, y) => (compare(y.version, x.version) > 0 ? y : x));
  const oldestB = b.reduce((x, y) => (compare(y.version, x.version) < 0 ? y : x));
  if (compare(newestA.version, oldestB.version) <= 0) return null;
  return (
    `side A's node ${newestA.address} runs ${newestA.text}, newer than side B's node ${oldestB.address} (${oldestB.text}): ` +
    'keys move by DUMP and RESTORE, and a node refuses the DUMP payload of a newer version; side B must run the same version as side A or a newer one'
  );
}
